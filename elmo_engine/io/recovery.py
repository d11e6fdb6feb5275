"""Autosave and crash recovery of the app's workspace.

Each window autosaves its analysis to a file of its own,
``<data dir>/autosave/autosave-<pid>.elmows.json``, while it has changes; a clean exit removes
that window's file and no other. Two windows on one settings folder once shared one file: each
wrote over the other's work, and the first to quit cleanly removed the file the other would
have been recovered from. At the next start :func:`find_recovery` says whether an autosave was
left by a session that did not end cleanly (and is not running any more): the newest such file
is offered, the others at the starts that follow. An autosave whose workspace was saved after
it is removed (the workspace holds that work). An autosave it cannot read (damaged, or from a
newer version) is moved aside with a log line, never removed, unless the process its name names
still runs (a newer version's window). The one file of versions before 2026-12-08,
``autosave.elmows.json``, is still found.

A window that recovers or declines an autosave first claims it (:func:`claim`): a file beside it,
``<name>.claimed``, made with ``O_EXCL`` and holding the claiming process's id and host, so that
two windows starting together never both take it (one declining would delete what the other
recovered). A claim of a process that is gone is stale and taken over; :func:`discard` and
:func:`release` remove it.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from elmo_engine.errors import InputError
from elmo_engine.io.workspace_file import (AUTOSAVE_NAME, SUFFIX, _host, _remove_stale_arrays,
                                           _stem, arrays_files, load_workspace)
from elmo_engine.io.writing import keep_aside

log = logging.getLogger(__name__)
#: the largest process id any system gives (Linux: at most 2**22); a larger one is not a process
MAX_PID = 2 ** 31 - 1


#: the autosaves one start looks at, newest first (a folder of thousands is read in part)
MAX_AUTOSAVES = 64
_OWN_NAME = re.compile(r"autosave-([0-9]{1,10})" + re.escape(SUFFIX))


def autosave_path(folder, pid: Optional[int] = None) -> Path:
    """Where the window of process ``pid`` (this one by default) autosaves:
    ``<folder>/autosave-<pid>.elmows.json``."""
    return Path(folder) / f"autosave-{os.getpid() if pid is None else pid}{SUFFIX}"


def autosave_files(folder) -> List[Path]:
    """The autosaves in ``folder``, newest first (at most :data:`MAX_AUTOSAVES`): every
    window's ``autosave-<pid>.elmows.json`` and the single file of older versions."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if _OWN_NAME.fullmatch(entry.name) or entry.name == AUTOSAVE_NAME:
                    try:
                        if entry.is_file(follow_symlinks=False):
                            found.append((entry.stat(follow_symlinks=False).st_mtime,
                                          Path(entry.path)))
                    except OSError:
                        continue
    except FileNotFoundError:                        # no folder yet: nothing autosaved
        return []
    except OSError as e:                             # one that cannot be read: said, passed
        log.warning("the autosave folder %s cannot be read: %s", folder, e)
        return []
    found.sort(key=lambda item: (-item[0], item[1].name))
    return [p for _, p in found[:MAX_AUTOSAVES]]


def discard(path) -> None:
    """Remove one autosave, its arrays files and its claim."""
    p = Path(path)
    p.unlink(missing_ok=True)
    _remove_stale_arrays(p, None)
    release(p)


#: a claim file's suffix, after the autosave's name
CLAIM_SUFFIX = ".claimed"


def claim(path) -> bool:
    """Take the autosave ``path`` for this window: True when this process holds its claim now,
    False when another running window does (it is recovering or removing it). A claim left by
    a process that is gone is taken over."""
    lock = _claim_path(path)
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            holder = _claim_holder(lock)
            if holder == "this":
                return True
            if holder == "other":
                return False
            try:                                   # stale: its process is gone
                os.unlink(lock)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {_host()}\n")
        return True
    return False


def release(path) -> None:
    """Give up this window's claim on the autosave ``path`` (the autosave stays)."""
    lock = _claim_path(path)
    if _claim_holder(lock) in ("this", "stale"):
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass


def _claim_path(path) -> Path:
    p = Path(path)
    return p.with_name(p.name + CLAIM_SUFFIX)


