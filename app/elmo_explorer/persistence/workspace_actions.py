"""File → Save/Open workspace, Export vectors, Export report; autosave and crash recovery.

Installed into the main window with one call, :func:`install_workspace_actions`.
:class:`WorkspaceActions` owns what the jobs share (the workspace file, what was last saved or
autosaved, the pending restore, the report's figure options) and the signals; each job lives
in its own module:

* :mod:`elmo_explorer.persistence.workspace_state` — the analysis as ``WorkspaceData`` and back;
* :mod:`elmo_explorer.persistence.workspace_files` — save, open (moved checkpoint, checksum mismatch), save
  on quit;
* :mod:`elmo_explorer.persistence.autosave` — the autosave timer and crash recovery;
* :mod:`elmo_explorer.persistence.report_actions` — Export vectors…, Export report….

Panels take part through the :class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol.
File work runs on the worker; the GUI thread only collects state and renders figures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence

from elmo_engine.io import workspace_file as wf
from elmo_explorer.persistence import autosave as autosave_job
from elmo_explorer.persistence import report_actions
from elmo_explorer.persistence import workspace_files
from elmo_explorer.persistence import workspace_state
from elmo_explorer.common.figure_export import FigureOptions
from elmo_explorer.views.protocol import AnalysisPanel

AUTOSAVE_MS = autosave_job.AUTOSAVE_MS


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
            sig.connect(lambda *_a: workspace_files.try_finish_restore(self))
        self.ws.model_load_failed.connect(
            lambda *_a: workspace_files.try_finish_restore(self, force=True))
        if recover and QGuiApplication.platformName() != "offscreen":   # nobody to ask offscreen
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

    # ---- the jobs (see the modules named above) -----------------------------------------------
    def ask_save(self) -> None:
        path = workspace_files.ask_workspace_path(self)
        if path is not None:
            self.save_workspace(path)

    def save_workspace(self, path) -> int:
        return workspace_files.save_workspace(self, path)

    def ask_open(self) -> None:
        workspace_files.ask_open(self)

    def open_workspace(self, path, recovered: bool = False) -> int:
        return workspace_files.open_workspace(self, path, recovered)

    def confirm_close(self) -> bool:
        return workspace_files.confirm_close(self)

    def autosave(self) -> Optional[int]:
        return autosave_job.autosave(self)

    def check_recovery(self) -> int:
        return autosave_job.check_recovery(self)

    def ask_export_vectors(self) -> None:
        report_actions.ask_export_vectors(self)

    def export_vectors(self, path, opts: Dict[str, Any], overwrite: bool = False) -> int:
        return report_actions.export_vectors(self, path, opts, overwrite)

    def ask_export_report(self) -> None:
        report_actions.ask_export_report(self)

    def export_report(self, folder, options: Optional[FigureOptions] = None,
                      overwrite: bool = False) -> int:
        return report_actions.export_report(self, folder, options, overwrite)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.window and event.type() == QEvent.Type.Close:
            if not self.confirm_close():
                event.ignore()                           # the user chose to stay
                return True
            autosave_job.discard_on_exit(self)
        return False


__all__ = ["WorkspaceActions", "install_workspace_actions"]
