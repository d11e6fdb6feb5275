"""Getting a published model: download, check, record and install it (the ``models get`` of
:mod:`elmo_engine.io.model_store`).

Each missing file is fetched into ``<data>/models/.incoming/<name>/`` (:func:`elmo_engine.io.
download.fetch`: resumable, bounded, proxies from the environment), checked (not empty, the HDF5
signature, the options parse, the vocabulary is text, the checkpoint loads with the bounded
link-free reader of :mod:`elmo_engine.model.checkpoint`), hashed (SHA-256) and recorded in the
manifest; then the files move into ``<data>/models/<name>/``, a new model's folder in one rename.
A failure or a cancel leaves the model folder as it was.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Dict, Optional

from elmo_engine.errors import CheckpointError, InputError
from elmo_engine.io.catalogue import (MIRROR_ENV, CatalogueFile, PublishedModel, base_url,
                                      load_catalogue)
from elmo_engine.io.download import Deadlines, DownloadError, fetch_any, make_opener
from elmo_engine.io.model_store import (FileRecord, ModelStatus, download_lock, model_dir,
                                        model_status,
                                        file_size, read_manifest, sha256_file, staging_dir,
                                        write_manifest)
from elmo_engine.progress import TransferState, check

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def get_model(name: str, with_softmax: bool = False, state: Optional[TransferState] = None,
              *, deadlines: Optional[Deadlines] = None, retries: int = 4,
              backoff_s: float = 1.0) -> ModelStatus:
    """Download a catalogue model (and its softmax) unless it is already here; return its status.

    Files already present with their recorded size are kept. Each new file is downloaded into
    the staging folder, checked (options parse, HDF5 signature, the checkpoint loads), hashed and
    recorded; then the files move into the model's folder. A failure or a cancel leaves the model
    folder as it was (the staged part files stay for a resume; ``remove_model`` deletes them).
    ``deadlines`` bound each file's transfer (:class:`~elmo_engine.io.download.Deadlines`). A
    failed transfer's :class:`DownloadError` ends with what the user can do instead (a mirror,
    the files downloaded by hand).
    """
    model = load_catalogue().require(name)
    if with_softmax and model.softmax is None:
        with_softmax_names = [m.name for m in load_catalogue().models if m.softmax is not None]
        raise InputError(f"'{name}' has no published softmax; only "
                         + " and ".join(with_softmax_names) + " have one")
    folder, stage = model_dir(name), staging_dir(name)
    records = read_manifest(folder) if folder.is_dir() else {}
    todo = [f for f in model.files_for(with_softmax)
            if not (f.name in records and file_size(folder / f.name) == records[f.name].size)]
    if not todo:
        return model_status(name)
    base = base_url()
    stage.mkdir(parents=True, exist_ok=True)
    try:
        # one download of a model at a time (the CLI and the app, two terminals)
        with download_lock(name, f"another download of '{name}' is running (lock {{path}}); "
                                 "wait for it, or stop it first"):
            try:
                new = _download(todo, stage, base, state, deadlines=deadlines,
                                retries=retries, backoff_s=backoff_s)
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
            try:
                url, _n = fetch_any(f.urls(base), part, state, opener=opener,
                                    max_bytes=max_download_bytes(f), **kwargs)
            except DownloadError as e:
                raise DownloadError(f"{e}{what_else()}", e.url, e.status) from None
            os.replace(part, target)
        try:
            _check_file(f, target, url)
        except DownloadError:
            target.unlink()
            raise
        except CheckpointError as e:
            target.unlink()
            text = str(e).removeprefix(f"{target}: ")
            if "it was removed" in text:
                raise
            raise CheckpointError(target, f"{text} (downloaded from {url}; it was "
                                  "removed)") from None
        new[f.name] = FileRecord(name=f.name, role=f.role, size=target.stat().st_size,
                                 sha256=sha256_file(target, state), url=url,
                                 downloaded=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return new


def what_else() -> str:
    """The end of a failed download's line: the other ways to get the model."""
    return (f"; or set {MIRROR_ENV} to a mirror that has the files, or download them by hand "
            "into a folder and open it with --checkpoint FOLDER")


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
