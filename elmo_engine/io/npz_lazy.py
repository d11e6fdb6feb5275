"""A workspace's npz of arrays, checked against the file before anything is loaded, and loaded
lazily (array by array, when first used).

At open, every member's ``.npy`` header is read (never the data) and must agree with the zip
entry that holds it: a plain numeric dtype (no objects, so nothing is unpickled), a shape whose
byte count plus the header is exactly the entry's uncompressed size, an entry compressed at most
``MAX_RATIO``:1 (deflate's own limit is about 1,032:1), at most ``MAX_MEMBERS`` members and
``MAX_TOTAL_BYTES`` in all. A header that lies about its shape is refused with a message instead
of an attempt to allocate what it declares. Reading an array later streams exactly the verified
number of bytes (``zipfile`` checks the CRC at the end).
"""
from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Dict, Iterator, Tuple

import numpy as np

from elmo_engine.errors import InputError

#: most arrays in one workspace npz
MAX_MEMBERS = 10_000
#: most bytes all arrays of one workspace may hold once loaded (2 GiB)
MAX_TOTAL_BYTES = 2 << 30
#: largest uncompressed / compressed size accepted for one member
MAX_RATIO = 1100
#: largest .npy header read
MAX_HEADER_BYTES = 10_000


class LazyArrays(Mapping):
    """Array name → ``np.ndarray``, read from the npz on first access (then kept)."""

    def __init__(self, path, entries: Dict[str, Tuple[str, tuple, np.dtype]]):
        self.path = Path(path)
        self._entries = entries            # name → (zip member, shape, dtype)
        self._loaded: Dict[str, np.ndarray] = {}

    def shape(self, key: str) -> tuple:
        """The verified shape of an array, without loading it."""
        return self._entries[key][1]

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._loaded:
            member, shape, _dtype = self._entries[key]
            self._loaded[key] = _read_member(self.path, member, key, shape)
        return self._loaded[key]

    def __contains__(self, key) -> bool:         # without loading (Mapping's would read it)
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"LazyArrays({str(self.path)!r}, {sorted(self._entries)})"


def open_npz(path) -> LazyArrays:
    """Check every member of the npz at ``path`` from its headers; return the lazy mapping.

    Raises
    ------
    FileNotFoundError : the file is missing (the caller says which key named it)
    InputError : anything else wrong, naming the file and the array
    """
    from elmo_engine.io.datasets.textio import check_regular_file

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(str(path))
    check_regular_file(path)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise InputError(f"holds {len(infos)} arrays; at most {MAX_MEMBERS} are read",
                                 path=path)
            entries: Dict[str, Tuple[str, tuple, np.dtype]] = {}
            total = 0
            for info in infos:
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                shape, dtype = _check_member(zf, info, path, key)
                total += info.file_size
                if total > MAX_TOTAL_BYTES:
                    raise InputError(f"its arrays hold more than {MAX_TOTAL_BYTES} bytes "
                                     "in all; a workspace's arrays are refused above that",
                                     path=path)
                entries[key] = (info.filename, shape, dtype)
    except InputError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
            NotImplementedError, RuntimeError) as e:
        raise InputError(f"not a readable npz archive ({_short(e)})", path=path) from None
    return LazyArrays(path, entries)


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, key: str):
    fmt = np.lib.format
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise InputError(f"array '{key}' uses an unsupported compression", path=path)
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise InputError(f"array '{key}': the archive's sizes disagree", path=path)
    if info.file_size > MAX_RATIO * max(info.compress_size, 1) + MAX_HEADER_BYTES:
        raise InputError(f"array '{key}' is compressed implausibly well ({info.file_size} bytes "
                         f"from {info.compress_size}); refused as a decompression bomb",
                         path=path)
    with zf.open(info) as fp:
        try:
            version = fmt.read_magic(fp)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(fp, max_header_size=MAX_HEADER_BYTES)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = fmt.read_array_header_2_0(fp, max_header_size=MAX_HEADER_BYTES)
            else:
                raise ValueError(f"unknown .npy version {version}")
        except ValueError as e:
            raise InputError(f"array '{key}' has no valid .npy header ({_short(e)})",
                             path=path) from None
        header_len = fp.tell()
    if dtype.hasobject or dtype.kind not in "biufc":
        raise InputError(f"array '{key}' has dtype {dtype}; only numeric arrays are loaded",
                         path=path)
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise InputError(f"array '{key}' declares an invalid shape {shape}", path=path)
    count = 1
    for n in shape:
        count *= n
    declared = count * dtype.itemsize
    if header_len + declared != info.file_size:
        raise InputError(f"array '{key}' declares shape {_cut(shape)} ({declared} bytes) but the "
                         f"archive holds {max(info.file_size - header_len, 0)} bytes of data",
                         path=path)
    return tuple(shape), dtype


def _read_member(path: Path, member: str, key: str, shape: tuple) -> np.ndarray:
    try:
        with zipfile.ZipFile(path) as zf, zf.open(member) as fp:
            arr = np.lib.format.read_array(fp, allow_pickle=False,
                                           max_header_size=MAX_HEADER_BYTES)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, RuntimeError) as e:
        raise InputError(f"cannot read array '{key}' ({_short(e)})", path=path) from None
    if tuple(arr.shape) != tuple(shape):        # the file changed since it was checked
        raise InputError(f"array '{key}' changed on disk since the workspace was opened",
                         path=path)
    return arr


def _cut(v, limit: int = 80) -> str:
    text = str(v)
    return text if len(text) <= limit else text[:limit] + "…"


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:200]
