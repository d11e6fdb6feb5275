"""Autosave and crash recovery of the app's workspace.

The app autosaves the analysis to ``<data dir>/autosave/autosave.elmows.json`` while it has
changes; a clean exit removes it. At the next start :func:`find_recovery` says whether an
autosave was left by a session that did not end cleanly (and is not running any more). An
autosave it cannot read (damaged, or from a newer version) is moved aside with a log line, never
removed: the clean exit that follows deleted it.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from elmo_engine.errors import InputError
from elmo_engine.io.workspace_file import (AUTOSAVE_NAME, _host, _remove_stale_arrays, _stem,
                                           arrays_files, load_workspace)
from elmo_engine.io.writing import keep_aside

log = logging.getLogger(__name__)
#: the largest process id any system gives (Linux: at most 2**22); a larger one is not a process
MAX_PID = 2 ** 31 - 1


def autosave_path(folder) -> Path:
    """Where the app autosaves: ``<folder>/autosave.elmows.json``."""
    return Path(folder) / AUTOSAVE_NAME


def discard_autosave(folder) -> None:
    """Remove the autosave (and its arrays) after a clean exit or a recovery that was declined."""
    p = autosave_path(folder)
    p.unlink(missing_ok=True)
    _remove_stale_arrays(p, None)


@dataclass
class Recovery:
    """An autosave that a crashed session left behind."""

    path: Path
    saved_at: str
    n_sentences: int
    source: str                        # the workspace file it belongs to ("" = never saved)


def find_recovery(folder) -> Optional[Recovery]:
    """The autosave to offer for recovery, or None.

    None when there is no autosave, when it belongs to a session still running on this host,
    when it cannot be read, or when the workspace it belongs to was saved after it.
    """
    p = autosave_path(folder)
    if not p.is_file():
        return None
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
        if src and os.path.isfile(src) and os.stat(src).st_mtime >= p.stat().st_mtime:
            return None                              # saved explicitly after the autosave
    except (OSError, ValueError):                    # a name too long, a NUL byte: not saved
        pass
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


__all__ = ["Recovery", "autosave_path", "discard_autosave", "find_recovery"]
