"""The command line's last-resort handler: an error nobody expected becomes one line on stderr
and a traceback in a log file, never a traceback on the terminal.

The log is ``cli-errors.log`` in ``$ELMO_EXPLORER_LOG_DIR`` when that is set, else in
``$XDG_STATE_HOME/elmo-explorer`` (``~/.local/state/elmo-explorer``); it is kept under 1 MB
(one older copy). A ``MemoryError`` is reported as running out of memory.
"""
from __future__ import annotations

import logging
import os
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Optional

LOG_NAME = "cli-errors.log"


def log_dir() -> Path:
    """Where the command line writes the tracebacks of unexpected errors."""
    env = os.environ.get("ELMO_EXPLORER_LOG_DIR")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "elmo-explorer"


def log_traceback(exc: BaseException, command: str) -> Optional[Path]:
    """Append ``exc``'s traceback to the log; return the log's path (None if it can't be
    written)."""
    try:
        folder = log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / LOG_NAME
        handler = RotatingFileHandler(path, maxBytes=1_000_000, backupCount=1, encoding="utf-8",
                                      errors="backslashreplace")
    except Exception:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("elmo_engine.cli.unexpected")
    logger.propagate = False            # the terminal gets one line, not the traceback
    logger.addHandler(handler)
    try:
        logger.error("unexpected error in 'elmo-explorer %s'", command,
                     exc_info=(type(exc), exc, exc.__traceback__))
        return path
    except Exception:
        return None
    finally:
        logger.removeHandler(handler)
        handler.close()


def report_unexpected(exc: BaseException, command: str) -> int:
    """One line on stderr for an unexpected error (the traceback goes to the log); exit status 1."""
    if isinstance(exc, MemoryError):
        what = ("out of memory (the input, or a file it names, needs more memory than this "
                "machine has; try a smaller input or --batch-size)")
    elif isinstance(exc, RecursionError):
        what = "the input is nested too deeply to process"
    else:
        text = " ".join(str(exc).split())[:300]
        what = f"unexpected {type(exc).__name__}" + (f": {text}" if text else "")
    path = log_traceback(exc, command)
    where = f" (details in {path})" if path is not None else ""
    try:
        from elmo_engine.cli.parsing import error_line

        print(error_line(f"{what}{where}"), file=sys.stderr)
    except Exception:
        pass
    return 1
