"""The published models on this computer: where they go, getting, checking and removing them.

Models live in ``<data>/models/<name>/`` under the user's data folder (``platformdirs``;
``ELMO_EXPLORER_DATA`` overrides it), with the files under their published names, so the folder
is an ordinary published-layout checkpoint (``options.json`` + weights ``.hdf5``), plus
``manifest.json``: each file's size and SHA-256 as recorded when it was downloaded. A download
is staged in ``<data>/models/.incoming/<name>/`` (``*.part`` files, resumed by the next run) and
moves into place only when every file arrived and the checkpoint loads: where a model is
expected there is either the whole model or nothing. Opening a model by name checks each file's
size against the manifest; :func:`verify_model` also checks the hashes.

This is the engine API of ``elmo-explorer models`` and of the app's download dialog: every
function is Qt-free, reports through a :class:`~elmo_engine.progress.TransferState` and stops on
its ``cancel()``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

from elmo_engine.atomic import atomic_write_text
from elmo_engine.errors import CheckpointError, InputError
from elmo_engine.io.catalogue import CatalogueFile, PublishedModel, base_url, load_catalogue
from elmo_engine.io.download import DownloadError, fetch_any, make_opener
from elmo_engine.progress import TransferState, check

DATA_ENV = "ELMO_EXPLORER_DATA"
APP_NAME = "elmo-explorer"
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "elmo-explorer-model-manifest"
_MAX_MANIFEST = 1 << 20
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


# ---- places ------------------------------------------------------------------------------------
def data_dir() -> Path:
    """``ELMO_EXPLORER_DATA``, else the platform's user data folder for the app."""
    env = os.environ.get(DATA_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    return data_dir() / "models"


def model_dir(name: str) -> Path:
    return models_dir() / name


def staging_dir(name: str) -> Path:
    return models_dir() / ".incoming" / name


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
    """The records of ``folder/manifest.json`` by file name ({} when there is none)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return {}
    try:
        if path.stat().st_size > _MAX_MANIFEST:
            raise ValueError("larger than 1 MiB")
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != MANIFEST_FORMAT or data.get("version") != 1:
            raise ValueError(f"not a version 1 {MANIFEST_FORMAT} file")
        out = {}
        for d in data["files"]:
            rec = FileRecord(name=str(d["name"]), role=str(d["role"]), size=int(d["size"]),
                             sha256=str(d["sha256"]), url=str(d["url"]),
                             downloaded=str(d["downloaded"]))
            if Path(rec.name).name != rec.name:
                raise ValueError(f"unsafe file name {rec.name!r}")
            out[rec.name] = rec
        return out
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise CheckpointError(path, f"unreadable download manifest ({e}); remove the model "
                              "with `elmo-explorer models remove NAME` and get it again") from None


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
        size = _size(folder / f.name)
        present[f.role] = size == rec.size
        if size != rec.size:
            problem = _size_problem(folder / f.name, rec.size, size, name)
    downloaded = present.get("options", False) and present.get("weights", False)
    has_softmax = downloaded and present.get("softmax", False) and present.get("vocab", False)
    return ModelStatus(model, folder, downloaded, has_softmax, on_disk, partial, problem)


def _size(path: Path) -> Optional[int]:
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


# ---- getting -----------------------------------------------------------------------------------
def get_model(name: str, with_softmax: bool = False, state: Optional[TransferState] = None,
              *, timeout: float = 30.0, retries: int = 4, backoff_s: float = 1.0) -> ModelStatus:
    """Download a catalogue model (and its softmax) unless it is already here; return its status.

    Files already present with their recorded size are kept. Each new file is downloaded into
    the staging folder, checked (options parse, HDF5 signature, the checkpoint loads), hashed and
    recorded; then the files move into the model's folder. A failure or a cancel leaves the model
    folder as it was (the staged part files stay for a resume; ``remove_model`` deletes them).
    """
    model = load_catalogue().require(name)
    if with_softmax and model.softmax is None:
        with_softmax_names = [m.name for m in load_catalogue().models if m.softmax is not None]
        raise InputError(f"'{name}' has no published softmax; only "
                         + " and ".join(with_softmax_names) + " have one")
    folder, stage = model_dir(name), staging_dir(name)
    records = read_manifest(folder) if folder.is_dir() else {}
    todo = [f for f in model.files_for(with_softmax)
            if not (f.name in records and _size(folder / f.name) == records[f.name].size)]
    if not todo:
        return model_status(name)
    base = base_url()
    stage.mkdir(parents=True, exist_ok=True)
    try:
        with _download_lock(name):
            try:
                new = _download(todo, stage, base, state, timeout=timeout, retries=retries,
                                backoff_s=backoff_s)
                if {"options", "weights"} & {f.role for f in todo}:
                    _check_loads(model, folder, stage, new, state)
            except BaseException:
                with contextlib.suppress(OSError):
                    stage.rmdir()                # only when a failed run left nothing to resume
                raise
            _install(name, folder, stage, records, new)
    finally:
        with contextlib.suppress(OSError):
            stage.parent.rmdir()                 # .incoming, when no other download waits
    return model_status(name)


@contextlib.contextmanager
def _download_lock(name: str):
    """One download of a model at a time (the CLI and the app, two terminals): an advisory lock
    on ``.incoming/NAME.lock``, released by the system if the process dies. Without ``fcntl``
    (Windows) there is no lock."""
    try:
        import fcntl
    except ImportError:                          # pragma: no cover - Windows
        yield
        return
    path = staging_dir(name).with_name(name + ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"another download of '{name}' is running (lock {path}); wait "
                             "for it, or stop it first") from None
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(fd)


def _download(todo, stage: Path, base: str, state: Optional[TransferState],
              **kwargs) -> Dict[str, FileRecord]:
    """Fetch (or reuse, when an earlier run completed them) the staged files; check and record
    each one."""
    opener = make_opener()
    new: Dict[str, FileRecord] = {}
    for f in todo:
        check(state)
        target = stage / f.name
        url = f.urls(base)[0]
        if not target.is_file():
            part = stage / (f.name + ".part")
            url, _n = fetch_any(f.urls(base), part, state, opener=opener,
                                max_bytes=max_download_bytes(f), **kwargs)
            os.replace(part, target)
        try:
            _check_file(f, target, url)
        except (CheckpointError, DownloadError):
            target.unlink()
            raise
        new[f.name] = FileRecord(name=f.name, role=f.role, size=target.stat().st_size,
                                 sha256=sha256_file(target, state), url=url,
                                 downloaded=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return new


def max_download_bytes(f: CatalogueFile) -> int:
    """The most bytes accepted for a catalogue file: twice its (approximate) size plus 1 MiB, or
    256 MiB when its size is not known (the vocabularies: a few MB)."""
    return 2 * f.size_bytes + (1 << 20) if f.size_bytes else 256 << 20


def _check_file(f: CatalogueFile, path: Path, url: str) -> None:
    """Refuse what is obviously not the file (an error page, an empty or truncated file)."""
    size = path.stat().st_size
    if size == 0:
        raise DownloadError(f"{url}: the server sent an empty file; it was removed", url)
    with open(path, "rb") as fh:
        head = fh.read(512)
    if f.role in ("weights", "softmax") and not head.startswith(_HDF5_MAGIC):
        raise CheckpointError(path, f"downloaded from {url} but not an HDF5 file (an error page "
                              "or another file?); it was removed", expected="HDF5 signature",
                              found=repr(head[:8]))
    if f.role == "options":
        from elmo_engine.model.options import BiLMOptions

        BiLMOptions.from_file(path)             # a CheckpointError names the file and the field
    if f.role == "vocab" and (b"\0" in head or head.lstrip().lower().startswith((b"<!", b"<html",
                                                                                 b"<?xml"))):
        raise CheckpointError(path, f"downloaded from {url} but not a vocabulary (one token a "
                              "line); it was removed")


def _check_loads(model: PublishedModel, folder: Path, stage: Path, new: Dict[str, FileRecord],
                 state: Optional[TransferState] = None) -> None:
    """Load the staged options + weights as a checkpoint (an installed partner file is linked
    or copied into the staging folder for the check, then removed)."""
    from elmo_engine.model.checkpoint import load_checkpoint

    names = (model.file("options").name, model.file("weights").name)
    borrowed = []
    try:
        for n in names:
            if n not in new:
                try:
                    os.link(folder / n, stage / n)
                except OSError:
                    shutil.copyfile(folder / n, stage / n)
                borrowed.append(n)
        if state is not None:
            state.start(None, 0, "checking that the model loads")
        load_checkpoint(stage / names[1])          # seconds for the largest; not cancellable
        if state is not None:
            state.finish()
    except CheckpointError:
        for n in names:
            if n in new:
                with contextlib.suppress(OSError):
                    (stage / n).unlink()
        raise
    finally:
        for n in borrowed:
            with contextlib.suppress(OSError):
                (stage / n).unlink()


def _install(name: str, folder: Path, stage: Path, records: Dict[str, FileRecord],
             new: Dict[str, FileRecord]) -> None:
    merged = {**records, **new}
    if not folder.exists():
        write_manifest(stage, name, merged)
        for leftover in stage.glob("*.part"):
            leftover.unlink()
        os.replace(stage, folder)               # the whole model appears at once
    else:
        for n in new:
            os.replace(stage / n, folder / n)
        write_manifest(folder, name, merged)
        shutil.rmtree(stage, ignore_errors=True)


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
    """Check each downloaded file's size and SHA-256 against the manifest."""
    model = load_catalogue().require(name)
    folder = model_dir(name)
    records = read_manifest(folder)
    if not records:
        raise InputError(f"'{name}' is not downloaded; run `elmo-explorer models get {name}`")
    checks = []
    for f in model.files_for(True):
        rec = records.get(f.name)
        if rec is None:
            continue
        path = folder / f.name
        size = _size(path)
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
    """Delete a model's folder and any staged download; return the bytes freed."""
    load_catalogue().require(name)
    freed = 0
    for folder in (model_dir(name), staging_dir(name)):
        if folder.is_symlink():
            folder.unlink()
        elif folder.is_dir():
            freed += _folder_bytes(folder)
            shutil.rmtree(folder)
    return freed