def _claim_holder(lock: Path) -> str:
    """Who holds the claim ``lock``: "this" process, an "other" running one (or one of another
    host, which cannot be asked), "stale" (gone, or a file that is no claim), or "none"."""
    try:
        with open(lock, "rb") as fh:
            text = fh.read(256).decode("utf-8", "replace").split()
    except FileNotFoundError:
        return "none"
    except OSError:
        return "other"                           # cannot be read: leave it to its owner
    if len(text) != 2 or not text[0].isdigit():
        return "stale"
    pid, host = int(text[0]), text[1]
    if host != _host():
        return "other"
    if pid == os.getpid():
        return "this"
    return "other" if _alive(pid) else "stale"


def _running_owner(path: Path) -> bool:
    """Whether the process an autosave's name names (``autosave-<pid>``) runs here and is not
    this one: its window writes it (the file's own session says so too once it is read)."""
    m = _OWN_NAME.fullmatch(path.name)
    return m is not None and int(m.group(1)) != os.getpid() and _alive(int(m.group(1)))


def discard_autosave(folder) -> None:
    """Remove this window's autosave (and its arrays) after a clean exit; another window's
    is left alone."""
    discard(autosave_path(folder))


@dataclass
class Recovery:
    """An autosave that a crashed session left behind."""

    path: Path
    saved_at: str
    n_sentences: int
    source: str                        # the workspace file it belongs to ("" = never saved)


def find_recovery(folder) -> Optional[Recovery]:
    """The newest autosave to offer for recovery, or None.

    An autosave is passed over when it belongs to a session still running on this host (the
    window that writes it), and removed when the workspace it belongs to was saved after it;
    one that cannot be read is kept aside. Called at start-up, before this window's first
    autosave: a file named with this process's id was left by an earlier process of that id.
    """
    for p in autosave_files(folder):
        if _claim_holder(_claim_path(p)) == "other":
            continue                        # another window is recovering or removing it
        found = _recoverable(p)
        if found is not None:
            return found
    return None


def _recoverable(p: Path) -> Optional[Recovery]:
    """The autosave ``p`` as a :class:`Recovery`, or None (see :func:`find_recovery`)."""
    try:
        loaded = load_workspace(p, verify_checksum=False)
    except InputError as e:
        try:                              # a read that failed (permissions, a race with the
            with open(p, "rb"):           # window that owns it) is no reason to move it
                pass
        except OSError:
            return None
        if _running_owner(p):             # a running window's (a newer version's): its own
            return None
        _move_aside(p, str(e))
        return None
    pid = loaded.session.get("pid")
    if (loaded.session.get("host") == _host() and isinstance(pid, int) and pid != os.getpid()
            and _alive(pid)):
        return None                                  # another window is running and owns it
    src = loaded.data.source
    try:
        saved_after = bool(src) and os.path.isfile(src) and \
            os.stat(src).st_mtime >= p.stat().st_mtime
    except (OSError, ValueError):                    # a name too long, a NUL byte: not saved
        saved_after = False
    if saved_after:                                  # saved explicitly after the autosave
        try:
            discard(p)
        except OSError as e:
            log.warning("cannot remove the autosave %s, older than its workspace %s: %s",
                        p, src, e)
        return None
    return Recovery(p, loaded.data.saved_at, len(loaded.data.sentences), src)


def _move_aside(p: Path, why: str) -> None:
    """Keep an autosave that cannot be read, with its arrays files, in a folder of its own
    beside the next one (:func:`~elmo_engine.io.writing.keep_aside`), and say so in the log: a
    newer version's opens in that version."""
    try:
        kept = keep_aside([p, *arrays_files(p)], _stem(p))
    except OSError as e:
        log.warning("the autosave %s cannot be read (%s), nor kept aside: %s", p, why, e)
        return
    log.warning("the autosave %s cannot be read (%s); kept in %s", p, why, kept)


def _alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a pid out of every system's range, 0 or negative —
    a damaged autosave — is none: ``os.kill(0, 0)`` signals this process's group, and one over
    the C range raised OverflowError)."""
    if not 0 < pid <= MAX_PID:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


__all__ = ["CLAIM_SUFFIX", "MAX_AUTOSAVES", "Recovery", "autosave_files", "autosave_path",
           "claim", "discard", "discard_autosave", "find_recovery", "release"]
