"""The published models on this computer: where they go, getting, checking and removing them.

Models live in ``<data>/models/<name>/`` under the user's data folder (``platformdirs``;
``ELMO_EXPLORER_DATA`` overrides it), with the files under their published names, so the folder
is an ordinary published-layout checkpoint (``options.json`` + weights ``.hdf5``), plus
``manifest.json``: each file's size and SHA-256 as recorded when it was downloaded. A download
is staged in ``<data>/models/.incoming/<name>/`` (``*.part`` files, resumed by the next run) and
moves into place only when every file arrived and the checkpoint loads: where a model is
expected there is either the whole model or nothing. Opening a model by name checks each file's
size against the manifest; :func:`verify_model` also checks the hashes.

This is the engine API of ``elmo-explorer models`` and of the app's download dialog, with
:func:`elmo_engine.io.model_get.get_model`: every function is Qt-free, reports through a
:class:`~elmo_engine.progress.TransferState` and stops on its ``cancel()``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

from elmo_engine.atomic import atomic_write_text
from elmo_engine.errors import CheckpointError, InputError
from elmo_engine.files import name_problem, parse_json_strict, read_bounded
from elmo_engine.io.catalogue import PublishedModel, load_catalogue
from elmo_engine.progress import TransferState

DATA_ENV = "ELMO_EXPLORER_DATA"
APP_NAME = "elmo-explorer"
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "elmo-explorer-model-manifest"
_MAX_MANIFEST = 1 << 20


# ---- places ------------------------------------------------------------------------------------
def data_dir() -> Path:
    """``ELMO_EXPLORER_DATA``, else the platform's user data folder for the app. A variable
    naming a folder whose bytes are not UTF-8 is refused (:func:`~elmo_engine.files.
    name_problem`), as such a name is on the command line."""
    env = os.environ.get(DATA_ENV, "").strip()
    if env:
        problem = name_problem(env, f"{DATA_ENV}'s folder name")
        if problem:
            raise InputError(problem)
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    return data_dir() / "models"


def model_dir(name: str) -> Path:
    return models_dir() / name


def staging_dir(name: str) -> Path:
    return models_dir() / ".incoming" / name


def lock_path(name: str) -> Path:
    """The download lock of ``name`` (``.incoming/NAME.lock``): held by a running ``models get``
    (:func:`elmo_engine.io.model_get.get_model`), taken by :func:`remove_model` too."""
    return staging_dir(name).with_name(name + ".lock")


@contextlib.contextmanager
def download_lock(name: str, busy: str):
    """Hold ``name``'s download lock (an advisory ``flock`` on :func:`lock_path`, released by the
    system if the process dies) for the block, or raise :class:`InputError` ``busy`` (``{path}``
    filled in) when another process holds it. Without ``fcntl`` (Windows) there is no lock.
    Taken by ``models get`` (:func:`elmo_engine.io.model_get.get_model`) and, through
    :func:`held_if_free`, by :func:`remove_model`."""
    try:
        import fcntl
    except ImportError:                          # pragma: no cover - Windows
        yield
        return
    path = lock_path(name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(busy.format(path=path)) from None
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(fd)


@contextlib.contextmanager
def held_if_free(name: str):
    """Hold ``name``'s download lock for the block (:func:`download_lock`), or raise
    :class:`InputError` when a download of it runs. No ``.incoming`` folder, or one that cannot
    be written: no download can run, nothing to hold."""
    path = lock_path(name)
    if not path.parent.is_dir():                 # no .incoming: no download runs
        yield
        return
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(download_lock(
                name, f"'{name}' is being downloaded (lock {{path}}); wait for the download "
                      "to finish or stop it, then remove it"))
        except OSError:                          # a read-only folder: nothing can download
            pass
        yield


# ---- the manifest ------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileRecord:
    """A file as it was downloaded."""

    name: str
    role: str
    size: int
    sha256: str
    url: str
    downloaded: str                     # UTC, ISO 8601


def read_manifest(folder: Path) -> Dict[str, FileRecord]:
    """The records of ``folder/manifest.json`` by file name ({} when there is none).

    The file is read only when it is a regular file of at most 1 MiB, parsed as strict JSON and
    each record checked field by field (strings, a non-negative integer size, a 64-digit
    SHA-256, a plain file name)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.exists():
        return {}
    try:
        data = parse_json_strict(read_bounded(path, _MAX_MANIFEST))
        if (not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT
                or data.get("version") != 1 or not isinstance(data.get("files"), list)):
            raise ValueError(f"not a version 1 {MANIFEST_FORMAT} file")
        out = {}
        for d in data["files"]:
            rec = _record(d)
            out[rec.name] = rec
        return out
    except (OSError, ValueError) as e:
        raise CheckpointError(path, f"unreadable download manifest ({e}); remove the model "
                              "with `elmo-explorer models remove NAME` and get it again") from None


