"""The "normalise the layers before mixing" check box the analysis views share (one mix rule:
the Contexts and Projection views offer the same normalisation,
:func:`elmo_engine.analysis.contexts.compare.layer_stats`)."""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox

LAYER_NORM_TIP = ("normalise every layer by its mean and standard deviation over {scope} before "
                  "mixing, as AllenNLP's ScalarMix(do_layer_norm=True) does (otherwise layer "
                  "0's larger norm dominates the mix)")


def layer_norm_box(label: str, scope: str) -> QCheckBox:
    """The layer-normalisation check box, checked (the default everywhere)."""
    box = QCheckBox(label)
    box.setChecked(True)
    box.setToolTip(LAYER_NORM_TIP.format(scope=scope))
    return box
