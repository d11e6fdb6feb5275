"""Persistent settings (QSettings, INI format) and the app's data folder.

Every value is read with an explicit type. ``ELMO_EXPLORER_SETTINGS_DIR`` (or ``--settings-dir``)
puts the settings file and the data folder (logs) in one place: tests use a temporary folder so
that they never touch the user's settings.

Without them, settings and data are kept **per installation** (issue 29): under the user's
standard folders, in a subfolder named after the installation (the checkout, or the environment
the package is installed in) and a hash of its path, so that two clones of the project never
share a remembered checkpoint, session or autosave. Downloaded published models are not app data:
they stay in the engine's one shared folder (``ELMO_EXPLORER_DATA``,
:mod:`elmo_engine.io.model_store`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Callable, List, Optional, Tuple, TypeVar

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

from elmo_engine.model.tokenize import TOKENIZATIONS

log = logging.getLogger(__name__)

ORG = "ELMoExplorer"
APP = "elmo-explorer"
ENV_DIR = "ELMO_EXPLORER_SETTINGS_DIR"
MAX_RECENT = 8
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "fp16", "bf16")


#: the longest remembered JSON value read back (a view's options are a few hundred bytes)
MAX_STORED_JSON_CHARS = 1 << 20


def stored_json(qs, key: str) -> dict:
    """The JSON object a view remembered under ``key`` in ``qs`` (the app's QSettings, or
    None): ``{}`` when there is none, and when it is not one — too long, not JSON, nested too
    deep, NaN — which is logged and ignored, so that a hand-edited or damaged setting never
    stops a view (a layers value nested 10,000 deep removed the whole Layers tab)."""
    if qs is None:
        return {}
    from elmo_engine.files import parse_json_strict

    try:
        raw = qs.value(key, "", type=str) or ""
        if len(raw) > MAX_STORED_JSON_CHARS:
            raise ValueError(f"{len(raw):,} characters, over {MAX_STORED_JSON_CHARS:,}")
        doc = parse_json_strict(raw) if raw else {}
        if not isinstance(doc, dict):
            raise ValueError(f"a JSON {type(doc).__name__}, not an object")
    except (ValueError, TypeError) as e:
        log.warning("ignored the remembered setting %s: %s", key, e)
        return {}
    return doc


T = TypeVar("T")


def stored_settings(qs, key: str, parse: Callable[[dict], T]) -> T:
    """A view's remembered options: ``parse`` of :func:`stored_json`. ``parse`` keeps what is
    valid and gives the rest its default; each remembered field it did not keep as it was (out
    of range, of another type, unknown) is named in the log, so that a value dropped from a
    hand-edited or damaged setting is never dropped in silence — once: the setting is written
    back as read (the settings folder is this installation's own, so a field it drops is one
    an older version of it wrote, e.g. the Corpus options' ``k_max``)."""
    doc = stored_json(qs, key)
    value = parse(doc)
    dropped = [f"{name}={_shortened(given)}" for name, given in doc.items()
               if type(getattr(value, name, None)) is not type(given)
               or getattr(value, name) != given]
    if dropped:
        log.warning("ignored in the remembered setting %s (the default is used): %s", key,
                    ", ".join(dropped))
        to_dict = getattr(value, "to_dict", None)
        kept = to_dict() if callable(to_dict) else (
            dataclasses.asdict(value) if dataclasses.is_dataclass(value) else None)
        if kept is not None:
            qs.setValue(key, json.dumps(kept))
    return value


def _shortened(value, most: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most - 1] + "…"


def absolute_path(value) -> str:
    """``value`` made absolute against the current folder (``""`` stays ``""``), so that a
    remembered path means the same file from whatever folder the app is launched next time.
    Symbolic links are kept (not resolved): a link the user chose stays the link."""
    text = str(value)
    return os.path.abspath(text) if text else ""


def installation_root() -> Path:
    """The folder this copy of the app is installed in: the checkout for ``pip install -e``
    (the folder above ``app/``), else the ``site-packages`` folder that holds the package."""
    package = Path(__file__).resolve().parents[1]           # …/elmo_explorer
    above = package.parent                                  # app/ or site-packages/
    return above.parent if above.name == "app" else above


def installation_key(root: Optional[Path] = None) -> str:
    """A folder name for one installation: a readable slug of its name and a hash of its path
    (``elmo-explorer-3f2a9c0d1e``), stable across launches, different for every checkout."""
    root = Path(root) if root is not None else installation_root()
    name = root.name
    if name == "site-packages" and len(root.parents) > 2:
        name = root.parents[2].name                         # …/VENV/lib/pythonX.Y/site-packages
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:40] or "install"
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{slug}-{digest}"


def default_folders(root: Optional[Path] = None) -> Tuple[Path, Path]:
    """(settings folder, data folder) of an installation under the user's standard locations."""
    key = installation_key(root)
    config = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    data = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    config_dir = Path(config or Path.home() / ".config") / ORG / "installs" / key
    data_dir = Path(data or Path.home() / ".local" / "share") / APP / "installs" / key
    return config_dir, data_dir


