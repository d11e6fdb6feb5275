"""File → Export vectors… and Export report…: the dialogs and the jobs, as functions of values.

:class:`~elmo_explorer.persistence.workspace_actions.WorkspaceActions` calls them: the ``ask_*``
functions run the dialogs (GUI thread) and return what the user chose; ``vectors_job`` and
``report_job`` take copies of what they need and return the job for the worker's long lane.
The report draws every panel's own figures (matplotlib through the engine's one figure path; a
view is never pasted in as a screenshot), then gathers the engine's report of the analysis
(:func:`elmo_engine.analysis.report.report_spec`) with the panels' tables and writes the folder.
"""
from __future__ import annotations

import shutil
import tempfile
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


def render_figures(panels: Panels, tmp: Path, options: FigureOptions) -> List[tuple]:
    """Every panel's own figures (the engine's figure path; no screenshots of views):
    ``[(path, caption)]``."""
    figures: List[tuple] = []
    for name, panel in panels:
        (tmp / name).mkdir()
        own = guarded(panel, "report_figures",
                      lambda p=panel, n=name: p.report_figures(tmp / n, options), [])
        figures += [(Path(p), f"{panel.title}: {Path(p).stem.replace('_', ' ')}") for p in own]
    return figures


def report_job(ws: Workspace, panels: Panels, data: wf.WorkspaceData, folder: Path,
               options: FigureOptions, overwrite: bool, source: str) -> Callable[[Any], Any]:
    """Render the panels' figures and collect their tables now (GUI thread); return the job
    that writes the report folder."""
    panels = list(panels)
    tmp = Path(tempfile.mkdtemp(prefix="elmo-report-"))
    figures = render_figures(panels, tmp, options)
    tables = [t for _n, p in panels for t in guarded(p, "report_tables", p.report_tables, [])]
    info = ws.model_info
    tokens, acts = [list(t) for t in ws.tokens], list(ws.activations)

    def job(state):
        from elmo_engine.analysis.report import report_spec
        from elmo_engine.io.report import ReportFigure, write_report

        try:
            (tmp / "engine").mkdir()
            spec = report_spec(data, tokens, acts, info.describe() if info else None, source,
                               figure_dir=tmp / "engine", formats=options.formats,
                               contexts=False)    # the contexts view gives its own, as shown
            spec.tables += list(tables)
            spec.figures = [ReportFigure(p, c) for p, c in figures] + spec.figures
            spec.parameters["figures"] = {"width (in)": options.width_in,
                                          "height (in)": options.height_in,
                                          "PNG dpi": options.dpi}
            return write_report(folder, spec, overwrite, state)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    return job
