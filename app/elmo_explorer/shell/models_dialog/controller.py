"""File → Get a published model…: :class:`GetModelDialog` wires the dialog's model and widgets to
the engine's model store (:mod:`elmo_engine.io.model_store`, :mod:`elmo_engine.io.model_get`)
and to the worker.

Downloading, verifying and removing run as jobs on the worker's long lane (docs/guide/app.md),
never on the GUI thread; the download's :class:`~elmo_engine.progress.TransferReport` s come back
as the job's posts (bytes, speed, time left) and its cancel is the job's. Reading the listing
(a few ``stat`` calls and the manifests, under 1 MiB each) happens on the GUI thread.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Optional

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMessageBox, QWidget

from elmo_engine.errors import ElmoError
from elmo_engine.io import model_get, model_store
from elmo_engine.progress import TransferReport, TransferState, format_bytes
from elmo_explorer.shell.models_dialog.model import (Busy, DialogModel, Row, free_space_text,
                                                     one_line, progress_fraction,
                                                     progress_text)
from elmo_explorer.shell.models_dialog.view import GetModelView
from elmo_explorer.state.worker import JobHandle, JobState, Lane, Worker

log = logging.getLogger(__name__)

GEOMETRY_KEY = "dialogs/get_model_geometry"
DEFAULT_SIZE = (1200, 400)


class _JobTransfer(TransferState):
    """A :class:`TransferState` whose cancel is the worker job's (Cancel, shutdown), whose
    reports go to the job's posts, and whose progress goes to the status bar."""

    def __init__(self, job: JobState):
        super().__init__(on_transfer=job.post, on_progress=job.report)
        self._job = job

    @property
    def cancelled(self) -> bool:
        return self._job.cancelled

    def check(self) -> None:
        self._job.check()

    def cancel(self) -> None:
        self._job.cancel()


