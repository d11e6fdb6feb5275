"""Writing an output whole or not at all, with one clear error: the rules every exporter shares
(vectors, the TSV projector files, reports, workspaces).

* :class:`ExportError` — a file could not be written; it names the path and a short reason
  ("the disk is full", "permission denied"), and nothing half-written is left behind;
  :class:`TargetExistsError` — the target exists and overwriting was not allowed;
* :func:`writing` — turns an ``OSError`` raised while writing into :class:`ExportError`;
* :func:`swap_in_folder` — renames a filled staging folder into place as a whole;
* :func:`refuse_existing` — refuses an existing target before any work.

Single files are written by :mod:`elmo_engine.atomic` (temporary file, fsync, rename).
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from pathlib import Path
from typing import Iterator, Optional

from elmo_engine.errors import ElmoError

_REASONS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.EROFS: "the file system is read-only", errno.ENAMETOOLONG: "the name is too long",
            errno.ENOENT: "the folder does not exist"}


class ExportError(ElmoError):
    """A file could not be written; ``path`` names it. Nothing half-written was left behind."""

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class TargetExistsError(ExportError):
    """The target exists and overwriting was not allowed (the GUI asks, then retries)."""

    def __init__(self, path):
        super().__init__(path, "already exists; choose another name or allow overwriting")


def swap_in_folder(staging: Path, target: Path, overwrite: bool) -> None:
    """Rename a filled staging folder into place as a whole; an existing ``target`` is moved
    aside first (``TargetExistsError`` without ``overwrite``) and put back if the rename fails."""
    old: Optional[Path] = None
    if target.exists():
        if not overwrite:
            raise TargetExistsError(target)
        old = target.with_name(f".{target.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        if old is not None and not target.exists():
            os.replace(old, target)                          # put the previous one back
        raise
    if old is not None:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def describe_os_error(e: OSError) -> str:
    """A short reason for a failed write: "the disk is full", "permission denied", …"""
    reason = _REASONS.get(e.errno or -1) or e.strerror or str(e)
    return f"cannot write ({reason}); nothing was written"


@contextlib.contextmanager
def writing(path) -> Iterator[None]:
    """Turn an ``OSError`` (or an h5py error wrapping one) raised in the block into ExportError."""
    try:
        yield
    except ElmoError:
        raise
    except OSError as e:
        raise ExportError(path, describe_os_error(e)) from e


def refuse_existing(path, overwrite: bool) -> None:
    if not overwrite and (Path(path).exists() or Path(path).is_symlink()):
        raise TargetExistsError(path)
