"""Writing an output whole or not at all, with one clear error: the rules every exporter shares
(vectors, the TSV projector files, reports, workspaces).

* :class:`ExportError` — a file could not be written; it names the path and a short reason
  ("the disk is full", "permission denied"), and nothing half-written is left behind;
  :class:`TargetExistsError` — the target exists and overwriting was not allowed;
* :func:`writing` — turns an ``OSError`` raised while writing into :class:`ExportError`;
* :func:`staging_folder` — a new folder beside the target to fill;
* :func:`swap_in_folder` — renames a filled staging folder into place as a whole, after
  writing its marker (:data:`MARKER`) and checking that what it replaces may be replaced;
* :func:`replace_folder_problem` — why an existing folder may not be replaced: a folder output
  (a report, a projector folder) replaces only an empty folder or one holding nothing but what
  an earlier output of the same kind wrote, as its marker lists; the whole tree is looked at,
  so a folder of models, an index or a folder of the user's is never deleted (issue 38);
* :func:`refuse_existing` — refuses an existing target before any work.

Single files are written by :mod:`elmo_engine.atomic` (temporary file, fsync, rename).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from elmo_engine.atomic import fitting_name
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


#: the file a folder output writes into its folder: its kind and the files it wrote, so that a
#: later ``--force`` recognises the folder as its own (and nothing else) before replacing it
MARKER = ".elmo-output.json"
MARKER_FORMAT = "elmo-explorer-output"
MARKER_VERSION = 1
#: the largest marker read, and the most entries of a tree looked at before refusing
MAX_MARKER_BYTES = 4 << 20
MAX_TREE_ENTRIES = 100_000


class NotReplaceableError(ExportError):
    """An existing folder holds something the output did not write; it is never replaced."""


def _tree_files(folder: Path) -> Tuple[List[str], bool]:
    """The files (and links, and anything not a folder) under ``folder``, relative, in POSIX
    form; links are not followed. The flag is True when the tree has more than
    :data:`MAX_TREE_ENTRIES` entries (the list is then cut)."""
    files: List[str] = []
    todo, seen = [folder], 0
    while todo:
        d = todo.pop()
        with os.scandir(d) as it:
            for e in it:
                seen += 1
                if seen > MAX_TREE_ENTRIES:
                    return files, True
                if e.is_dir(follow_symlinks=False):
                    todo.append(Path(e.path))
                else:
                    files.append(Path(e.path).relative_to(folder).as_posix())
    return sorted(files), False


def _marker_files(folder: Path, kind: str) -> Optional[List[str]]:
    """The files the marker of ``folder`` lists, when it is a marker of ``kind`` (else None)."""
    path = folder / MARKER
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MARKER_BYTES:
            return None
        with open(path, "rb") as fh:
            doc = json.loads(fh.read(MAX_MARKER_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(doc, dict) and doc.get("format") == MARKER_FORMAT
            and doc.get("kind") == kind and isinstance(doc.get("files"), list)
            and all(isinstance(f, str) for f in doc["files"])):
        return None
    return list(doc["files"])


def _some(names: List[str], n: int = 3) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n:,} more" if len(names) > n else "")


def replace_folder_problem(folder, kind: str) -> Optional[str]:
    """Why the existing ``folder`` may not be replaced by a folder output of ``kind`` (None: it
    may, or it does not exist).

    An output replaces its folder as a whole, so the folder must be empty (empty sub-folders
    aside) or hold only the files an earlier output of the same kind wrote, as its marker
    (:data:`MARKER`) lists; it may not be a link, the current folder, one of its parents or the
    home folder. The whole tree is looked at, not its top level."""
    folder = Path(folder)
    if not (folder.exists() or folder.is_symlink()):
        return None
    if folder.is_symlink():
        return "is a symbolic link; --force never replaces a link's target, choose a new folder"
    if not folder.is_dir():
        return "exists and is not a folder; choose a new folder"
    real = os.path.realpath(folder)
    for name, other in (("the current folder", os.getcwd()),
                        ("the home folder", os.path.expanduser("~"))):
        o = os.path.realpath(other)
        if real == o or o.startswith(real.rstrip(os.sep) + os.sep):
            return (f"is {name} or one of its parents; a {kind} replaces its folder as a whole, "
                    "choose a new folder")
    rule = (f"--force replaces only an empty folder or a {kind} folder written earlier "
            f"(with its {MARKER}); choose a new folder")
    try:
        files, cut = _tree_files(folder)
    except OSError as e:
        return f"cannot be looked through ({e.strerror or e}); {rule}"
    if cut:
        return f"holds more than {MAX_TREE_ENTRIES:,} files and folders; {rule}"
    if not files:
        return None
    own = _marker_files(folder, kind)
    if own is None:
        return f"is not a {kind} folder: it holds {_some(files)} ({len(files):,} files); {rule}"
    foreign = [f for f in files if f != MARKER and f not in set(own)]
    if foreign:
        return (f"holds {_some(foreign)}, which the {kind} there did not write; {rule}")
    return None


def write_marker(folder: Path, kind: str) -> None:
    """Write the marker of ``folder`` (an output being filled): ``kind`` and its files."""
    files, _ = _tree_files(folder)
    doc = {"format": MARKER_FORMAT, "version": MARKER_VERSION, "kind": kind,
           "files": [f for f in files if f != MARKER]}
    with open(folder / MARKER, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def check_replaceable(folder, kind: str, overwrite: bool) -> None:
    """Before any work: refuse an existing ``folder`` without ``overwrite``
    (:class:`TargetExistsError`), and one that may not be replaced even with it
    (:class:`NotReplaceableError`, :func:`replace_folder_problem`)."""
    folder = Path(folder)
    if not (folder.exists() or folder.is_symlink()):
        return
    if not overwrite:
        raise TargetExistsError(folder)
    problem = replace_folder_problem(folder, kind)
    if problem:
        raise NotReplaceableError(folder, problem)


def staging_folder(target: Path) -> Path:
    """A new empty folder beside ``target`` (``.NAME.XXXXXXXX.part``, with the mode a new
    folder gets, not ``mkdtemp``'s 0700), to fill and hand to :func:`swap_in_folder`."""
    from elmo_engine.atomic import ordinary_mode

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{fitting_name(target.name, 16)}.", suffix=".part",
                                    dir=target.parent))
    os.chmod(staging, ordinary_mode(folder=True))
    return staging