def _record(d: object) -> FileRecord:
    """One file's record, every field checked (``ValueError`` says which)."""
    if not isinstance(d, dict):
        raise ValueError("a file record is not an object")
    text = {}
    for key in ("name", "role", "sha256", "url", "downloaded"):
        v = d.get(key)
        if not isinstance(v, str) or len(v) > 4096:
            raise ValueError(f"a file record's {key!r} is not a string")
        text[key] = v
    size = d.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 1 << 50:
        raise ValueError(f"the size of {text['name']!r} is not a byte count")
    if not re.fullmatch(r"[0-9a-f]{64}", text["sha256"]):
        raise ValueError(f"the SHA-256 of {text['name']!r} is not 64 hexadecimal digits")
    if not text["name"] or Path(text["name"]).name != text["name"] or text["name"] in (".", ".."):
        raise ValueError(f"unsafe file name {text['name']!r}")
    return FileRecord(name=text["name"], role=text["role"], size=size, sha256=text["sha256"],
                      url=text["url"], downloaded=text["downloaded"])


def write_manifest(folder: Path, model: str, records: Dict[str, FileRecord]) -> None:
    data = {"format": MANIFEST_FORMAT, "version": 1, "model": model,
            "files": [vars(r) for r in sorted(records.values(), key=lambda r: r.name)]}
    atomic_write_text(Path(folder) / MANIFEST_NAME, json.dumps(data, indent=2) + "\n")


# ---- status ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelStatus:
    """What is on disk of one catalogue model."""

    model: PublishedModel
    folder: Path
    downloaded: bool                    # options + weights present with their recorded sizes
    has_softmax: bool                   # softmax + vocabulary too
    bytes_on_disk: int
    partial_bytes: int                  # an interrupted download waiting to be resumed
    problem: Optional[str]              # why a model that is there cannot be used, if so


@dataclass(frozen=True)
class StoreListing:
    """The catalogue with what is on disk, where it is stored and the free space there."""

    folder: Path
    free_bytes: Optional[int]
    models: Tuple[ModelStatus, ...]


def list_models() -> StoreListing:
    folder = models_dir()
    return StoreListing(folder=folder, free_bytes=free_bytes(folder),
                        models=tuple(model_status(m.name) for m in load_catalogue().models))


def free_bytes(folder: Path) -> Optional[int]:
    """Free space on the disk that holds (or will hold) ``folder``."""
    p = Path(folder)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def model_status(name: str) -> ModelStatus:
    model = load_catalogue().require(name)
    folder = model_dir(name)
    partial = _folder_bytes(staging_dir(name))
    on_disk = _folder_bytes(folder)
    try:
        records = read_manifest(folder)
    except CheckpointError as e:
        return ModelStatus(model, folder, False, False, on_disk, partial, str(e))
    problem = None
    present = {}
    for f in model.files_for(True):
        rec = records.get(f.name)
        if rec is None:
            present[f.role] = False
            continue
        size = file_size(folder / f.name)
        present[f.role] = size == rec.size
        if size != rec.size and f.role in ("options", "weights"):
            # a damaged softmax only makes has_softmax false (embedding does not need it)
            problem = _size_problem(folder / f.name, rec.size, size, name)
    downloaded = present.get("options", False) and present.get("weights", False)
    has_softmax = downloaded and present.get("softmax", False) and present.get("vocab", False)
    return ModelStatus(model, folder, downloaded, has_softmax, on_disk, partial, problem)


