"""The main window: sentences dock, analysis tabs, menus, status bar."""
from __future__ import annotations

import gc
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QCloseEvent, QDesktopServices
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QTabWidget, QVBoxLayout, QWidget)

from elmo_explorer.shell import dialogs
from elmo_explorer.shell import views as view_registry
from elmo_explorer.views.protocol import AnalysisPanel
from elmo_explorer.views.sentences.controller import SentencesPanel
from elmo_explorer.state.settings import AppSettings
from elmo_explorer.shell.menus import build_menus, fill_export, fill_recent
from elmo_explorer.shell.status_bar import StatusArea
from elmo_explorer.state.workspace import ModelSpec, Workspace
from elmo_engine.atomic import atomic_write_text

log = logging.getLogger(__name__)

CHECKPOINT_FILTER = "Checkpoints (*.json *.hdf5 *.h5 *.safetensors);;All files (*)"
SHUTDOWN_WAIT_S = 5.0        # how long quitting waits for a job that cannot be interrupted
TEXT_FILTER = "Text files (*.txt *.txt.gz *.tsv *.gz);;All files (*)"


def demo_checkpoint() -> Optional[Path]:
    """The bundled demo model's folder, or None when it is not installed."""
    from elmo_engine import resources

    return resources.demo_checkpoint_path() if resources.demo_checkpoint_available() else None


def model_label(path) -> str:
    """How the status line names a checkpoint: the bundled model by name, any other by path."""
    demo = demo_checkpoint()
    try:
        if demo is not None and Path(path).resolve() == demo.resolve():
            return "the bundled demo model"
    except OSError:
        pass
    return str(path)


#: the most bytes of the last session's sentences (and of their groups) read back at start
MAX_SESSION_BYTES = 64 << 20


def remembered_checkpoint(last: str) -> Tuple[Optional[str], str]:
    """The remembered checkpoint to reopen, and the one that is gone (``""`` when none).

    Paths are stored absolute; a relative one (stored by an older version) is taken against the
    current folder, and counts as gone when nothing is there."""
    if not last:
        return None, ""
    path = os.path.abspath(last)
    # os.path.exists, not Path.exists: it says False, not raises, for a name too long, a
    # folder not entered, a NUL byte in a hand-edited setting (a start failed on them)
    return (path, "") if os.path.exists(path) else (None, last)


def demo_sentences() -> List[Tuple[str, str]]:
    """The demo sentences with their groups: ``[(group, sentence)]``."""
    from elmo_engine.errors import InputError
    from elmo_engine.io.datasets.sentences import read_grouped_sentences
    from elmo_engine.resources import demo_sentences_path

    try:
        return read_grouped_sentences(demo_sentences_path())
    except InputError:
        return [("bank: river", "He sat on the bank of the river."),
                ("bank: money", "She deposited the check at the bank.")]


