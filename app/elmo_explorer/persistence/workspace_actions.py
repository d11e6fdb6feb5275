"""File → Save/Open workspace, Export vectors, Export report; autosave and crash recovery.

Installed into the main window with one call, :func:`install_workspace_actions`.
:class:`WorkspaceActions` is one class: it owns what these jobs share (the workspace file, what
was last saved or autosaved, the pending restore, the report's figure options), asks the
questions, submits the file work to the worker's long lane and applies the results. It uses
collaborators that take values and return values:

* :mod:`elmo_explorer.persistence.workspace_state` — the analysis as ``WorkspaceData`` and back;
* :mod:`elmo_explorer.persistence.report_actions` — the export dialogs and the vector / report
  jobs (:mod:`elmo_engine.io.vectors`, :mod:`elmo_engine.io.report`);
* :mod:`elmo_engine.io.workspace_file`, :mod:`elmo_engine.io.recovery` — the files on disk.

Opening asks where a moved checkpoint is and warns when its checksum differs; the restore waits
until the workspace's model is loaded and its sentences are embedded. Every minute, while
anything changed since the last save or autosave, the analysis is autosaved; a clean exit
removes the autosave, and the next start offers to recover one that a crashed session left.
Quitting asks to save work that would otherwise be lost. Panels take part through the
:class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMessageBox

from elmo_engine.errors import ElmoError
from elmo_engine.files import shown
from elmo_engine.io import recovery
from elmo_engine.io import workspace_file as wf
from elmo_explorer.common.figure_export import FigureOptions
from elmo_explorer.persistence import report_actions, workspace_state
from elmo_explorer.state.worker import JobHandle
from elmo_explorer.state.workspace import ModelSpec
from elmo_explorer.views.protocol import AnalysisPanel

log = logging.getLogger(__name__)

AUTOSAVE_MS = 60_000
WORKSPACE_FILTER = "ELMo Explorer workspace (*.elmows.json);;JSON (*.json);;All files (*)"


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
        self.saved_fp = self.autosaved_fp = workspace_state.fingerprint(self.collect())
        self.pending: Optional[wf.WorkspaceData] = None   # opened, restored once embedded
        # another session's autosave this window chose to recover (claimed): removed once its
        # work is restored here and this window's own autosave holds it, or at a clean exit
        self.adopted: Optional[Path] = None
        self.adopted_restored = False
        self._restoring_recovered = False
        self.figure_options = FigureOptions()
        # ask before quitting with unsaved work (not offscreen: nobody there to answer)
        self.prompt_on_close = QGuiApplication.platformName() != "offscreen"
        self._build_menu()
        self.timer = QTimer(self)
        self.timer.setInterval(autosave_ms)
        self.timer.timeout.connect(self.autosave)
        asking = recover and QGuiApplication.platformName() != "offscreen"
        if not asking:                     # else once the recovery question is answered: a
            self.timer.start()             # tick meanwhile could write over what it offers
        window.installEventFilter(self)
        for sig in (self.ws.activations_changed, self.ws.tokens_changed, self.ws.model_changed):
            sig.connect(lambda *_a: self.try_finish_restore())
        self.ws.model_load_failed.connect(lambda *_a: self.try_finish_restore(force=True))
        if asking:                                    # nobody to ask offscreen
            QTimer.singleShot(0, self.check_recovery)

    # ---- menu -----------------------------------------------------------------------------
    def _build_menu(self) -> None:
        w = self.window
        # (QAction.menu() is avoided: in PySide6 6.10 its wrapper can delete the menu)
        file_menu, before = w.menus["file"], w.export_menu.menuAction()
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
            file_menu.insertAction(before, act)
            self.actions[key] = act
        file_menu.insertSeparator(before)

    # ---- shared -----------------------------------------------------------------------------
    def panels(self) -> List[Tuple[str, AnalysisPanel]]:
        """The window's analysis views, by name."""
        return list(self.window.panels.items())

    def error(self, title: str, message: str) -> None:
        self.window.show_error(title, message)

    def status(self, text: str) -> None:
        self.window.statusBar().showMessage(text, 8000)

    def collect(self) -> wf.WorkspaceData:
        """The current analysis as :class:`WorkspaceData` (GUI thread, cheap)."""
        return workspace_state.collect(self.ws, self.panels(), self.path)

    def is_dirty(self) -> bool:
        return workspace_state.fingerprint(self.collect()) != self.saved_fp

    def _remember_folder(self, path: Path) -> None:
        self.window.settings.last_dir = str(path.parent)

    # ---- save ---------------------------------------------------------------------------------
    def ask_workspace_path(self) -> Optional[Path]:
        """Where to save the workspace (the workspace suffix added when missing); None if the
        dialog was cancelled."""
        start = str(self.path) if self.path else self.window.settings.last_dir
        name, _ = QFileDialog.getSaveFileName(self.window, "Save workspace", start,
                                              WORKSPACE_FILTER)
        if not name:
            return None
        path = Path(name)
        return path if path.name.endswith(".json") else path.with_name(path.name + wf.SUFFIX)

    def ask_save(self) -> None:
        path = self.ask_workspace_path()
        if path is not None:
            self.save_workspace(path)

    def save_workspace(self, path) -> JobHandle:
        """Save the current analysis to ``path`` on the worker."""
        path = Path(path)
        data = self.collect()
        data.source = ""
        fp = workspace_state.fingerprint(data)

        def done(_result) -> None:
            self.path, self.saved_fp = path, fp
            self._remember_folder(path)
            self.status(f"Saved workspace {path}")
            self.saved.emit(str(path))

        return self.ws.jobs.submit(
            f"Saving workspace {path.name}", lambda st: wf.save_workspace(path, data),
            kind="workspace-save", on_done=done,
            on_failed=lambda m: self.error("Cannot save the workspace", m))

    # ---- open ---------------------------------------------------------------------------------
    def ask_open(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self.window, "Open workspace",
                                              self.window.settings.last_dir, WORKSPACE_FILTER)
        if name:
            self.open_workspace(name)

    def open_workspace(self, path, recovered: bool = False) -> JobHandle:
        """Read and check a workspace on the worker, then ask/warn and apply it."""
        path = Path(path)
        return self.ws.jobs.submit(
            f"Opening workspace {path.name}", lambda st: wf.load_workspace(path),
            kind="workspace-open", on_done=lambda loaded: self._on_loaded(loaded, recovered),
            on_failed=lambda m: self._open_failed("Cannot open the workspace", m, recovered))

    def _open_failed(self, title: str, message: str, recovered: bool) -> None:
        if recovered:
            self._abandon_adopted()
        self.error(title, message)

    def _on_loaded(self, loaded: wf.LoadedWorkspace, recovered: bool) -> None:
        ck = loaded.data.checkpoint
        if loaded.checkpoint_missing:
            # No keeps the model that is loaded (the views compute on it; runs saved with the
            # workspace keep their own model's name): the question says which
            info = self.ws.model_info
            with_what = (f"with the model loaded now ({info.name}); saved results keep the "
                         "name of the model that made them" if info is not None
                         else "without a model")
            answer = QMessageBox.question(
                self.window, "Checkpoint not found",
                f"The workspace was made with the checkpoint\n{ck.path}\nwhich is not there any "
                f"more (moved or deleted). Locate it?\n\nNo: open the sentences and results "
                f"{with_what}.")
            if answer == QMessageBox.StandardButton.Yes:
                folder = QFileDialog.getExistingDirectory(self.window,
                                                          "Locate the checkpoint folder",
                                                          str(Path(ck.path).parent))
                if folder:
                    self.ws.jobs.submit(
                        "Checking the checkpoint", lambda st: wf.checkpoint_checksum(folder),
                        on_done=lambda s: self._located(loaded, folder, s, recovered),
                        on_failed=lambda m: self._open_failed("Cannot read it", m, recovered))
                    return
            self._apply(loaded, None, recovered)
            return
        if loaded.checksum_mismatch and not self._accept_mismatch(ck.path):
            if recovered:
                self._abandon_adopted()
            return
        self._apply(loaded, loaded.checkpoint_path, recovered)

    def _located(self, loaded: wf.LoadedWorkspace, folder: str, checksum: str,
                 recovered: bool) -> None:
        ck = loaded.data.checkpoint
        if ck.checksum and checksum != ck.checksum and not self._accept_mismatch(folder):
            if recovered:
                self._abandon_adopted()
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

    def _apply(self, loaded: wf.LoadedWorkspace, checkpoint: Optional[str],
               recovered: bool) -> None:
        data, ws = loaded.data, self.ws
        self.path = (Path(data.source) if data.source else None) if recovered else loaded.path
        self.pending = data
        self._restoring_recovered = recovered
        self.saved_fp = "" if recovered else workspace_state.fingerprint(data)  # refined later
        spec = ws.model_spec
        same = (spec is not None and checkpoint is not None and ws.model_info is not None
                and Path(spec.path).resolve() == Path(checkpoint).resolve())
        if checkpoint is not None and not same:      # first: a model change clears the selection
            ck = data.checkpoint
            ws.load_model(ModelSpec(checkpoint, ck.device, ck.precision))
        # the workspace's own tokenization (not the remembered setting), before its sentences
        self.window.set_tokenization(data.tokenization, remember=False, refresh=False)
        self.window.sentences.show_sentences(list(data.sentences))
        self.opened.emit(str(loaded.path))
        self.try_finish_restore()

    def try_finish_restore(self, force: bool = False) -> None:
        """Restore the pending workspace's views and selection once its model is loaded and its
        sentences are embedded (``force``: now, e.g. after the model failed to load)."""
        data, ws = self.pending, self.ws
        if data is None or ws.sentences != data.sentences:
            return
        ready = ws.all_embedded() if ws.embedder is not None else \
            all(t or not s.strip() for s, t in zip(ws.sentences, ws.tokens))
        if not force and (ws.is_loading() or not ready):
            return
        self.pending = None
        workspace_state.restore(ws, self.panels(), data)
        if self.saved_fp:
            self.saved_fp = workspace_state.fingerprint(self.collect())
        if self._restoring_recovered and self.adopted is not None:
            self.adopted_restored = True           # its work is this window's now
        self._restoring_recovered = False
        self.restored.emit()

    # ---- autosave and recovery ----------------------------------------------------------------
    def autosave(self) -> Optional[JobHandle]:
        """Write the autosave if anything changed since the last save or autosave (not while an
        opened workspace is being restored: its views and results are not in place yet)."""
        if self.pending is not None:
            return None
        data = self.collect()
        fp = workspace_state.fingerprint(data)
        if not data.sentences or fp in (self.saved_fp, self.autosaved_fp) \
                or self.ws.worker.is_stopped():
            return None
        target = recovery.autosave_path(self.autosave_dir)

        def done(_r) -> None:
            self.autosaved_fp = fp
            if self.adopted_restored:
                self._drop_adopted(keep=target)
            self.autosaved.emit(str(target))

        return self.ws.jobs.submit(
            "Autosaving", lambda st: wf.save_workspace(target, data), kind="autosave",
            on_done=done, on_failed=lambda m: log.warning("autosave failed: %s", m))

    def check_recovery(self) -> JobHandle:
        """Offer to recover an autosave left by a session that did not end cleanly."""
        folder = self.autosave_dir
        def failed(message: str) -> None:
            log.warning("looking for unsaved work failed: %s", message)
            self.timer.start()

        return self.ws.jobs.submit("Looking for unsaved work",
                                     lambda st: recovery.find_recovery(folder),
                                     kind="recovery", on_done=self._offer_recovery,
                                     on_failed=failed)

    def _offer_recovery(self, rec: Optional[recovery.Recovery]) -> None:
        """Ask about ``rec`` once this window holds its claim (another window starting now may
        be offering it too); then start the autosave."""
        try:
            if rec is None or not recovery.claim(rec.path):
                return
            answer = QMessageBox.question(
                self.window, "Recover unsaved work?",
                f"ELMo Explorer did not close properly last time. An autosaved workspace from "
                f"{rec.saved_at or 'the last session'} ({rec.n_sentences} sentences) can be "
                "restored.\n\nRecover it?")
            if answer == QMessageBox.StandardButton.Yes:
                self.adopted, self.adopted_restored = rec.path, False
                self.open_workspace(rec.path, recovered=True)
            else:
                try:
                    recovery.discard(rec.path)
                except OSError as e:
                    log.warning("cannot remove the declined autosave %s: %s", rec.path, e)
        finally:
            self.timer.start()

    def _abandon_adopted(self) -> None:
        """The recovered autosave was not opened (it failed, or a question was cancelled): it
        stays for the next start, and this window gives up its claim."""
        adopted, self.adopted, self.adopted_restored = self.adopted, None, False
        self._restoring_recovered = False
        if adopted is not None:
            recovery.release(adopted)

    def _drop_adopted(self, keep: Optional[Path] = None) -> None:
        """Remove the recovered session's autosave, whose work this window restored, unless it
        is ``keep`` (this window's own file, the process id used again: only the claim goes)."""
        adopted, self.adopted, self.adopted_restored = self.adopted, None, False
        if adopted is None:
            return
        try:
            if adopted == keep:
                recovery.release(adopted)
            else:
                recovery.discard(adopted)
        except OSError as e:
            log.warning("cannot remove the recovered autosave %s: %s", adopted, e)

    def _discard_on_exit(self) -> None:
        """A clean exit stops the autosave and leaves no autosave of this window's: its own,
        and one it recovered and restored (one whose restore did not finish stays for the next
        start). Another window's is left alone."""
        self.timer.stop()
        own = recovery.autosave_path(self.autosave_dir)
        unrestored = self.adopted if not self.adopted_restored else None
        if unrestored is not None:
            self._abandon_adopted()
        else:
            self._drop_adopted()
        if unrestored == own:                 # the process id used again: that file is it
            return
        try:
            recovery.discard_autosave(self.autosave_dir)
        except OSError as e:
            log.warning("cannot remove the autosave: %s", e)

    # ---- quit ---------------------------------------------------------------------------------
    def confirm_close(self) -> bool:
        """Before quitting: offer to save work that would otherwise be lost. True to quit.

        Asks when a saved or opened workspace has changed since, or when probe results
        (minutes of work) were never saved. Unsaved sentences alone do not ask: the next
        session brings them back. Save writes at once, in this thread (a workspace file is
        small), so that nothing is left to a worker that is about to stop; if the save fails,
        the window stays.
        """
        if not self.prompt_on_close:
            return True
        data = self.collect()
        if workspace_state.fingerprint(data) == self.saved_fp or not (self.path
                                                                      or data.probe_runs):
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
        target = self.path or self.ask_workspace_path()
        if target is None:
            return False
        data.source = ""
        try:
            wf.save_workspace(target, data)
        except (ElmoError, OSError) as e:
            self.error("Cannot save the workspace", str(e))
            return False
        except Exception as e:        # never quit on a failed save: the work would be lost
            log.exception("saving the workspace before quitting failed")
            self.error("Cannot save the workspace", f"{type(e).__name__}: {e}")
            return False
        self.path, self.saved_fp = target, workspace_state.fingerprint(data)
        self.saved.emit(str(target))
        return True

    def eventFilter(self, obj, event) -> bool:
        if obj is self.window and event.type() == QEvent.Type.Close:
            if not self.confirm_close():
                event.ignore()                           # the user chose to stay
                return True
            self._discard_on_exit()
        return False

    # ---- exports (dialogs and jobs: report_actions) ---------------------------------------------
    def ask_export_vectors(self) -> None:
        if not self.ws.all_embedded():
            self.error("Nothing to export yet", "Load a model and wait until every sentence is "
                       "embedded, then export the vectors.")
            return
        chosen = report_actions.ask_vector_export(self.window, self.ws, self.panels(),
                                                  self.window.settings.last_dir)
        if chosen is not None:
            self.export_vectors(*chosen)

    def export_vectors(self, path, opts: Dict[str, Any], overwrite: bool = False) -> JobHandle:
        """Export on the worker. ``opts``: fmt, layers, weights, gamma, scope (all|word|token)."""
        path = Path(path)

        def done(summary) -> None:
            self._remember_folder(path)
            self.status(f"Exported {summary.n_vectors:,} vectors to {path}")
            self.exported.emit(str(path))

        return self.ws.jobs.submit(
            f"Exporting vectors to {path.name}",
            report_actions.vectors_job(self.ws, path, opts, overwrite), kind="export-vectors",
            on_done=done, on_failed=lambda m: self.error("Cannot export the vectors", m))

    def ask_export_report(self) -> None:
        chosen = report_actions.ask_report_export(self.window, self.figure_options,
                                                  self.window.settings.last_dir)
        if chosen is not None:
            folder, self.figure_options, overwrite = chosen
            self.export_report(folder, self.figure_options, overwrite)

    def export_report(self, folder, options: Optional[FigureOptions] = None,
                      overwrite: bool = False) -> JobHandle:
        """Write the report on the worker: the engine's one report path on the workspace's
        state (the same files as ``elmo-explorer export report`` of the saved workspace)."""
        folder, options = Path(folder), options or self.figure_options
        source = shown(str(self.path)) if self.path else "ELMo Explorer session (not saved)"
        try:
            job = report_actions.report_job(self.ws, self.collect(), folder, options, overwrite,
                                            source)
        except LookupError as e:
            self.error("Cannot export the report", str(e))
            return None

        def done(files) -> None:
            self._remember_folder(folder)
            self.status(f"Wrote the report ({len(files)} files) to {folder}")
            self.exported.emit(str(folder))

        return self.ws.jobs.submit(
            f"Writing report {folder.name}", job, kind="export-report", on_done=done,
            on_failed=lambda m: self.error("Cannot export the report", m))


__all__ = ["WorkspaceActions", "install_workspace_actions"]
