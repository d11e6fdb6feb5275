"""File → Export vectors… and Export report…: the dialogs and the jobs, as functions of values.

:class:`~elmo_explorer.persistence.workspace_actions.WorkspaceActions` calls them: the ``ask_*``
functions run the dialogs (GUI thread) and return what the user chose; ``vectors_job`` and
``report_job`` take copies of what they need and return the job for the worker's long lane.
The report is the engine's (:func:`elmo_engine.analysis.report.export_report`, the code path of
``elmo-explorer export report`` and ``elmo-explorer report`` too): the same workspace gives the
same files, figures drawn by the engine at the dialog's size and dpi (never a screenshot).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from elmo_engine.io import workspace_file as wf
from elmo_explorer.common.figure_export import FigureOptions, ReportDialog, VectorDialog
from elmo_explorer.persistence.workspace_state import guarded
from elmo_explorer.state.workspace import Workspace
from elmo_explorer.views.protocol import AnalysisPanel

Panels = Iterable[Tuple[str, AnalysisPanel]]
VECTOR_FILTERS = {"npz": "NumPy (*.npz)", "hdf5": "HDF5, AllenNLP layout (*.hdf5)",
                  "csv": "CSV (*.csv)", "tsv": "Projector folder (*)"}


def confirm_overwrite(parent: QWidget, path: Path) -> Optional[bool]:
    """None: cancelled; else the overwrite flag to use."""
    if not path.exists():
        return False
    answer = QMessageBox.question(parent, "Replace?", f"{path}\nexists already. Replace it?")
    return True if answer == QMessageBox.StandardButton.Yes else None


def ask_target(parent: QWidget, title: str, filters: str, start: str) -> Optional[Path]:
    name, _ = QFileDialog.getSaveFileName(parent, title, start, filters,
                                          options=QFileDialog.Option.DontConfirmOverwrite)
    return Path(name) if name else None


# ---- vectors ------------------------------------------------------------------------------
def ask_vector_export(parent: QWidget, ws: Workspace, panels: Panels,
                      start: str) -> Optional[Tuple[Path, Dict[str, Any], bool]]:
    """The vector dialog, the target and the overwrite question: ``(path, options,
    overwrite)``, or None when the user cancelled."""
    dlg = VectorDialog(ws, mix_hint(panels), parent)
    if not dlg.exec():
        return None
    opts = dlg.options()
    path = ask_target(parent, "Export vectors", VECTOR_FILTERS[opts["fmt"]], start)
    if path is None:
        return None
    if opts["fmt"] != "tsv" and not path.suffix:
        path = path.with_suffix("." + opts["fmt"])
    overwrite = confirm_overwrite(parent, path)
    return None if overwrite is None else (path, opts, overwrite)


def mix_hint(panels: Panels) -> Optional[List[float]]:
    """The contexts view's mix weights, offered as the default of a mix export."""
    panel = dict(panels).get("contexts")
    state = guarded(panel, "view_state", panel.view_state, {}) if panel is not None else None
    w = state.get("weights") if isinstance(state, dict) else None
    return [float(x) for x in w] if isinstance(w, list) else None


def vectors_job(ws: Workspace, path: Path, opts: Dict[str, Any],
                overwrite: bool) -> Callable[[Any], Any]:
    """The export job: the workspace's tokens and activations copied now (GUI thread).
    ``opts``: fmt, layers, weights, gamma, scope (all|word|token)."""
    from elmo_engine.io.vectors import LayerChoice, export_vectors as write_vectors

    tokens, acts = [list(t) for t in ws.tokens], list(ws.activations)
    refs = None
    if opts.get("scope") == "word" and ws.selection is not None:
        refs = [(r.sentence, r.token) for r in ws.occurrences(ws.word_at(ws.selection))]
    elif opts.get("scope") == "token" and ws.selection is not None:
        refs = [(ws.selection.sentence, ws.selection.token)]
    w = opts.get("weights")
    choice = LayerChoice(opts.get("layers", "each"), tuple(w) if w else None,
                         float(opts.get("gamma", 1.0)))
    return lambda state: write_vectors(path, tokens, acts, opts.get("fmt"), choice, refs,
                                       overwrite, state)


# ---- report -------------------------------------------------------------------------------
def ask_report_export(parent: QWidget, options: FigureOptions,
                      start: str) -> Optional[Tuple[Path, FigureOptions, bool]]:
    """The report dialog, the folder and the overwrite question: ``(folder, figure options,
    overwrite)``, or None when the user cancelled."""
    dlg = ReportDialog(options, parent)
    if not dlg.exec():
        return None
    options = dlg.options()
    path = ask_target(parent, "Export report (a new folder)", "Report folder (*)", start)
    if path is None:
        return None
    overwrite = confirm_overwrite(parent, path)
    return None if overwrite is None else (path, options, overwrite)


def report_job(ws: Workspace, data: wf.WorkspaceData, folder: Path, options: FigureOptions,
               overwrite: bool, source: str) -> Callable[[Any], Any]:
    """The job that writes the report folder (worker): the engine's one report path
    (:func:`elmo_engine.analysis.report.export_report`, also ``export report`` and ``report``)
    on the workspace's state ``data`` (copied now, GUI thread), with the loaded model and the
    activations already computed; figures at the dialog's width and dpi exactly."""
    emb = ws.embedder
    if emb is None:
        raise LookupError("no model is loaded yet: wait until it has loaded, then export")
    tokens = [list(t) for t in ws.tokens]
    acts = list(ws.activations)
    style = options.style()

    def job(state):
        from elmo_engine.analysis.report import export_report
        from elmo_engine.index.report import REPORT_ANN_TOKENS

        # the Corpus view holds its index's graphs already: a large one's any-word
        # concordance is left to the view, not loaded a second time
        _spec, files = export_report(data, source, emb, folder, style, overwrite=overwrite,
                                     tokens=tokens, acts=acts, state=state,
                                     corpus_ann_limit=REPORT_ANN_TOKENS)
        return files

    return job
