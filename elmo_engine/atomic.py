"""Atomic file writes: write to a temporary file beside the target, fsync, then rename.

A crash or an error leaves either the old file or the new one, never half of one, and never a
stray temporary file after an error. A process killed mid-write can leave a hidden
``.NAME.XXXX.SUFFIX.part`` file; :func:`cleanup_stale_parts` removes old ones. A disk that is
full (or a quota, a size limit, a read-only file system) becomes a :class:`WriteError`, which is
both an :class:`~elmo_engine.errors.ElmoError` (a clear message for the user) and an ``OSError``
(so callers that treat the write as optional keep working).
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

from elmo_engine.errors import ElmoError

if TYPE_CHECKING:                       # only for the annotation; h5py is imported lazily
    import h5py

PART_SUFFIX = ".part"
#: the longest file name most file systems take, in bytes (ext4, XFS, btrfs, APFS: 255)
NAME_MAX_BYTES = 255


def check_name_fits(path, of=None) -> None:
    """Refuse, before anything is written, a file name longer than :data:`NAME_MAX_BYTES` bytes
    that an output makes beside the one the user named (``of``): a projector TSV's
    ``X.metadata.tsv``, a workspace's arrays file. Written after the first file, it failed
    with "File name too long" and left half an output."""
    name = Path(path).name
    n = len(name.encode("utf-8", "surrogateescape"))
    if n > NAME_MAX_BYTES:
        beside = f" beside {Path(of).name!r}" if of is not None else ""
        raise ElmoError(f"{path}: the file written{beside} would have a name of {n} bytes; "
                        f"file names take at most {NAME_MAX_BYTES}: choose a shorter name")


def fitting_name(name: str, room: int) -> str:
    """``name``, or when its UTF-8 bytes would not leave ``room`` bytes of a
    :data:`NAME_MAX_BYTES` file name for what a temporary name adds around it, its start (cut
    at a character) and ``~`` and 8 hex digits of its hash: a target named with 120 ``é`` (240
    bytes) is a valid name, ``.NAME.XXXXXXXX.SUF.part`` is not. The hash keeps two long names
    that share their start apart (:func:`cleanup_stale_parts` finds a target's temporaries by
    this prefix)."""
    limit = max(10, NAME_MAX_BYTES - room)
    data = name.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return name
    digest = hashlib.sha256(data).hexdigest()[:8]
    return data[:limit - 9].decode("utf-8", "ignore") + "~" + digest


#: the most bytes a temporary name adds around its target's (shortened) name: two dots,
#: mkstemp's 8 characters, the suffix (at most :data:`_MAX_PART_SUFFIX` bytes) and ``.part``
_MAX_PART_SUFFIX = 40
_PART_ROOM = 2 + 8 + _MAX_PART_SUFFIX + len(PART_SUFFIX)


def part_prefix(name: str) -> str:
    """The start of every temporary name :func:`atomic_path` makes for a target named
    ``name`` (what :func:`cleanup_stale_parts` looks for)."""
    return f".{fitting_name(name, _PART_ROOM)}."
_DISK_FULL = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded",
              errno.EFBIG: "File too large", errno.EROFS: "Read-only file system"}


def _umask_by_setting() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: the umask when the engine was first imported (the entry points import it before any worker
#: thread starts); used only where the kernel cannot tell the current one
_UMASK_AT_IMPORT = _umask_by_setting()


def current_umask() -> int:
    """The process umask, read without changing it.

    ``os.umask`` can only be read by setting it, and a file another thread creates in between
    gets the wrong mode; so it is read from ``/proc/self/status`` (Linux), else the value at
    import is used."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK_AT_IMPORT


def ordinary_mode(folder: bool = False) -> int:
    """The mode a new ordinary file (``folder``: folder) gets under the process umask."""
    return (0o777 if folder else 0o666) & ~current_umask()


class WriteError(ElmoError, OSError):
    """A file could not be written because the disk is full (or read-only, or over a quota)."""

    def __init__(self, target, code: int, reason: str):
        super().__init__(code, reason, str(target))

    def __str__(self) -> str:
        return (f"cannot write {self.filename}: {self.strerror}; nothing was written and any "
                "earlier version of the file is unchanged")


def _disk_full(e: BaseException) -> Optional[int]:
    """The errno of a disk-full style failure (also when a library only put it in the text)."""
    if not isinstance(e, OSError) or isinstance(e, ElmoError):
        return None
    if e.errno in _DISK_FULL:
        return e.errno
    text = str(e)
    return next((code for code, words in _DISK_FULL.items() if words in text), None)