def file_size(path: Path) -> Optional[int]:
    """The size of a regular file, ``None`` when it is missing or unreadable."""
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def _size_problem(path: Path, recorded: int, found: Optional[int], name: str) -> str:
    what = "is missing" if found is None else f"has {found} bytes, {recorded} at download"
    return (f"{path} {what}: it changed or is damaged; run `elmo-explorer models verify {name}`, "
            f"then `elmo-explorer models remove {name}` and `elmo-explorer models get {name}`")


def _folder_bytes(folder: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


# ---- opening by name ---------------------------------------------------------------------------
def model_path(name: str) -> Path:
    """The folder of a downloaded model, after checking every file's size against the manifest.

    A catalogue name that is not downloaded (or is damaged) is an error saying what to run.
    """
    status = model_status(name)
    if status.problem is not None:
        raise CheckpointError(status.folder, status.problem)
    if not status.downloaded:
        raise InputError(f"'{name}' is a published model that is not downloaded yet; run "
                         f"`elmo-explorer models get {name}`")
    return status.folder


def resolve_checkpoint_argument(arg: Union[str, Path, None]) -> Optional[Path]:
    """A ``--checkpoint`` value as a path: an existing path stays itself; a catalogue name
    (``small``, ``original``, …) becomes its downloaded folder (:func:`model_path`)."""
    if arg is None:
        return None
    path = Path(arg)
    text = str(arg)
    if path.exists() or "/" in text or os.sep in text:
        return path
    if load_catalogue().get(text) is None:
        return path
    return model_path(text)


def sha256_file(path: Path, state: Optional[TransferState] = None) -> str:
    h = hashlib.sha256()
    if state is not None:
        state.start(path.stat().st_size, 0, f"checking {path.name}")
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
            if state is not None:
                state.advance(len(chunk))
    if state is not None:
        state.finish()
    return h.hexdigest()


# ---- verifying and removing --------------------------------------------------------------------
@dataclass(frozen=True)
class FileCheck:
    name: str
    ok: bool
    problem: Optional[str]


@dataclass(frozen=True)
class VerifyReport:
    model: str
    folder: Path
    checks: Tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def verify_model(name: str, state: Optional[TransferState] = None) -> VerifyReport:
    """Check each downloaded file's size and SHA-256 against the manifest. The options and the
    weights must have a record: one missing is a failed check (there is nothing to compare the
    file with), not a pass."""
    model = load_catalogue().require(name)
    folder = model_dir(name)
    records = read_manifest(folder)
    if not records:
        raise InputError(f"'{name}' is not downloaded; run `elmo-explorer models get {name}`")
    checks = []
    for f in model.files_for(True):
        rec = records.get(f.name)
        if rec is None:
            if f.role in ("options", "weights"):     # nothing to check this file against
                checks.append(FileCheck(f.name, False, (
                    f"{folder / MANIFEST_NAME} has no record of {f.name}, so it cannot be "
                    f"checked; run `elmo-explorer models remove {name}` and `elmo-explorer "
                    f"models get {name}`")))
            continue
        path = folder / f.name
        size = file_size(path)
        if size != rec.size:
            checks.append(FileCheck(f.name, False, _size_problem(path, rec.size, size, name)))
            continue
        digest = sha256_file(path, state)
        if digest != rec.sha256:
            checks.append(FileCheck(f.name, False, (
                f"{path}: SHA-256 {digest[:16]}… differs from {rec.sha256[:16]}… recorded at "
                f"download (the file is damaged); run `elmo-explorer models remove {name}` and "
                f"`elmo-explorer models get {name}`")))
        else:
            checks.append(FileCheck(f.name, True, None))
    return VerifyReport(name, folder, tuple(checks))


def remove_model(name: str) -> int:
    """Delete a model's folder and any staged download; return the bytes freed. A running
    download of it is never disturbed: its lock is taken first (:func:`held_if_free`; an
    :class:`InputError` saying the model is being downloaded otherwise)."""
    load_catalogue().require(name)
    freed = 0
    with held_if_free(name):
        for folder in (model_dir(name), staging_dir(name)):
            if folder.is_symlink():
                folder.unlink()
            elif folder.is_dir():
                freed += _folder_bytes(folder)
                shutil.rmtree(folder)
    with contextlib.suppress(OSError):
        staging_dir(name).parent.rmdir()         # .incoming, when nothing else is staged
    return freed
