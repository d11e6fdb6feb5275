"""The embedder's caches: token-layer vectors per word type, activations per sentence.

Both are least-recently-used caches (:class:`cachetools.LRUCache`) bounded by a number of
entries. Sentence activations can also be kept on disk: one ``.npy`` file per sentence under a
folder named for the checkpoint's hash and the precision, written atomically, read with
``allow_pickle=False``; a damaged or mismatched entry is dropped and recomputed.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Callable, Optional, Tuple

import numpy as np
from cachetools import LRUCache

from elmo_engine.atomic import atomic_path, cleanup_stale_parts

log = logging.getLogger(__name__)

Key = Tuple[str, ...]


def lru(maxsize: int) -> LRUCache:
    """An LRU cache of at most ``maxsize`` entries (at least one)."""
    return LRUCache(maxsize=max(1, int(maxsize)))


def resized(cache: LRUCache, maxsize: int, convert: Callable = lambda v: v) -> LRUCache:
    """A new LRU cache of ``maxsize`` entries holding ``cache``'s entries (``convert``-ed) in the
    same least-recently-used order; the most recent ones stay when it is smaller. Empties
    ``cache``."""
    new = lru(maxsize)
    while cache:
        key, value = cache.popitem()                   # least recently used first
        new[key] = convert(value)
    return new


class SentenceCache:
    """Activations per tokenized sentence: in memory (LRU) and optionally on disk.

    Parameters
    ----------
    size : sentences kept in memory (0: none)
    folder : the on-disk cache of this checkpoint and precision, or None
    shape : the expected array shape of a sentence of n tokens (entries that differ are dropped)
    warn : called with a message when the disk cache cannot be written (it is then turned off)
    """

    def __init__(self, size: int, folder: Optional[Path], shape: Callable[[int], tuple],
                 warn: Callable[[str], None]):
        self._size = int(size)
        self._mem = lru(self._size)
        self.folder = folder
        self._shape = shape
        self._warn = warn
        if folder is not None:                   # temporary files of a killed earlier run
            cleanup_stale_parts(folder, recursive=True)

    @property
    def size(self) -> int:
        return self._size

    @size.setter
    def size(self, size: int) -> None:
        self._size = int(size)
        self._mem = resized(self._mem, self._size)
        if self._size <= 0:
            self._mem.clear()

    def get(self, key: Key) -> Optional[np.ndarray]:
        """The cached activations of ``key`` (memory first, then disk), or None."""
        arr = self._mem.get(key)
        if arr is not None:
            return arr
        if self.folder is not None:
            arr = self._disk_get(key)
            if arr is not None:
                self._mem_put(key, arr)
                return arr
        return None

    def put(self, key: Key, arr: np.ndarray) -> None:
        arr.setflags(write=False)
        self._mem_put(key, arr)
        if self.folder is not None:
            self._disk_put(key, arr)

    def clear(self) -> None:
        """Forget the sentences kept in memory (the disk cache stays)."""
        self._mem.clear()

    def _mem_put(self, key: Key, arr: np.ndarray) -> None:
        if self._size > 0:
            self._mem[key] = arr

    def disk_file(self, key: Key) -> Path:
        if self.folder is None:
            raise ValueError("this cache has no folder")
        digest = hashlib.sha256("\x1f".join(key).encode("utf-8", "surrogatepass")).hexdigest()
        return self.folder / digest[:2] / f"{digest}.npy"

    def _disk_get(self, key: Key) -> Optional[np.ndarray]:
        f = self.disk_file(key)
        if not f.is_file():
            return None
        try:
            arr = np.load(f, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            f.unlink(missing_ok=True)          # a damaged entry is dropped and recomputed
            return None
        if arr.shape != self._shape(len(key)) or arr.dtype != np.float32:
            f.unlink(missing_ok=True)
            return None
        return arr

    def _disk_put(self, key: Key, arr: np.ndarray) -> None:
        f = self.disk_file(key)
        try:
            with atomic_path(f) as tmp:
                with open(tmp, "wb") as fh:
                    np.save(fh, arr, allow_pickle=False)
        except OSError as e:                    # disk full / read-only: the cache is optional
            self._warn(f"could not write the activation cache in {self.folder}: {e}")
            self.folder = None
