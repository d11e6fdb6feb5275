"""Autosave and crash recovery of the app's workspace.

Each window autosaves its analysis to a file of its own,
``<data dir>/autosave/autosave-<pid>.elmows.json``, while it has changes; a clean exit removes
that window's file and no other. Two windows on one settings folder once shared one file: each
wrote over the other's work, and the first to quit cleanly removed the file the other would
have been recovered from. At the next start :func:`find_recovery` says whether an autosave was
left by a session that did not end cleanly (and is not running any more): the newest such file
is offered, the others at the starts that follow. An autosave whose workspace was saved after
it is removed (the workspace holds that work). An autosave it cannot read (damaged, or from a
newer version) is moved aside with a log line, never removed. The one file of versions before
2026-12-08, ``autosave.elmows.json``, is still found.
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
    except OSError:                                  # no folder yet, or one that cannot be read
        return []
    found.sort(key=lambda item: (-item[0], item[1].name))
    return [p for _, p in found[:MAX_AUTOSAVES]]


def discard(path) -> None:
    """Remove one autosave and its arrays files."""
    p = Path(path)
    p.unlink(missing_ok=True)
    _remove_stale_arrays(p, None)


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


__all__ = ["MAX_AUTOSAVES", "Recovery", "autosave_files", "autosave_path", "discard",
           "discard_autosave", "find_recovery"]