def swap_in_folder(staging: Path, target: Path, overwrite: bool, kind: str) -> None:
    """Rename a filled staging folder into place as a whole, its marker written first; an
    existing ``target`` is moved aside first (``TargetExistsError`` without ``overwrite``,
    ``NotReplaceableError`` when it holds anything but an earlier output of ``kind``) and put
    back if the rename fails."""
    write_marker(staging, kind)
    old: Optional[Path] = None
    if target.exists() or target.is_symlink():
        check_replaceable(target, kind, overwrite)
        old = target.with_name(f".{fitting_name(target.name, 48)}.old-{os.getpid()}-"
                               f"{time.monotonic_ns()}")
        os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        if old is not None and not target.exists():
            os.replace(old, target)                          # put the previous one back
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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


def keep_aside(files: List[Path], label: str) -> Path:
    """Move ``files`` (those that exist; all in one folder) into a new folder beside them,
    ``<label>.unreadable-<time>[-n]``, and return it: a file the app cannot read back (an
    autosave from a newer version, a damaged session) is kept whole, with what goes with it,
    where the next write cannot replace it. The folder is made with ``mkdir`` (never an
    existing one), so two moves in one second keep both."""
    there = [Path(f) for f in files if os.path.lexists(f)]
    parent = there[0].parent if there else Path(files[0]).parent
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        folder = parent / (f"{label}.unreadable-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            folder.mkdir()
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no free name to keep the files aside", str(parent))
    for f in there:
        os.replace(f, folder / f.name)
    return folder