class MainWindow(QMainWindow):
    """The application window. ``show_error(title, message)`` shows problems (a dialog)."""

    model_ready = Signal()
    _start_notice = ""          # why start() did not reopen the remembered model (issue 29)
    _session_notice = ""        # why start() did not bring the last session's sentences back

    def __init__(self, settings: AppSettings, workspace: Optional[Workspace] = None,
                 views=None):
        super().__init__()
        self.settings = settings
        self.workspace = workspace if workspace is not None else Workspace(parent=self)
        self.workspace.select_default = True       # every view opens on one word and token
        self.workspace.set_tokenization(settings.tokenization)     # Settings ▸ Tokenization
        self.show_error: Callable[[str, str], None] = lambda t, m: dialogs.show_error(self, t, m)
        self.setWindowTitle(dialogs.APP_TITLE)
        self.setObjectName("mainWindow")

        self.sentences = SentencesPanel(self.workspace, self)
        self.sentences_dock = QDockWidget("Sentences", self)
        self.sentences_dock.setObjectName("sentencesDock")
        self.sentences_dock.setWidget(self.sentences)
        self.sentences_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                                        | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.sentences_dock)

        self.banner = QLabel(self)
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("QLabel#banner { background: #fff3cd; color: #5c4400; "
                                  "border: 1px solid #e0c060; padding: 6px; }")
        self.banner.hide()
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("views")
        self.tabs.setDocumentMode(True)
        self.panels: Dict[str, AnalysisPanel] = {}
        self.view_problems: List[str] = []
        self._add_panels(views)
        central = QWidget(self)
        lay = QVBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.banner)
        lay.addWidget(self.tabs)
        self.setCentralWidget(central)

        self.status = StatusArea(self.statusBar(), self.workspace.worker, self)
        build_menus(self)
        self._connect()
        self._restore_window()
        if self.view_problems:
            self.statusBar().showMessage("Not available: " + "; ".join(self.view_problems), 15000)
        # Everything imported and built so far (torch, Qt, numpy: ~180k objects) lives as long as
        # the app. Freezing it keeps the garbage collector's full passes, which hold the GIL, from
        # scanning it again and again: unfrozen, one pass took 50–400 ms and stalled the GUI thread.
        gc.freeze()

    # ---- construction ------------------------------------------------------------------------
    def _add_panels(self, views) -> None:
        self.view_problems = []
        for view, cls in view_registry.panel_classes(views):
            try:
                panel = cls(self.workspace, self)
            except Exception as e:  # one broken view must not take the window down
                log.exception("the %s view failed to start", view)
                self.view_problems.append(f"the {view} view failed to start: {e}")
                continue
            if not isinstance(panel, AnalysisPanel):
                self.view_problems.append(f"the {view} view lacks part of the AnalysisPanel "
                                          "protocol (elmo_explorer.views.protocol)")
                panel.deleteLater()
                continue
            panel.setObjectName(f"{view}Panel")
            self.panels[view] = panel
            self.tabs.addTab(panel, panel.title)
        for p in self.view_problems:
            log.warning(p)
        if "layers" in self.panels and "probes" in self.panels:
            self.panels["layers"].attach_probes(self.panels["probes"])

    def _connect(self) -> None:
        ws = self.workspace
        ws.model_changed.connect(self._on_model_changed)
        self.tabs.currentChanged.connect(self._put_hidden_views_backstage)
        self._put_hidden_views_backstage()
        ws.model_load_failed.connect(self._on_model_failed)
        ws.message.connect(lambda m: self.statusBar().showMessage(m, 10000))
        ws.worker.unhandled_error.connect(lambda name, m: self.show_error(f"{name} failed", m))

    def _put_hidden_views_backstage(self, *_) -> None:
        """The views not shown wait for the shown one's jobs and the workspace's
        (:meth:`Worker.set_stage`)."""
        shown = self.tabs.currentWidget()
        front = [self.workspace.jobs.name] + [p.jobs.name for p in self.panels.values()
                                               if p is shown]
        self.workspace.worker.set_stage(
            front, [p.jobs.name for p in self.panels.values() if p is not shown])

    def _restore_window(self) -> None:
        screen = self.screen().availableGeometry() if self.screen() else None
        w, h = 1280, 800
        if screen is not None:
            w, h = min(w, screen.width()), min(h, screen.height())
        self.resize(w, h)
        geometry, state = self.settings.geometry(), self.settings.window_state()
        if not geometry.isEmpty():
            self.restoreGeometry(geometry)
        self._restored_state = not state.isEmpty() and self.restoreState(state)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._restored_state:           # first launch: give the sentences a third
            self._restored_state = True
            self.resizeDocks([self.sentences_dock], [max(380, self.width() // 3)],
                             Qt.Orientation.Horizontal)

    # ---- startup -------------------------------------------------------------------------------
    def start(self, checkpoint: Optional[str] = None, sentences_text: Optional[str] = None,
              groups: Optional[Dict[str, str]] = None) -> None:
        """Show the first sentences and load the first model (argument, last one, or the demo).
        ``groups``: sentence → group of ``sentences_text`` (a group<TAB>sentence file's)."""
        if groups:
            self.workspace.sentence_groups = dict(groups)
        if sentences_text is None:
            session = self.settings.session_sentences_path()
            if os.path.lexists(session):
                # restored even when the settings file is new or was emptied: its loss showed
                # the demo sentences and wrote them over the user's at quit
                if self.settings.first_launch:
                    log.warning("the settings file is new or was emptied; the last session's "
                                "sentences (%s) are restored", session)
                sentences_text = self._session_text(session)
            if sentences_text is None:
                sentences_text = self._grouped_text(demo_sentences())
        self.settings.mark_launched()
        self.sentences.set_text(sentences_text)
        self._start_notice, gone = self._session_notice, ""
        if checkpoint is None:
            checkpoint, gone = remembered_checkpoint(self.settings.last_checkpoint)
        if checkpoint is None:
            demo = demo_checkpoint()
            checkpoint = str(demo) if demo is not None else None
        if gone:
            notice = (f"the last checkpoint {gone} is gone; "
                      + ("opened the demo model instead" if checkpoint is not None
                         else "no model is open"))
            self._start_notice = "; ".join(filter(None, (self._start_notice, notice)))
        if self._start_notice:                      # never a silent fallback: stderr + status bar
            from elmo_engine.files import shown

            self._start_notice = shown(self._start_notice, one_line=True)   # a hand-edited path
            print(f"elmo-explorer: {self._start_notice}", file=sys.stderr)
            log.warning("%s", self._start_notice)
            self.statusBar().showMessage(self._start_notice)
        if checkpoint is None:
            self._show_banner("No model loaded: the demo model is not installed. Use File → Open "
                              "checkpoint… (Ctrl+O) to load an ELMo checkpoint (options.json + "
                              "weights .hdf5, or bilm.json + bilm.safetensors).")
            return
        self.open_checkpoint(checkpoint)

    def _session_text(self, session: Path) -> Optional[str]:
        """The last session's sentences, their groups remembered (None: unreadable). Both
        files are read bounded, and only as regular files: a FIFO there hung the start, a
        groups file nested 10,000 deep stopped it."""
        from elmo_engine.files import not_utf8, parse_json_strict, read_bounded

        raw = b""
        try:
            raw = read_bounded(session, MAX_SESSION_BYTES)
            text = raw.decode("utf-8")
        except (OSError, ValueError) as err:         # ValueError: too large, not UTF-8
            e = not_utf8(raw, err) if isinstance(err, UnicodeDecodeError) else err
            # kept whole where the quit's save of the demo sentences cannot replace it
            from elmo_engine.io.writing import keep_aside

            try:
                kept = keep_aside([session, session.with_suffix(".groups.json")],
                                  session.stem)
            except OSError as moved:
                log.warning("cannot read the last session's sentences (%s): %s; nor keep them "
                            "aside: %s", session, e, moved)
            else:
                log.warning("cannot read the last session's sentences (%s): %s; kept in %s",
                            session, e, kept)
                self._session_notice = (f"the last session's sentences could not be read "
                                        f"({e}); kept in {kept}")
            return None
        groups = session.with_suffix(".groups.json")
        saved = {}                                    # a session saved without groups
        if os.path.lexists(groups):
            try:
                saved = parse_json_strict(read_bounded(groups, MAX_SESSION_BYTES))
            except (OSError, ValueError) as e:       # ValueError: not JSON, too deep, too large
                log.warning("ignored the last session's groups (%s): %s", groups, e)
        if isinstance(saved, dict):
            self.workspace.sentence_groups.update(
                {k: v for k, v in saved.items() if isinstance(k, str) and isinstance(v, str)})
        return text

    def _show_banner(self, text: str) -> None:
        self.banner.setText(text)
        self.banner.show()

    # ---- model ---------------------------------------------------------------------------------
    def load_demo_sentences(self) -> None:
        self.sentences.set_text(self._grouped_text(demo_sentences()))

    def _grouped_text(self, pairs: List[Tuple[str, str]]) -> str:
        """Remember the groups of ``[(group, sentence)]``; return the sentences as text."""
        self.workspace.sentence_groups.update({s: g for g, s in pairs if g})
        return "\n".join(s for _g, s in pairs)

    def _fill_recent(self) -> None:
        fill_recent(self)

    def _fill_export(self) -> None:
        fill_export(self)

    def open_checkpoint(self, path) -> int:
        """Load a checkpoint on the worker with the device/precision settings."""
        self.statusBar().showMessage(f"Loading {model_label(path)}…")
        return self.workspace.load_model(ModelSpec(str(path), self.settings.device,
                                                   self.settings.precision))

    def open_demo_model(self) -> None:
        demo = demo_checkpoint()
        if demo is None:
            self.show_error("No demo model", "The demo model is not installed with this copy of "
                            "ELMo Explorer. Open a checkpoint with File → Open checkpoint….")
            return
        self.open_checkpoint(demo)

    def ask_open_checkpoint(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open checkpoint", self.settings.last_dir,
                                              CHECKPOINT_FILTER)
        if path:
            self.settings.last_dir = str(Path(path).parent)
            self.open_checkpoint(path)

    def ask_open_checkpoint_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open checkpoint folder", self.settings.last_dir)
        if path:
            self.settings.last_dir = path
            self.open_checkpoint(path)

    def ask_compare_checkpoint(self) -> None:
        """File → Compare with checkpoint…: CKA against a second model in the Layers tab."""
        if "layers" not in self.panels:
            self.show_error("No Layers view", "The Layers view is not available.")
            return
        self.show_view("layers")
        self.panels["layers"].ask_compare()

    def _on_model_changed(self) -> None:
        ws = self.workspace
        self.banner.hide()
        self.status.show_model(ws.model_info, ws.device_label, ws.model_spec.precision)
        self.setWindowTitle(f"{ws.model_info.name} — {dialogs.APP_TITLE}")
        loaded = f"Loaded {model_label(ws.model_spec.path)}"
        notice, self._start_notice = self._start_notice, ""
        if notice:                                  # the start-up fallback stays in view
            self.statusBar().showMessage(f"{loaded} — {notice}")
        else:
            self.statusBar().showMessage(loaded, 8000)
        self.settings.last_checkpoint = ws.model_spec.path
        self.settings.add_recent_checkpoint(ws.model_spec.path)
        self.model_ready.emit()

    def _on_model_failed(self, path: str, message: str) -> None:
        if path and path == self.settings.last_checkpoint:
            self.settings.last_checkpoint = ""       # the next launch does not reopen it
        keep = (f"\n\nThe model loaded before ({self.workspace.model_info.name}) stays active."
                if self.workspace.model_info is not None else "")
        if self.workspace.model_info is None:
            self._show_banner(f"No model loaded: {message}")
        self.show_error("Cannot load checkpoint", message + keep)

    def set_run_option(self, key: str, value: str) -> None:
        """Persist a device/precision choice and reload the current model with it."""
        setattr(self.settings, key, value)
        spec = self.workspace.model_spec
        if spec is not None:
            self.open_checkpoint(spec.path)

    def set_tokenization(self, tokenization: str, remember: bool = True,
                         refresh: bool = True) -> None:
        """Settings ▸ Tokenization: typed text, or pretokenized text split on spaces (as
        ``--pretokenized``); the sentences are tokenized and embedded again (``refresh``; False:
        new sentences follow). ``remember``: the choice for the next sessions too (a workspace
        opened sets its own, not the setting)."""
        if remember:
            self.settings.tokenization = tokenization
        for act in self.tokenization_menu.actions():
            act.setChecked(act.data() == tokenization)
        self.workspace.set_tokenization(tokenization, refresh)

    def show_model_info(self) -> None:
        ws = self.workspace
        if ws.model_info is None:
            self.show_error("No model", "No model is loaded.")
            return
        dialogs.ModelInfoDialog(ws.model_info, ws.device_label, ws.model_spec.precision, self).exec()

    # ---- sentences ---------------------------------------------------------------------------
    def ask_open_sentences(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open sentences", self.settings.last_dir,
                                              TEXT_FILTER)
        if path:
            self.settings.last_dir = str(Path(path).parent)
            self.open_sentences(path)

    def open_sentences(self, path) -> int:
        """Read a file of sentences (one per line, or group<TAB>sentence) on the worker, then
        show and embed them."""
        from elmo_engine.io.datasets.sentences import read_grouped_sentences

        def job(state):
            state.report(0, 1, f"reading {path}")
            return read_grouped_sentences(path)

        def done(pairs: List[Tuple[str, str]]) -> None:
            self.workspace.sentence_groups.update({s: g for g, s in pairs if g})
            sentences = [s for _g, s in pairs]
            self.sentences.show_sentences(sentences)
            self.statusBar().showMessage(f"Read {len(sentences):,} sentences from {path}", 8000)

        return self.workspace.jobs.submit(f"Reading {Path(path).name}", job, on_done=done,
                                            on_failed=lambda m: self.show_error("Cannot open sentences", m),
                                            kind="sentences-file")

    def ask_save_sentences(self) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path

        path = ask_save_path(self, "Save sentences", "Text files (*.txt)", self.settings.last_dir)
        if path is not None:
            self.settings.last_dir = str(path.parent)
            self.save_sentences(path)

    def save_sentences(self, path) -> int:
        """Write the editor's text to ``path`` (atomically, on the worker)."""
        text = self.sentences.text()
        if text and not text.endswith("\n"):
            text += "\n"
        return self.workspace.jobs.submit(
            f"Saving {Path(path).name}", lambda st: atomic_write_text(path, text),
            on_done=lambda _: self.statusBar().showMessage(f"Saved {path}", 8000),
            on_failed=lambda m: self.show_error("Cannot save sentences", m))

    # ---- export, views, help -----------------------------------------------------------------
    def run_shown_view(self) -> None:
        """View ▸ Run (Ctrl+R): click the shown view's main button when it is enabled (its
        ``main_button()``: Run, Run UMAP or Compute, Train, Score, Build, the shown tab's)."""
        find = getattr(self.tabs.currentWidget(), "main_button", None)
        button = find() if callable(find) else None
        if button is not None and button.isEnabled():
            button.click()

    def show_view(self, view: str) -> None:
        """Bring a view to the front: "sentences" or one of the panel names."""
        if view == "sentences":
            self.sentences_dock.show()
            self.sentences_dock.raise_()
            self.sentences.editor.setFocus()
        elif view in self.panels:
            self.tabs.setCurrentWidget(self.panels[view])
        else:
            raise KeyError(f"no view '{view}' (have: sentences, {', '.join(self.panels)})")

    def view_widget(self, view: str) -> QWidget:
        return self.sentences if view == "sentences" else self.panels[view]

    def cancel_jobs(self) -> None:
        if self.workspace.worker.is_busy():
            self.status.cancel_all()
            self.statusBar().showMessage("Cancelling…", 3000)

    def open_log_folder(self) -> None:
        folder = self.settings.log_dir()
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            QMessageBox.information(self, "Log folder", f"The log files are in\n{folder}")

    def show_about(self) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("elmo-explorer")
        except PackageNotFoundError:
            v = ""
        QMessageBox.about(self, f"About {dialogs.APP_TITLE}", dialogs.about_text(v))

    # ---- shutdown -----------------------------------------------------------------------------
    def save_session(self) -> None:
        """Persist geometry, dock layout and the sentences (atomically)."""
        self.settings.save_window(self.saveGeometry(), self.saveState())
        try:
            path = self.settings.session_sentences_path()
            atomic_write_text(path, self.sentences.text())
            shown = set(self.workspace.sentences)
            atomic_write_text(path.with_suffix(".groups.json"), json.dumps(
                {s: g for s, g in self.workspace.sentence_groups.items() if s in shown}))
        except OSError as e:
            log.warning("cannot save the session's sentences: %s", e)
        self.settings.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_session()
        self.hide()                                  # gone at once, even if a job must finish
        if not self.workspace.worker.shutdown(timeout_s=SHUTDOWN_WAIT_S):
            log.error("a job did not stop within %.0f s of quitting", SHUTDOWN_WAIT_S)
        super().closeEvent(event)