#: what an installation's first launch takes from the settings file all installations shared
#: before issue 29: the user's choices, not the last checkpoint (that was another checkout's
#: model, the reason settings became per installation) nor the first-launch flag
CARRIED_KEYS = ("model/device", "model/precision", "model/recent", "files/last_dir",
                "window/geometry", "window/state")


def carry_shared_choices(shared_ini: Path, qs: QSettings) -> List[str]:
    """Copy :data:`CARRIED_KEYS` from the old shared settings file, if there is one, into the
    new (empty) settings ``qs``; return the keys copied. The old file is only read."""
    if not shared_ini.is_file():
        return []
    old = QSettings(str(shared_ini), QSettings.Format.IniFormat)
    copied = [key for key in CARRIED_KEYS if old.contains(key)]
    for key in copied:
        qs.setValue(key, old.value(key))
    qs.sync()
    return copied


def _settings_folder(folder: Optional[Path]) -> Optional[Path]:
    """``folder``, else the ``ELMO_EXPLORER_SETTINGS_DIR`` environment variable's, else None
    (this installation's standard folders)."""
    if folder is None and os.environ.get(ENV_DIR):
        folder = Path(os.environ[ENV_DIR])
    return Path(folder) if folder is not None else None


def settings_paths(folder: Optional[Path] = None) -> Tuple[Path, Path]:
    """(the INI file, the data folder) of :class:`AppSettings` for ``folder`` (None: the
    ``ELMO_EXPLORER_SETTINGS_DIR`` environment variable, else :func:`default_folders`), without
    creating or opening anything (the start's checks read them first)."""
    folder = _settings_folder(folder)
    if folder is not None:
        return folder / f"{APP}.ini", folder / "data"
    config_dir, data = default_folders()
    return config_dir / f"{APP}.ini", data


class AppSettings:
    """Typed access to the app's QSettings.

    Parameters
    ----------
    folder : where to keep ``elmo-explorer.ini`` and the data folder; default: the
        ``ELMO_EXPLORER_SETTINGS_DIR`` environment variable, else this installation's folders
        under the user's standard locations (:func:`default_folders`)
    """

    def __init__(self, folder: Optional[Path] = None):
        self.folder = _settings_folder(folder)
        ini, self._data = settings_paths(self.folder)
        ini.parent.mkdir(parents=True, exist_ok=True)
        fresh = self.folder is None and not ini.exists()    # an installation's first launch
        self.qs = QSettings(str(ini), QSettings.Format.IniFormat)
        if fresh:
            carry_shared_choices(ini.parent.parents[1] / f"{APP}.ini", self.qs)

    def settings_file(self) -> Path:
        """The INI file these settings live in."""
        return Path(self.qs.fileName())

    # ---- folders --------------------------------------------------------------------------
    def data_dir(self) -> Path:
        """Folder for logs and the last session's sentences (created on demand)."""
        d = self._data
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

    def _choice(self, key: str, choices: Tuple[str, ...]) -> str:
        """The stored value of ``key`` if it is one of ``choices``, else the first (default),
        saying so in the log (``model/device=cuda:99`` fell back in silence)."""
        v = self._str(key, choices[0])
        if v in choices:
            return v
        log.warning("ignored the remembered setting %s=%.80r (not one of %s); using %s", key, v,
                    ", ".join(choices), choices[0])
        return choices[0]

    def _set_choice(self, key: str, name: str, choices: Tuple[str, ...], value: str) -> None:
        if value not in choices:
            raise ValueError(f"{name} must be one of {choices}")
        self.qs.setValue(key, value)

    @property
    def device(self) -> str:
        return self._choice("model/device", DEVICES)

    @device.setter
    def device(self, value: str) -> None:
        self._set_choice("model/device", "device", DEVICES, value)

    @property
    def precision(self) -> str:
        return self._choice("model/precision", PRECISIONS)

    @precision.setter
    def precision(self, value: str) -> None:
        self._set_choice("model/precision", "precision", PRECISIONS, value)

    @property
    def tokenization(self) -> str:
        """How new sentences are split into tokens (Settings ▸ Tokenization)."""
        return self._choice("sentences/tokenization", TOKENIZATIONS)

    @tokenization.setter
    def tokenization(self, value: str) -> None:
        self._set_choice("sentences/tokenization", "tokenization", TOKENIZATIONS, value)

    @property
    def last_checkpoint(self) -> str:
        return self._str("model/last_checkpoint", "")

    @last_checkpoint.setter
    def last_checkpoint(self, value: str) -> None:
        self.qs.setValue("model/last_checkpoint", absolute_path(value))

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
        path = absolute_path(path)
        items = [p for p in self.recent_checkpoints() if p != path]
        items.insert(0, path)
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
