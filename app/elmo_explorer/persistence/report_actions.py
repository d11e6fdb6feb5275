"""File → Export vectors… and Export report…: dialogs on the GUI thread, files on the worker.

The report draws every panel's own figures (matplotlib through the engine's one figure path; a
view is never pasted in as a screenshot), then gathers the engine's report of the analysis
(:func:`elmo_engine.analysis.report.report_spec`) with the panels' tables and writes the folder
on the worker. Used by :class:`elmo_explorer.persistence.workspace_actions.WorkspaceActions`.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from PySide6.QtWidgets import QFileDialog, QMessageBox

from elmo_explorer.common.figure_export import FigureOptions, ReportDialog, VectorDialog
from elmo_explorer.persistence.workspace_state import guarded

if TYPE_CHECKING:
    from elmo_explorer.persistence.workspace_actions import WorkspaceActions

log = logging.getLogger(__name__)


def _confirm_overwrite(actions: "WorkspaceActions", path: Path) -> Optional[bool]:
    """None: cancelled; else the overwrite flag to use."""
    if not path.exists():
        return False
    answer = QMessageBox.question(actions.window, "Replace?", f"{path}\nexists already. "
                                  "Replace it?")
    return True if answer == QMessageBox.StandardButton.Yes else None


def _ask_target(actions: "WorkspaceActions", title: str, filters: str) -> Optional[Path]:
    name, _ = QFileDialog.getSaveFileName(actions.window, title,
                                          actions.window.settings.last_dir, filters,
                                          options=QFileDialog.Option.DontConfirmOverwrite)
    return Path(name) if name else None


# ---- vectors ------------------------------------------------------------------------------
def ask_export_vectors(actions: "WorkspaceActions") -> None:
    if not actions.ws.all_embedded():
        actions.error("Nothing to export yet", "Load a model and wait until every sentence is "
                      "embedded, then export the vectors.")
        return
    dlg = VectorDialog(actions.ws, _mix_hint(actions), actions.window)
    if not dlg.exec():
        return
    opts = dlg.options()
    flt = {"npz": "NumPy (*.npz)", "hdf5": "HDF5, AllenNLP layout (*.hdf5)",
           "csv": "CSV (*.csv)", "tsv": "Projector folder (*)"}[opts["fmt"]]
    path = _ask_target(actions, "Export vectors", flt)
    if path is None:
        return
    if opts["fmt"] != "tsv" and not path.suffix:
        path = path.with_suffix("." + opts["fmt"])
    overwrite = _confirm_overwrite(actions, path)
    if overwrite is not None:
        export_vectors(actions, path, opts, overwrite)


def _mix_hint(actions: "WorkspaceActions") -> Optional[List[float]]:
    """The contexts view's mix weights, offered as the default of a mix export."""
    panel = dict(actions.panels()).get("contexts")
    state = guarded(panel, "view_state", panel.view_state, {}) if panel is not None else None
    w = state.get("weights") if isinstance(state, dict) else None
    return [float(x) for x in w] if isinstance(w, list) else None


def export_vectors(actions: "WorkspaceActions", path, opts: Dict[str, Any],
                   overwrite: bool = False) -> int:
    """Export on the worker. ``opts``: fmt, layers, weights, gamma, scope (all|word|token)."""
    from elmo_engine.io.vectors import LayerChoice, export_vectors as write_vectors

    ws, path = actions.ws, Path(path)
    tokens, acts = [list(t) for t in ws.tokens], list(ws.activations)
    refs = None
    if opts.get("scope") == "word" and ws.selection is not None:
        refs = [(r.sentence, r.token) for r in ws.occurrences(ws.word_at(ws.selection))]
    elif opts.get("scope") == "token" and ws.selection is not None:
        refs = [(ws.selection.sentence, ws.selection.token)]
    w = opts.get("weights")
    choice = LayerChoice(opts.get("layers", "each"), tuple(w) if w else None,
                         float(opts.get("gamma", 1.0)))

    def done(summary) -> None:
        actions.window.settings.last_dir = str(path.parent)
        actions.status(f"Exported {summary.n_vectors:,} vectors to {path}")
        actions.exported.emit(str(path))

    return ws.worker.submit(
        f"Exporting vectors to {path.name}",
        lambda st: write_vectors(path, tokens, acts, opts.get("fmt"), choice, refs,
                                 overwrite, st),
        on_done=done, on_failed=lambda m: actions.error("Cannot export the vectors", m),
        kind="export-vectors")


# ---- report -------------------------------------------------------------------------------
def ask_export_report(actions: "WorkspaceActions") -> None:
    dlg = ReportDialog(actions.figure_options, actions.window)
    if not dlg.exec():
        return
    actions.figure_options = dlg.options()
    path = _ask_target(actions, "Export report (a new folder)", "Report folder (*)")
    if path is None:
        return
    overwrite = _confirm_overwrite(actions, path)
    if overwrite is not None:
        export_report(actions, path, actions.figure_options, overwrite)


def _render_figures(actions: "WorkspaceActions", tmp: Path, options: FigureOptions):
    """Every panel's own figures (the engine's figure path; no screenshots of views):
    ``[(path, caption)]``."""
    figures: List[tuple] = []
    for name, panel in actions.panels():
        (tmp / name).mkdir()
        own = guarded(panel, "report_figures",
                      lambda p=panel, n=name: p.report_figures(tmp / n, options), [])
        figures += [(Path(p), f"{panel.title}: {Path(p).stem.replace('_', ' ')}") for p in own]
    return figures

def export_report(actions: "WorkspaceActions", folder, options: Optional[FigureOptions] = None,
                  overwrite: bool = False) -> int:
    """Render every panel's figures (GUI thread), then write the report on the worker."""
    folder, options = Path(folder), options or actions.figure_options
    tmp = Path(tempfile.mkdtemp(prefix="elmo-report-"))
    figures = _render_figures(actions, tmp, options)
    tables = [t for _n, p in actions.panels()
              for t in guarded(p, "report_tables", p.report_tables, [])]
    data, info = actions.collect(), actions.ws.model_info
    tokens, acts = [list(t) for t in actions.ws.tokens], list(actions.ws.activations)
    source = str(actions.path) if actions.path else "ELMo Explorer session (not saved)"

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

    def done(files) -> None:
        actions.window.settings.last_dir = str(folder.parent)
        actions.status(f"Wrote the report ({len(files)} files) to {folder}")
        actions.exported.emit(str(folder))

    return actions.ws.worker.submit(f"Writing report {folder.name}", job, on_done=done,
                                    on_failed=lambda m: actions.error("Cannot export the report",
                                                                     m),
                                    kind="export-report")
