"""Pieces the analysis panels share: the worker wiring of a panel that runs jobs, and the
"normalise the layers before mixing" check box (one mix rule: the Contexts and Projection views
offer the same normalisation, :func:`elmo_engine.analysis.compare.layer_stats`)."""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox

LAYER_NORM_TIP = ("normalise every layer by its mean and standard deviation over {scope} before "
                  "mixing, as AllenNLP's ScalarMix(do_layer_norm=True) does (otherwise layer "
                  "0's larger norm dominates the mix)")


def connect_worker(panel, workspace) -> None:
    """Connect the model and worker signals a job-running panel listens to: ``panel`` has
    ``_on_model``, ``_set_ready``, ``_on_progress(job_id, …)`` and ``_on_finished(job_id, …)``
    (a failed job ends like a finished one: the panel looks its job up and finds no result)."""
    workspace.model_changed.connect(panel._on_model)
    workspace.model_load_failed.connect(lambda *_: panel._set_ready())
    workspace.worker.job_progress.connect(panel._on_progress)
    workspace.worker.job_finished.connect(panel._on_finished)
    workspace.worker.job_failed.connect(lambda job_id, _message: panel._on_finished(job_id))


def layer_norm_box(label: str, scope: str) -> QCheckBox:
    """The layer-normalisation check box, checked (the default everywhere)."""
    box = QCheckBox(label)
    box.setChecked(True)
    box.setToolTip(LAYER_NORM_TIP.format(scope=scope))
    return box
