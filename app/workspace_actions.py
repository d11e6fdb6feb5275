"""File → Save/Open workspace, Export vectors, Export report; autosave and crash recovery.

Installed into the main window with one call, :func:`install_workspace_actions`. Panels take part
through optional methods, each called only when a panel has it:

* ``view_state() -> dict`` / ``restore_view_state(dict)``: the view's parameters (JSON values);
* ``probe_runs() -> list[dict]`` / ``restore_probe_runs(list[dict])``: stored probe results
  (without ``probe_runs``, a panel's ``runs`` list of objects with ``to_dict()`` is read);
* ``report_figures(folder) -> list[Path]``: the panel's publication figures (without it the
  panel widget itself is exported as PNG at the chosen size and DPI, and as SVG); the folder
  exists and is empty;
* ``report_tables() -> list[elmo_engine.io.report.ReportTable]``.

File work runs on the worker; the GUI thread only collects state and renders figures.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
import inspect
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox

from elmo_explorer.figure_export import FigureOptions, ReportDialog, VectorDialog, render_bytes
from elmo_explorer.workspace import ModelSpec, TokenRef
from elmo_engine.io import recovery
from elmo_engine.io import workspace_file as wf
from elmo_engine.errors import ElmoError

log = logging.getLogger(__name__)

WORKSPACE_FILTER = "ELMo Explorer workspace (*.elmows.json);;JSON (*.json);;All files (*)"
AUTOSAVE_MS = 60_000


def install_workspace_actions(window, recover: bool = True,
                              autosave_ms: int = AUTOSAVE_MS) -> "WorkspaceActions":
    """Add the workspace menu entries, the autosave timer and (``recover``) the recovery prompt."""
    actions = WorkspaceActions(window, recover, autosave_ms)
    window.workspace_actions = actions
    return actions


class WorkspaceActions(QObject):
    """The workspace/export controller of one main window.

    Signals: ``saved(str)``, ``opened(str)``, ``restored()`` (selection and views applied),
    ``exported(str)``, ``autosaved(str)``.
    """

    saved = Signal(str)
    opened = Signal(str)
    restored = Signal()
    exported = Signal(str)
    autosaved = Signal(str)

    def __init__(self, window, recover: bool = True, autosave_ms: int = AUTOSAVE_MS):
        super().__init__(window)
        self.window = window
        self.ws = window.workspace
        self.path: Optional[Path] = None               # the last explicit save / open
        self.autosave_dir = Path(window.settings.data_dir()) / "autosave"
        self._saved_fp = self._autosaved_fp = self._fingerprint(self.collect())
        self._pending: Optional[wf.WorkspaceData] = None
        self.figure_options = FigureOptions()
        # ask before quitting with unsaved work (not offscreen: nobody there to answer)
        self.prompt_on_close = QGuiApplication.platformName() != "offscreen"
        self._build_menu()
        self.timer = QTimer(self)
        self.timer.setInterval(autosave_ms)
        self.timer.timeout.connect(self.autosave)
        self.timer.start()
        window.installEventFilter(self)
        for sig in (self.ws.activations_changed, self.ws.tokens_changed, self.ws.model_changed):
            sig.connect(self._try_finish_restore)
        self.ws.model_load_failed.connect(lambda *_: self._try_finish_restore(force=True))
        if recover and QGuiApplication.platformName() != "offscreen":   # nobody to ask offscreen
            QTimer.singleShot(0, self.check_recovery)

    # ---- menu -----------------------------------------------------------------------------
    def _build_menu(self) -> None:
        w = self.window
        # (QAction.menu() is avoided: in PySide6 6.10 its wrapper can delete the menu)
        file_menu = getattr(w, "menus", {}).get("file") or next(
            (m for m in w.menuBar().findChildren(QMenu) if m.title().replace("&", "") == "File"),
            None)
        if file_menu is None:
            file_menu = w.menuBar().addMenu("&File")
        export_menu = getattr(w, "export_menu", None)
        before = export_menu.menuAction() if export_menu is not None else None
        self.actions: Dict[str, QAction] = {}
        specs = [("save", "Save &workspace…", self.ask_save, "Ctrl+Shift+S"),
                 ("open", "Open wor&kspace…", self.ask_open, None),
                 ("vectors", "Export &vectors…", self.ask_export_vectors, None),
                 ("report", "Export &report…", self.ask_export_report, "Ctrl+Shift+R")]
        for key, text, slot, shortcut in specs:
            act = QAction(text, w)
            if shortcut:
                act.setShortcut(QKeySequence(shortcut))
            act.triggered.connect(lambda _=False, f=slot: f())
            file_menu.insertAction(before, act) if before is not None else file_menu.addAction(act)
            self.actions[key] = act
        if before is not None:
            file_menu.insertSeparator(before)

    def _error(self, title: str, message: str) -> None:
        self.window.show_error(title, message)

    def _status(self, text: str) -> None:
        self.window.statusBar().showMessage(text, 8000)

    def _panels(self):
        return list(getattr(self.window, "panels", {}).items())

    # ---- collecting state -------------------------------------------------------------------
    def collect(self) -> wf.WorkspaceData:
        """The current analysis as :class:`WorkspaceData` (GUI thread, cheap)."""
        ws = self.ws
        data = wf.WorkspaceData(sentences=list(ws.sentences))
        if ws.model_spec is not None:
            info = ws.model_info
            data.checkpoint = wf.CheckpointRef(
                str(Path(ws.model_spec.path).resolve()), info.checksum if info else "",
                info.name if info else "", ws.model_spec.device, ws.model_spec.precision)
        if ws.selection is not None:
            ref = ws.selection
            data.selection = {"sentence": ref.sentence, "token": ref.token,
                              "word": ws.word_at(ref)}
        for name, panel in self._panels():
            state = self._call(panel, "view_state")
            if isinstance(state, dict):
                data.views[name] = state
            runs = self._probe_runs(panel)
            if runs:
                data.probe_runs.extend(runs)
        data.source = str(self.path) if self.path else ""
        return data

    def _call(self, panel, method: str, *args):
        fn = getattr(panel, method, None)
        if not callable(fn):
            return None
        try:
            return fn(*args)
        except Exception:  # one panel's problem must not stop a save
            log.exception("%s.%s failed", type(panel).__name__, method)
            return None

    def _probe_runs(self, panel) -> List[dict]:
        if callable(getattr(panel, "probe_runs", None)):
            return list(self._call(panel, "probe_runs") or [])
        runs = getattr(panel, "runs", None)
        if isinstance(runs, list) and all(callable(getattr(r, "to_dict", None)) for r in runs):
            return [r.to_dict() for r in runs]
        return []

    @staticmethod
    def _fingerprint(data: wf.WorkspaceData) -> str:
        obj = data.to_json()
        for key in ("saved_at", "session", "source"):
            obj.pop(key, None)
        return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()

    def is_dirty(self) -> bool:
        return self._fingerprint(self.collect()) != self._saved_fp

    # ---- save -------------------------------------------------------------------------------
    def ask_save(self) -> None:
        path = self._ask_workspace_path()
        if path is not None:
            self.save_workspace(path)

    def _ask_workspace_path(self) -> Optional[Path]:
        """Where to save the workspace (the workspace suffix added when missing); None if the
        dialog was cancelled."""
        start = str(self.path) if self.path else self.window.settings.last_dir
        name, _ = QFileDialog.getSaveFileName(self.window, "Save workspace", start, WORKSPACE_FILTER)
        if not name:
            return None
        path = Path(name)
        return path if path.name.endswith(".json") else path.with_name(path.name + wf.SUFFIX)

    def save_workspace(self, path) -> int:
        """Save the current analysis to ``path`` on the worker."""
        path = Path(path)
        data = self.collect()
        data.source = ""
        fp = self._fingerprint(data)

        def done(_result) -> None:
            self.path, self._saved_fp = path, fp
            self.window.settings.last_dir = str(path.parent)
            self._status(f"Saved workspace {path}")
            self.saved.emit(str(path))

        return self.ws.worker.submit(f"Saving workspace {path.name}",
                                     lambda st: wf.save_workspace(path, data), on_result=done,
                                     on_error=lambda m: self._error("Cannot save the workspace", m),
                                     group="workspace-save")

    # ---- open -------------------------------------------------------------------------------
    def ask_open(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self.window, "Open workspace",
                                              self.window.settings.last_dir, WORKSPACE_FILTER)
        if name:
            self.open_workspace(name)

    def open_workspace(self, path, recovered: bool = False) -> int:
        """Read and check a workspace on the worker, then ask/warn and apply it."""
        path = Path(path)
        return self.ws.worker.submit(
            f"Opening workspace {path.name}", lambda st: wf.load_workspace(path),
            on_result=lambda loaded: self._on_loaded(loaded, recovered),
            on_error=lambda m: self._error("Cannot open the workspace", m), group="workspace-open")

    def _on_loaded(self, loaded: wf.LoadedWorkspace, recovered: bool) -> None:
        ck = loaded.data.checkpoint
        if loaded.checkpoint_missing:
            answer = QMessageBox.question(
                self.window, "Checkpoint not found",
                f"The workspace was made with the checkpoint\n{ck.path}\nwhich is not there any "
                "more (moved or deleted). Locate it?\n\nNo: open the sentences and results "
                "without a model.")
            if answer == QMessageBox.StandardButton.Yes:
                folder = QFileDialog.getExistingDirectory(self.window, "Locate the checkpoint folder",
                                                          str(Path(ck.path).parent))
                if folder:
                    self.ws.worker.submit("Checking the checkpoint",
                                          lambda st: wf.checkpoint_checksum(folder),
                                          on_result=lambda s: self._located(loaded, folder, s,
                                                                            recovered),
                                          on_error=lambda m: self._error("Cannot read it", m))
                    return
            self._apply(loaded, None, recovered)
            return
        if loaded.checksum_mismatch and not self._accept_mismatch(ck.path):
            return
        self._apply(loaded, loaded.checkpoint_path, recovered)

    def _located(self, loaded, folder: str, checksum: str, recovered: bool) -> None:
        ck = loaded.data.checkpoint
        if ck.checksum and checksum != ck.checksum and not self._accept_mismatch(folder):
            return
        self._apply(loaded, folder, recovered)

    def _accept_mismatch(self, where: str) -> bool:
        answer = QMessageBox.warning(
            self.window, "Different checkpoint",
            f"The checkpoint at\n{where}\nis not the one this workspace was saved with (its "
            "checksum differs). Vectors, similarities and probe results may not match the saved "
            "ones.\n\nOpen the workspace with it anyway?",
            QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Open

    def _apply(self, loaded: wf.LoadedWorkspace, checkpoint: Optional[str], recovered: bool) -> None:
        data = loaded.data
        self.path = (Path(data.source) if data.source else None) if recovered else loaded.path
        self._pending = data
        self._saved_fp = "" if recovered else self._fingerprint(data)    # refined once restored
        spec = self.ws.model_spec
        same = (spec is not None and checkpoint is not None and self.ws.model_info is not None
                and Path(spec.path).resolve() == Path(checkpoint).resolve())
        if checkpoint is not None and not same:      # first: a model change clears the selection
            ck = data.checkpoint
            self.ws.load_model(ModelSpec(checkpoint, ck.device, ck.precision))
        self.window.sentences.show_sentences(list(data.sentences))
        self.opened.emit(str(loaded.path))
        self._try_finish_restore()

    def _try_finish_restore(self, *_args, force: bool = False) -> None:
        data = self._pending
        if data is None or self.ws.sentences != data.sentences:
            return
        ready = self.ws.all_embedded() if self.ws.embedder is not None else \
            all(t or not s.strip() for s, t in zip(self.ws.sentences, self.ws.tokens))
        if not force and (self.ws.is_loading() or not ready):
            return
        self._pending = None
        for name, panel in self._panels():
            if name in data.views:
                self._call(panel, "restore_view_state", data.views[name])
            if data.probe_runs and callable(getattr(panel, "restore_probe_runs", None)):
                self._call(panel, "restore_probe_runs", list(data.probe_runs))
        sel = data.selection
        if sel is not None:
            ref = TokenRef(sel["sentence"], sel["token"])
            try:
                word = self.ws.word_at(ref)
            except IndexError:
                word = None
            if word is not None and (not sel.get("word") or sel["word"] == word):
                self.ws.select(ref)
        if self._saved_fp:
            self._saved_fp = self._fingerprint(self.collect())
        self.restored.emit()

    # ---- autosave and recovery --------------------------------------------------------------
    def autosave(self) -> Optional[int]:
        """Write the autosave if anything changed since the last save or autosave."""
        data = self.collect()
        fp = self._fingerprint(data)
        if not data.sentences or fp in (self._saved_fp, self._autosaved_fp) \
                or self.ws.worker.is_stopped():
            return None
        target = recovery.autosave_path(self.autosave_dir)

        def done(_r) -> None:
            self._autosaved_fp = fp
            self.autosaved.emit(str(target))

        return self.ws.worker.submit("Autosaving", lambda st: wf.save_workspace(target, data),
                                     on_result=done, on_error=lambda m: log.warning(
                                         "autosave failed: %s", m), group="autosave")

    def check_recovery(self) -> int:
        """Offer to recover an autosave left by a session that did not end cleanly."""
        return self.ws.worker.submit("Looking for unsaved work",
                                     lambda st: recovery.find_recovery(self.autosave_dir),
                                     on_result=self._offer_recovery, group="recovery")

    def _offer_recovery(self, rec: Optional[recovery.Recovery]) -> None:
        if rec is None:
            return
        answer = QMessageBox.question(
            self.window, "Recover unsaved work?",
            f"ELMo Explorer did not close properly last time. An autosaved workspace from "
            f"{rec.saved_at or 'the last session'} ({rec.n_sentences} sentences) can be restored."
            "\n\nRecover it?")
        if answer == QMessageBox.StandardButton.Yes:
            self.open_workspace(rec.path, recovered=True)
        else:
            recovery.discard_autosave(self.autosave_dir)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.window and event.type() == QEvent.Type.Close:
            if not self.confirm_close():
                event.ignore()                           # the user chose to stay
                return True
            self.timer.stop()
            try:
                recovery.discard_autosave(self.autosave_dir)      # a clean exit leaves no autosave
            except OSError as e:
                log.warning("cannot remove the autosave: %s", e)
        return False

    def confirm_close(self) -> bool:
        """Before quitting: offer to save work that would otherwise be lost. True to quit.

        Asks when a saved or opened workspace has changed since, or when probe results (minutes
        of work) were never saved. Unsaved sentences alone do not ask: the next session brings
        them back. Save writes at once, in this thread (a workspace file is small), so that
        nothing is left to a worker that is about to stop; if the save fails, the window stays.
        """
        if not self.prompt_on_close:
            return True
        data = self.collect()
        if self._fingerprint(data) == self._saved_fp or not (self.path or data.probe_runs):
            return True
        n = len(data.probe_runs)
        if self.path:
            text = (f"The workspace {self.path.name} has changed since it was saved or opened. "
                    "Save the changes before quitting?")
        else:
            runs = "1 probe run that was" if n == 1 else f"{n} probe runs that were"
            text = f"This analysis holds {runs} never saved. Save a workspace before quitting?"
        buttons = (QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                   | QMessageBox.StandardButton.Cancel)
        answer = QMessageBox.question(self.window, "Save changes?", text, buttons,
                                      QMessageBox.StandardButton.Save)
        if answer == QMessageBox.StandardButton.Discard:
            return True
        if answer != QMessageBox.StandardButton.Save:
            return False
        target = self.path or self._ask_workspace_path()
        if target is None:
            return False
        data.source = ""
        try:
            wf.save_workspace(target, data)
        except (ElmoError, OSError) as e:
            self._error("Cannot save the workspace", str(e))
            return False
        self.path, self._saved_fp = target, self._fingerprint(data)
        self.saved.emit(str(target))
        return True

    # ---- export vectors ---------------------------------------------------------------------
    def _confirm_overwrite(self, path: Path) -> Optional[bool]:
        """None: cancelled; else the overwrite flag to use."""
        if not path.exists():
            return False
        answer = QMessageBox.question(self.window, "Replace?", f"{path}\nexists already. "
                                      "Replace it?")
        return True if answer == QMessageBox.StandardButton.Yes else None

    def _ask_target(self, title: str, filters: str) -> Optional[Path]:
        name, _ = QFileDialog.getSaveFileName(self.window, title, self.window.settings.last_dir,
                                              filters, options=QFileDialog.Option.DontConfirmOverwrite)
        return Path(name) if name else None

    def ask_export_vectors(self) -> None:
        if not self.ws.all_embedded():
            self._error("Nothing to export yet", "Load a model and wait until every sentence is "
                        "embedded, then export the vectors.")
            return
        dlg = VectorDialog(self.ws, self._mix_hint(), self.window)
        if not dlg.exec():
            return
        opts = dlg.options()
        flt = {"npz": "NumPy (*.npz)", "hdf5": "HDF5, AllenNLP layout (*.hdf5)",
               "csv": "CSV (*.csv)", "tsv": "Projector folder (*)"}[opts["fmt"]]
        path = self._ask_target("Export vectors", flt)
        if path is None:
            return
        if opts["fmt"] != "tsv" and not path.suffix:
            path = path.with_suffix("." + opts["fmt"])
        overwrite = self._confirm_overwrite(path)
        if overwrite is not None:
            self.export_vectors(path, opts, overwrite)

    def _mix_hint(self) -> Optional[List[float]]:
        state = self._call(self.window.panels.get("contexts"), "view_state") \
            if "contexts" in getattr(self.window, "panels", {}) else None
        w = state.get("weights") if isinstance(state, dict) else None
        return [float(x) for x in w] if isinstance(w, list) else None

    def export_vectors(self, path, opts: Dict[str, Any], overwrite: bool = False) -> int:
        """Export on the worker. ``opts``: fmt, layers, weights, gamma, scope (all|word|token)."""
        from elmo_engine.io.vectors import LayerChoice, export_vectors

        ws, path = self.ws, Path(path)
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
            self.window.settings.last_dir = str(path.parent)
            self._status(f"Exported {summary.n_vectors:,} vectors to {path}")
            self.exported.emit(str(path))

        return ws.worker.submit(
            f"Exporting vectors to {path.name}",
            lambda st: export_vectors(path, tokens, acts, opts.get("fmt"), choice, refs,
                                      overwrite, st),
            on_result=done, on_error=lambda m: self._error("Cannot export the vectors", m),
            group="export-vectors")

    # ---- export report ----------------------------------------------------------------------
    def ask_export_report(self) -> None:
        dlg = ReportDialog(self.figure_options, self.window)
        if not dlg.exec():
            return
        self.figure_options = dlg.options()
        path = self._ask_target("Export report (a new folder)", "Report folder (*)")
        if path is None:
            return
        overwrite = self._confirm_overwrite(path)
        if overwrite is not None:
            self.export_report(path, self.figure_options, overwrite)

    def export_report(self, folder, options: Optional[FigureOptions] = None,
                      overwrite: bool = False) -> int:
        """Render every panel's figures (GUI thread), then write the report on the worker."""
        folder, options = Path(folder), options or self.figure_options
        tmp = Path(tempfile.mkdtemp(prefix="elmo-report-"))
        figures: List[tuple] = []                      # (path, bytes or None, caption)
        notes: List[str] = []
        for name, panel in self._panels():
            title = getattr(panel, "title", name)
            own = None
            if callable(getattr(panel, "report_figures", None)):
                (tmp / name).mkdir()
                wants_options = len(inspect.signature(panel.report_figures).parameters) >= 2
                args = (tmp / name, options) if wants_options else (tmp / name,)
                own = self._call(panel, "report_figures", *args)
            if own:
                figures += [(Path(p), None, f"{title}: {Path(p).stem.replace('_', ' ')}")
                            for p in own]
                continue
            try:
                for ext in options.formats:
                    figures.append((tmp / f"{name}.{ext}", render_bytes(panel, ext, options),
                                    f"The {title} view"))
            except Exception as e:  # a view that cannot be drawn is reported, not fatal
                log.exception("cannot render the %s view", name)
                notes.append(f"The {title} view could not be drawn: {e}")
        tables = [t for _n, p in self._panels() for t in (self._call(p, "report_tables") or [])]
        data, info = self.collect(), self.ws.model_info
        tokens, acts = [list(t) for t in self.ws.tokens], list(self.ws.activations)
        source = str(self.path) if self.path else "ELMo Explorer session (not saved)"

        def job(state):
            from elmo_engine.analysis.report import report_spec
            from elmo_engine.io.report import ReportFigure, write_report

            try:
                for path, blob, _caption in figures:
                    if blob is not None:
                        path.write_bytes(blob)
                spec = report_spec(data, tokens, acts, info.describe() if info else None, source,
                                   notes=notes)
                spec.tables += list(tables)
                spec.figures += [ReportFigure(p, c) for p, _b, c in figures]
                spec.parameters["figures"] = {"width (in)": options.width_in,
                                              "height (in)": options.height_in,
                                              "PNG dpi": options.dpi}
                return write_report(folder, spec, overwrite, state)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

        def done(files) -> None:
            self.window.settings.last_dir = str(folder.parent)
            self._status(f"Wrote the report ({len(files)} files) to {folder}")
            self.exported.emit(str(folder))

        return self.ws.worker.submit(f"Writing report {folder.name}", job, on_result=done,
                                     on_error=lambda m: self._error("Cannot export the report", m),
                                     group="export-report")


__all__ = ["WorkspaceActions", "install_workspace_actions"]
