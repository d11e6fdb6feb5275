"""Logging to a rotating file in the app's data folder, and hooks for uncaught exceptions."""
from __future__ import annotations

import logging
import sys
import threading
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Callable, Optional

LOG_NAME = "elmo-explorer.log"
#: Qt messages that say nothing about the app (the offscreen plugin on every dock/dialog)
_HARMLESS = ("does not support propagateSizeHints",)
_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"


class _AppHandler(RotatingFileHandler):
    """Marker subclass so a second setup replaces our handler instead of adding another."""


def setup_logging(log_dir: Path, level: int = logging.INFO) -> Path:
    """Send log records of the app and the engine to ``log_dir/elmo-explorer.log`` (1 MB × 3)."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / LOG_NAME
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _AppHandler):
            root.removeHandler(h)
            h.close()
    handler = _AppHandler(path, maxBytes=1_000_000, backupCount=3, encoding="utf-8",
                          errors="backslashreplace")       # a file name that is not UTF-8
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(level)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    return path


def close_logging() -> None:
    """Flush and remove the file handler (at exit)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _AppHandler):
            root.removeHandler(h)
            h.close()


def install_excepthooks(show: Optional[Callable[[str], None]] = None) -> None:
    """Log uncaught exceptions (GUI thread and other threads) with their traceback.

    ``show`` is called with a one-line message on the GUI thread's hook (e.g. to open a dialog).
    """
    log = logging.getLogger("elmo_explorer.uncaught")

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        log.error("uncaught exception", exc_info=(exc_type, exc, tb))
        if show is not None:
            try:
                show(f"{exc_type.__name__}: {exc}")
            except Exception:
                log.exception("could not show the error")

    def thread_hook(args):
        log.error("uncaught exception in thread %s", getattr(args.thread, "name", "?"),
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

    sys.excepthook = hook
    threading.excepthook = thread_hook


def route_qt_messages():
    """Send Qt's own warnings (qWarning …) to the log instead of stderr; return the old handler."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    qt_log = logging.getLogger("qt")
    levels = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
              QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR,
              QtMsgType.QtFatalMsg: logging.CRITICAL}

    def handler(kind, _context, message):
        level = levels.get(kind, logging.WARNING)
        if any(m in message for m in _HARMLESS):
            level = logging.DEBUG
        qt_log.log(level, "%s", message)

    return qInstallMessageHandler(handler)
