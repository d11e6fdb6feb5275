"""The status bar: job in progress (label, progress bar, Cancel), model and device.

The job label names the view a job belongs to ("Corpus: searching …"); its tooltip lists every
pending job by view (the worker's job groups)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QStatusBar, QWidget

from elmo_explorer.shell.dialogs import human_bytes, human_count
from elmo_explorer.state.worker import Worker


JOB_TEXT_PX = 300


class StatusArea:
    """Fills a :class:`QStatusBar` and follows a :class:`Worker`'s signals."""

    def __init__(self, bar: QStatusBar, worker: Worker, parent: QWidget):
        self.bar = bar
        self.worker = worker
        self.job_label = QLabel(parent)
        self.job_label.setObjectName("jobLabel")
        self.job_label.setMinimumWidth(JOB_TEXT_PX + 8)
        self.progress = QProgressBar(parent)
        self.progress.setObjectName("jobProgress")
        self.progress.setMaximumWidth(160)
        self.progress.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel", parent)
        self.cancel_button.setObjectName("cancelButton")
        self.cancel_button.setToolTip("Cancel the running jobs (Esc)")
        self.cancel_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.model_label = QLabel("No model", parent)
        self.model_label.setObjectName("modelLabel")
        self.device_label = QLabel("", parent)
        self.device_label.setObjectName("deviceLabel")
        for w in (self.job_label, self.progress, self.cancel_button):
            bar.addPermanentWidget(w)
        bar.addPermanentWidget(self.model_label)
        bar.addPermanentWidget(self.device_label)
        self._current: Optional[int] = None
        self._user_cancelled = False      # "Cancelled" is said for this button only: a job that
                                          # a newer request superseded was not cancelled by anyone
        self.cancel_button.clicked.connect(self.cancel_all)
        worker.job_started.connect(self._on_started)
        worker.job_finished.connect(lambda _id: self._list_jobs())
        worker.job_progress.connect(self._on_progress)
        worker.job_failed.connect(self._on_failed)
        worker.job_cancelled.connect(self._on_cancelled)
        worker.idle.connect(self._on_idle)
        self._on_idle()

    def _set_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        self.job_label.setVisible(busy)

    def _on_started(self, job_id: int, name: str) -> None:
        self._current = job_id
        self._set_busy(True)
        self._set_job_text(self.job_title(job_id, name))
        self._list_jobs()
        self.progress.setRange(0, 0)                       # busy until the first report

    def job_title(self, job_id: int, name: str) -> str:
        """``name`` behind its view's title ("Corpus: searching …"), unless it names it."""
        handle = self.worker.job(job_id)
        title = self.worker.group_title(handle.group) if handle is not None else ""
        return name if not title or name.startswith(title) else f"{title}: {name}"

    def _list_jobs(self) -> None:
        """The label's tooltip: every pending job, by view."""
        lines = []
        for title, handles in sorted(self.worker.pending_by_group().items()):
            lines.append(f"{title or 'App'}: " + "; ".join(h.name for h in handles))
        self.job_label.setToolTip("\n".join(lines))

    def _on_progress(self, job_id: int, done: int, total: int, message: str) -> None:
        if job_id != self._current:
            return
        if total > 0:
            scale = max(1, (total + 2**30) // 2**31)       # QProgressBar takes 32-bit ints
            self.progress.setRange(0, total // scale)
            self.progress.setValue(min(done, total) // scale)
        if message:
            self._set_job_text(self.job_title(job_id, message))

    def _set_job_text(self, text: str) -> None:
        """Elide long job names at the end ("Indexing the neighbour c…"), never mid-glyph."""
        fm = self.job_label.fontMetrics()
        self.job_label.setText(fm.elidedText(text, Qt.TextElideMode.ElideRight, JOB_TEXT_PX))

    def _on_failed(self, job_id: int, message: str) -> None:
        self.bar.showMessage(f"Failed: {message.splitlines()[0] if message else ''}", 15000)

    def cancel_all(self) -> None:
        """Cancel every job (the button and Esc); the bar then says "Cancelled"."""
        self._user_cancelled = True
        self.worker.cancel_all()

    def _on_cancelled(self, job_id: int) -> None:
        if job_id == self._current and self._user_cancelled:
            self.bar.showMessage("Cancelled", 4000)

    def _on_idle(self) -> None:
        self._current = None
        self._user_cancelled = False
        self._set_busy(False)

    def show_model(self, info, device_label: str, precision: str) -> None:
        """Model name, parameter count, weights size; device and precision."""
        if info is None:
            self.model_label.setText("No model")
            self.model_label.setToolTip("")
            self.device_label.setText("")
            return
        total = info.parameter_counts.get("total", sum(info.parameter_counts.values()))
        self.model_label.setText(f"{info.name} · {human_count(total)} params · "
                                 f"{human_bytes(info.weights_bytes)}")
        self.model_label.setToolTip(f"{info.weights_path}\nsha256 {info.checksum}")
        self.device_label.setText(f"{device_label} · {precision}")
