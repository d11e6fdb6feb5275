"""The Get-a-published-model dialog's state, plain Python (no Qt; tested without a window).

It turns the engine's :class:`~elmo_engine.io.model_store.StoreListing` into table rows, decides
what the buttons may do for the selected model while nothing / a download / a check runs, and
writes the lines the dialog shows: progress with speed and time left
(:class:`~elmo_engine.progress.TransferReport`), and one line per error.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

from elmo_engine.io.model_store import ModelStatus, StoreListing, VerifyReport
from elmo_engine.progress import TransferReport, format_bytes

#: the table's columns, in order
COLUMNS = ("Model", "On disk", "Parameters", "Download (+ softmax)",
           "Memory without / with softmax", "Architecture", "Trained on")


class Busy(enum.Enum):
    """What the dialog is doing (one thing at a time)."""

    IDLE = "idle"
    GETTING = "getting"
    VERIFYING = "verifying"
    REMOVING = "removing"


@dataclass(frozen=True)
class Row:
    """One catalogue model as the table shows it (``cells`` in :data:`COLUMNS` order)."""

    name: str
    cells: Tuple[str, ...]
    tooltip: str
    downloaded: bool
    has_softmax: bool
    softmax_published: bool
    damaged: bool
    partial_bytes: int


@dataclass(frozen=True)
class Actions:
    """Which buttons are enabled, and which one Enter presses (``"get"`` or ``"open"``)."""

    get: bool
    get_label: str
    softmax_box: bool
    open: bool
    verify: bool
    remove: bool
    cancel: bool
    default: str


def _size(n: Optional[int], approx: bool = True) -> str:
    if not n:
        return "—"
    return ("~" if approx else "") + format_bytes(n)


def on_disk_text(s: ModelStatus, verified: Optional[bool] = None) -> str:
    """"downloaded, 54.4 MB (size checked)", "partial: 12.0 MB (Get resumes)", "damaged", "—"."""
    if s.problem:
        return "damaged (Verify, then Remove and Get)"
    if s.downloaded:
        what = "downloaded" + (" + softmax" if s.has_softmax else "")
        check = {None: "size checked", True: "SHA-256 verified", False: "verify FAILED"}[verified]
        return f"{what}, {format_bytes(s.bytes_on_disk)} ({check})"
    if s.partial_bytes:
        return f"partial: {format_bytes(s.partial_bytes)} (Get resumes)"
    return "—"


def row_for(s: ModelStatus, verified: Optional[bool] = None, doing: Optional[str] = None) -> Row:
    m = s.model
    download = _size(m.download_bytes(False))
    memory = format_bytes(m.memory_bytes) + " / "
    if m.softmax is not None:
        download += " + " + _size(m.download_bytes(True) - m.download_bytes(False))
        memory += format_bytes(m.memory_with_softmax_bytes or 0)
    else:
        memory += "no softmax published"
    cells = (m.name, doing or on_disk_text(s, verified), f"{m.parameters / 1e6:.1f} M", download,
             memory, m.folder, m.corpus)
    tip = (f"{m.label}\n{m.architecture}\ntrained on {m.corpus}\nstored in {s.folder}"
           + (f"\n{s.problem}" if s.problem else ""))
    return Row(name=m.name, cells=cells, tooltip=tip, downloaded=s.downloaded,
               has_softmax=s.has_softmax, softmax_published=m.softmax is not None,
               damaged=s.problem is not None, partial_bytes=s.partial_bytes)


def free_space_text(listing: StoreListing) -> str:
    free = "unknown" if listing.free_bytes is None else format_bytes(listing.free_bytes)
    return f"Stored in {listing.folder} — {free} free"


def progress_text(rep: TransferReport) -> str:
    """"weights: 12.3 MB of 54.4 MB, 4.1 MB/s, 10 s left" (the step alone while it counts no
    bytes)."""
    return ": ".join(t for t in (rep.message, rep.describe()) if t) or "starting…"


def progress_fraction(rep: TransferReport) -> Optional[float]:
    """0…1, or None while the total is unknown (a busy bar)."""
    if not rep.total:
        return None
    return max(0.0, min(1.0, rep.done / rep.total))


def one_line(message: str) -> str:
    """The first non-empty line of an error message (the engine's errors are one line)."""
    for line in str(message).splitlines():
        if line.strip():
            return line.strip()
    return "failed (no message)"


class DialogModel:
    """The rows, the selection, what runs and what the last check said."""

    def __init__(self) -> None:
        self.listing: Optional[StoreListing] = None
        self.rows: Tuple[Row, ...] = ()
        self.selected: Optional[str] = None
        self.busy = Busy.IDLE
        self.busy_name: Optional[str] = None        # the model a job works on
        self.verified: Dict[str, bool] = {}

    def set_listing(self, listing: StoreListing) -> None:
        self.listing = listing
        for s in listing.models:                   # a model that went away forgets its check
            if not s.downloaded:
                self.verified.pop(s.model.name, None)
        self.rows = tuple(row_for(s, self.verified.get(s.model.name), self._doing(s.model.name))
                          for s in listing.models)
        if self.selected not in {r.name for r in self.rows}:
            self.selected = next((r.name for r in self.rows if r.downloaded),
                                 self.rows[0].name if self.rows else None)

    def _doing(self, name: str) -> Optional[str]:
        """"downloading…" etc. for the model a job works on."""
        if self.busy is Busy.IDLE or name != self.busy_name:
            return None
        return {Busy.GETTING: "downloading…", Busy.VERIFYING: "verifying…",
                Busy.REMOVING: "removing…"}[self.busy]

    def row(self, name: Optional[str] = None) -> Optional[Row]:
        name = self.selected if name is None else name
        return next((r for r in self.rows if r.name == name), None)

    def folder(self, name: str) -> Optional[Path]:
        if self.listing is None:
            return None
        return next((s.folder for s in self.listing.models if s.model.name == name), None)

    def record_verify(self, report: VerifyReport) -> str:
        """Remember the outcome; return the line to show."""
        self.verified[report.model] = report.ok
        if report.ok:
            return (f"{report.model}: every file's size and SHA-256 match those recorded at "
                    f"download ({len(report.checks)} files)")
        bad = [c for c in report.checks if not c.ok]
        if not bad:
            return f"{report.model}: nothing to check (no downloaded files)"
        return one_line(bad[0].problem or f"{bad[0].name}: check failed")

    def actions(self, with_softmax: bool) -> Actions:
        row = self.row()
        idle = self.busy is Busy.IDLE
        if row is None:
            return Actions(False, "Get", False, False, False, False, not idle, "get")
        wants_softmax = with_softmax and row.softmax_published
        complete = row.downloaded and (row.has_softmax or not wants_softmax)
        can_get = idle and not complete and not row.damaged
        label = "Resume" if row.partial_bytes and not row.downloaded else "Get"
        if row.downloaded and wants_softmax and not row.has_softmax:
            label = "Get softmax"
        can_open = idle and row.downloaded and not row.damaged
        on_disk = row.downloaded or row.damaged or row.partial_bytes > 0
        return Actions(get=can_get, get_label=label,
                       softmax_box=idle and row.softmax_published and not row.has_softmax,
                       open=can_open, verify=idle and (row.downloaded or row.damaged),
                       remove=idle and on_disk, cancel=not idle,
                       default="open" if can_open and not can_get else "get")
