"""Persistent settings (QSettings, INI format) and the app's data folder.

Every value is read with an explicit type. ``ELMO_EXPLORER_SETTINGS_DIR`` (or ``--settings-dir``)
puts the settings file and the data folder (logs) in one place: tests use a temporary folder so
that they never touch the user's settings.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

ORG = "ELMoExplorer"
APP = "elmo-explorer"
ENV_DIR = "ELMO_EXPLORER_SETTINGS_DIR"
MAX_RECENT = 8
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "fp16", "bf16")


class AppSettings:
    """Typed access to the app's QSettings.

    Parameters
    ----------
    folder : where to keep ``elmo-explorer.ini`` and the data folder; default: the
        ``ELMO_EXPLORER_SETTINGS_DIR`` environment variable, else the user's standard locations
    """

    def __init__(self, folder: Optional[Path] = None):
        if folder is None and os.environ.get(ENV_DIR):
            folder = Path(os.environ[ENV_DIR])
        self.folder = Path(folder) if folder is not None else None
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.qs = QSettings(str(self.folder / f"{APP}.ini"), QSettings.Format.IniFormat)
        else:
            self.qs = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORG, APP)

    # ---- folders --------------------------------------------------------------------------
    def data_dir(self) -> Path:
        """Folder for logs and the last session's sentences (created on demand)."""
        if self.folder is not None:
            d = self.folder / "data"
        else:
            base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
            d = Path(base or Path.home() / ".local" / "share") / APP
        d.mkdir(parents=True, exist_ok=True)
        return d

    def log_dir(self) -> Path:
        d = self.data_dir() / "logs"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def session_sentences_path(self) -> Path:
        return self.data_dir() / "last_sentences.txt"

    # ---- typed values ---------------------------------------------------------------------
    def _str(self, key: str, default: str = "") -> str:
        v = self.qs.value(key, default, type=str)
        return v if isinstance(v, str) else default

    @property
    def device(self) -> str:
        v = self._str("model/device", "auto")
        return v if v in DEVICES else "auto"

    @device.setter
    def device(self, value: str) -> None:
        if value not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}")
        self.qs.setValue("model/device", value)

    @property
    def precision(self) -> str:
        v = self._str("model/precision", "fp32")
        return v if v in PRECISIONS else "fp32"

    @precision.setter
    def precision(self, value: str) -> None:
        if value not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}")
        self.qs.setValue("model/precision", value)

    @property
    def last_checkpoint(self) -> str:
        return self._str("model/last_checkpoint", "")

    @last_checkpoint.setter
    def last_checkpoint(self, value: str) -> None:
        self.qs.setValue("model/last_checkpoint", str(value))

    @property
    def last_dir(self) -> str:
        return self._str("files/last_dir", "")

    @last_dir.setter
    def last_dir(self, value: str) -> None:
        self.qs.setValue("files/last_dir", str(value))

    @property
    def first_launch(self) -> bool:
        return not bool(self.qs.value("app/launched", False, type=bool))

    def mark_launched(self) -> None:
        self.qs.setValue("app/launched", True)

    def recent_checkpoints(self) -> List[str]:
        v = self.qs.value("model/recent", [], type=list)
        return [str(x) for x in (v or []) if str(x)][:MAX_RECENT]

    def add_recent_checkpoint(self, path: str) -> List[str]:
        items = [p for p in self.recent_checkpoints() if p != str(path)]
        items.insert(0, str(path))
        items = items[:MAX_RECENT]
        self.qs.setValue("model/recent", items)
        return items

    def clear_recent_checkpoints(self) -> None:
        self.qs.setValue("model/recent", [])

    def geometry(self) -> QByteArray:
        v = self.qs.value("window/geometry", QByteArray(), type=QByteArray)
        return v if isinstance(v, QByteArray) else QByteArray()

    def window_state(self) -> QByteArray:
        v = self.qs.value("window/state", QByteArray(), type=QByteArray)
        return v if isinstance(v, QByteArray) else QByteArray()

    def save_window(self, geometry: QByteArray, state: QByteArray) -> None:
        self.qs.setValue("window/geometry", geometry)
        self.qs.setValue("window/state", state)

    def sync(self) -> None:
        self.qs.sync()