class GetModelDialog(GetModelView):
    """The catalogue with what is on disk; Get (resumable), Cancel, Open, Verify, Remove.

    ``open_model(folder)`` loads a downloaded model in the window (which adds it to the recent
    list once it has loaded). ``settings`` (an AppSettings) keeps the dialog's size.
    """

    def __init__(self, worker: Worker, open_model: Callable[[Path], None], settings=None,
                 parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.worker = worker
        self.open_model = open_model
        self.settings = settings
        self.model = DialogModel()
        self.job: Optional[JobHandle] = None
        self._outcome: Optional[str] = None
        self._restore_size()
        self.table.itemSelectionChanged.connect(self._on_select)
        self.table.doubleClicked.connect(lambda _i: self._primary())
        self.softmax.toggled.connect(lambda _on: self._update_actions())
        self.get_button.clicked.connect(self.get_selected)
        self.open_button.clicked.connect(self.open_selected)
        self.verify_button.clicked.connect(self.verify_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.cancel_button.clicked.connect(self.cancel_job)
        self.close_button.clicked.connect(self.reject)
        self.refresh()

    # ---- listing -----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the catalogue and what is on disk again; redraw the table and the buttons."""
        try:
            listing = model_store.list_models()
        except ElmoError as e:                       # a broken catalogue or an unreadable folder
            self.show_status(one_line(str(e)), error=True)
            return
        self.model.set_listing(listing)
        self.show_rows(self.model.rows, self.model.selected)
        self.storage.set_full_text(free_space_text(listing))
        self._update_actions()

    def _on_select(self) -> None:
        name = self.selected_name()
        if name is not None:
            self.model.selected = name
        row = self.model.row()
        if row is not None and not row.softmax_published:
            self.softmax.setChecked(False)
        self._update_actions()

    def _update_actions(self) -> None:
        self.show_actions(self.model.actions(self.softmax.isChecked()))

    def select(self, name: str) -> None:
        """Select a catalogue model by name (tests, and a future ``--get NAME``)."""
        self.model.selected = name
        self.show_rows(self.model.rows, name)
        self._on_select()

    def _primary(self) -> None:
        a = self.model.actions(self.softmax.isChecked())
        if a.default == "open" and a.open:
            self.open_selected()
        elif a.get:
            self.get_selected()

    # ---- jobs ----------------------------------------------------------------------------------
    def _submit(self, busy: Busy, name: str, title: str, fn, on_done) -> None:
        self.model.busy, self.model.busy_name, self._outcome = busy, name, None
        self.refresh()                               # the row says what runs; the buttons wait
        waiting = [h for h in self.worker.running_jobs() if h.lane is Lane.LONG]
        self.show_progress(None, f"{title}: waiting for “{waiting[0].name}” to finish…"
                           if waiting else f"{title}…")

        def done(value) -> None:
            self._outcome = "done"
            on_done(value)

        def failed(message: str) -> None:
            self._outcome = "failed"
            self.show_status(one_line(message), error=True)

        self.job = self.worker.group("models", "Models").submit(
            title, fn, lane=Lane.LONG, on_done=done, on_failed=failed,
            on_event=self._on_transfer, on_finished=self._job_finished)

    def _on_transfer(self, rep: TransferReport) -> None:
        if isinstance(rep, TransferReport):
            self.show_progress(progress_fraction(rep), progress_text(rep))

    def _job_finished(self) -> None:
        busy, name = self.model.busy, self.model.busy_name
        self.model.busy, self.model.busy_name = Busy.IDLE, None
        self.job = None
        self.hide_progress()
        if self._outcome is None:                    # cancelled
            if busy is Busy.GETTING:
                part = model_store.model_status(name).partial_bytes
                kept = (f"; {format_bytes(part)} downloaded so far are kept: Get resumes"
                        if part else "")
                self.show_status(f"Download of {name} cancelled; nothing was installed{kept}.")
            else:
                self.show_status(f"{busy.value.capitalize()} {name}: cancelled.")
        self.refresh()

    def _idle_row(self) -> Optional[Row]:
        """The selected row, when nothing runs (else None: the buttons are off anyway)."""
        return self.model.row() if self.model.busy is Busy.IDLE else None

    def get_selected(self) -> None:
        row = self._idle_row()
        if row is None:
            return
        name = row.name
        with_softmax = self.softmax.isChecked() and row.softmax_published

        def job(state: JobState):
            return model_get.get_model(name, with_softmax=with_softmax,
                                       state=_JobTransfer(state))

        def done(status: model_store.ModelStatus) -> None:
            extra = " with its softmax" if status.has_softmax else ""
            self.show_status(f"{name} is downloaded{extra} and checked, in {status.folder}. "
                             "Open loads it.")
            self.select(name)

        self._submit(Busy.GETTING, name, f"Downloading {name}", job, done)

    def verify_selected(self) -> None:
        row = self._idle_row()
        if row is None:
            return
        name = row.name

        def job(state: JobState):
            return model_store.verify_model(name, _JobTransfer(state))

        def done(report: model_store.VerifyReport) -> None:
            self.show_status(self.model.record_verify(report), error=not report.ok)

        self._submit(Busy.VERIFYING, name, f"Verifying {name}", job, done)

    def remove_selected(self) -> None:
        row = self._idle_row()
        if row is None:
            return
        name = row.name
        folder = self.model.folder(name)
        if not self.ask("Remove model", f"Delete the downloaded model '{name}' and any partial "
                        f"download?\n\n{folder}"):
            return

        def job(state: JobState):
            state.check()
            return model_store.remove_model(name)

        def done(freed: int) -> None:
            self.model.verified.pop(name, None)
            self.show_status(f"Removed {name} ({format_bytes(freed)} freed).")

        self._submit(Busy.REMOVING, name, f"Removing {name}", job, done)

    def cancel_job(self) -> None:
        if self.job is not None and self.job.cancel():
            self.show_status("Cancelling…")

    def open_selected(self) -> None:
        row = self._idle_row()
        if row is None:
            return
        try:
            folder = model_store.model_path(row.name)          # checks the sizes
        except ElmoError as e:
            self.show_status(one_line(str(e)), error=True)
            self.refresh()
            return
        self.open_model(folder)
        self.accept()

    # ---- closing, size -------------------------------------------------------------------------
    def ask(self, title: str, text: str) -> bool:
        """A yes/no question (tests replace it)."""
        answer = QMessageBox.question(self, title, text, QMessageBox.StandardButton.Yes
                                      | QMessageBox.StandardButton.No,
                                      QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def reject(self) -> None:  # Esc, Close, the window's close button
        if self.model.busy is Busy.GETTING and self.job is not None:
            if not self.ask("Stop the download?",
                            f"Downloading {self.model.busy_name} is not finished. Stop it and "
                            "close? What has arrived is kept; Get resumes it."):
                return
            self.cancel_job()
        elif self.job is not None:
            self.cancel_job()
        super().reject()

    def done(self, result: int) -> None:  # Qt override (accept and reject end here)
        self._save_size()
        super().done(result)

    def _restore_size(self) -> None:
        self.resize(*DEFAULT_SIZE)
        if self.settings is None:
            return
        geometry = self.settings.qs.value(GEOMETRY_KEY, QByteArray(), type=QByteArray)
        if not geometry.isEmpty():
            self.restoreGeometry(geometry)

    def _save_size(self) -> None:
        if self.settings is not None:
            self.settings.qs.setValue(GEOMETRY_KEY, self.saveGeometry())

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.model.busy is Busy.IDLE:
            self.refresh()


def show_get_model_dialog(window) -> GetModelDialog:
    """File → Get a published model…: show the window's dialog (one per window, modeless, so a
    download can run while the user works; it keeps its state when closed and shown again)."""
    dialog = getattr(window, "get_model_dialog", None)
    if dialog is None:
        dialog = GetModelDialog(window.workspace.worker,
                                lambda folder: window.open_checkpoint(str(folder)),
                                window.settings, window)
        window.get_model_dialog = dialog
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