@contextlib.contextmanager
def atomic_path(target, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success it replaces ``target``.

    The caller writes the whole file to the yielded path (with any library). If the block raises,
    the temporary file is removed and the target is untouched.
    """
    target = Path(target)
    mode = _target_mode(target)
    try:                                # a read-only or missing folder: name the target
        target.parent.mkdir(parents=True, exist_ok=True)
        end = suffix or target.suffix
        if len(end.encode("utf-8", "surrogateescape")) > _MAX_PART_SUFFIX:
            end = ""
        fd, tmp = tempfile.mkstemp(prefix=part_prefix(target.name), suffix=end + PART_SUFFIX,
                                   dir=target.parent)
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(target)) from None
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp makes 0600; a saved file is an ordinary file, and a replaced one keeps its mode
    os.chmod(tmp_path, mode)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.replace(tmp_path, target)
        except OSError as e:           # name the user's path, not the temporary file
            raise OSError(e.errno, e.strerror or str(e), str(target)) from None
        _fsync_dir(target.parent)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        code = _disk_full(e)
        if code is not None:
            raise WriteError(target, code, _DISK_FULL[code]) from e
        raise


def _target_mode(target: Path) -> int:
    """The mode the new file gets: an existing file's own, else 0644. A target that is a folder
    (or another non-file) is refused before anything is written, naming the target."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return 0o644
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(target)) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file; give a file name",
                                str(target))
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "is not a regular file (a device, FIFO or socket); give a "
                      "file name", str(target))
    return stat.S_IMODE(st.st_mode)


def cleanup_stale_parts(folder, min_age_s: float = 60.0, recursive: bool = False,
                        target: Optional[str] = None) -> int:
    """Remove temporary files that a killed process left behind; return how many.

    Only hidden ``.NAME.*.part`` files (the names :func:`atomic_path` makes) older than
    ``min_age_s`` seconds are removed, so a write in progress in another process is not touched.
    ``target`` limits the cleanup to the temporary files of one file name; ``recursive`` also
    looks in sub-folders (the activation cache's fan-out folders).
    """
    folder = Path(folder)
    prefix = part_prefix(target) if target else "."
    cutoff = time.time() - min_age_s
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                if recursive:
                    removed += cleanup_stale_parts(entry.path, min_age_s, True, target)
            elif (entry.name.startswith(prefix) and entry.name.endswith(PART_SUFFIX)
                  and entry.stat(follow_symlinks=False).st_mtime <= cutoff):
                os.unlink(entry.path)
                removed += 1
    return removed


@contextlib.contextmanager
def atomic_hdf5(target) -> Iterator["h5py.File"]:
    """Yield an ``h5py.File`` open for writing that replaces ``target`` when the block ends.

    The file is written through :class:`_SafeWriter`: HDF5 2.0 crashes the process (a
    segmentation fault) when a write fails inside the library and the file is then flushed or
    closed, which is what happens when the disk fills up. The writer records the first failed
    write and lets the library believe it succeeded; the failure is raised after the file is
    closed (a :class:`WriteError` for a full disk) and the temporary file is removed.
    """
    import h5py

    with atomic_path(target) as tmp:
        with open(tmp, "r+b", buffering=0) as raw:
            guard = _SafeWriter(raw)
            fh = h5py.File(guard, "w")
            try:
                yield fh
            except BaseException as e:
                with contextlib.suppress(Exception):
                    fh.close()
                if isinstance(e, Exception):
                    guard.raise_failure()            # a failed write is the real cause
                raise
            fh.close()
            guard.raise_failure()


class _SafeWriter:
    """A binary file for h5py's file-object driver that never reports a failed write.

    After the first failure nothing more is written, but positions and the file's end move as
    if it had been, so the library sees a consistent file until it is closed.
    """

    def __init__(self, raw):
        self.raw = raw
        self.error: Optional[OSError] = None
        self.end = 0                                   # the end of the file as HDF5 believes it

    def raise_failure(self) -> None:
        if self.error is not None:
            raise self.error

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        start = self.raw.tell()
        if self.error is None:
            try:
                done = 0
                while done < len(view):
                    done += self.raw.write(view[done:]) or 0
            except OSError as e:
                self.error = e
        self.raw.seek(start + len(view))
        self.end = max(self.end, start + len(view))
        return len(view)

    def readinto(self, buf) -> int:
        view = memoryview(buf).cast("B")
        start = self.raw.tell()
        done = 0
        while done < len(view):
            n = self.raw.readinto(view[done:])
            if not n:
                break
            done += n
        if done < len(view) and self.error is not None:
            # after a failed write, what HDF5 believes it wrote reads back as zeros
            want = max(done, min(len(view), self.end - start))
            view[done:want] = bytes(want - done)
            done = want
            self.raw.seek(start + done)
        return done

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = max(0, self.end - self.raw.tell())
        buf = bytearray(size)
        return bytes(buf[:self.readinto(buf)])

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 2:
            return self.raw.seek(self.end + pos)
        return self.raw.seek(pos, whence)

    def tell(self) -> int:
        return self.raw.tell()

    def truncate(self, size: Optional[int] = None) -> int:
        size = self.raw.tell() if size is None else size
        if self.error is None:
            try:
                self.raw.truncate(size)
            except OSError as e:
                self.error = e
        self.end = size
        return size

    def flush(self) -> None:
        if self.error is None:
            try:
                self.raw.flush()
            except OSError as e:
                self.error = e


def atomic_write_bytes(target, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target, text: str, encoding: str = "utf-8") -> None:
    atomic_write_bytes(target, text.encode(encoding))


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
