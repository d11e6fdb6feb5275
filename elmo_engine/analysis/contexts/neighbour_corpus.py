"""Building contextual-neighbour indexes: reference corpora, vocabularies, the index cache.

A reference text is a file of sentences (plain or gzip), read by :func:`read_corpus` as
``contexts --reference`` and the Contexts view both read it: typed text tokenized or
``pretokenized``, each line cut into sentences unless told not to. :func:`build_index` embeds a
corpus with an :class:`~elmo_engine.embed.embedder.Embedder` (with progress and cancel), indexes
its contextual layers and its word types (plus an optional vocabulary) and records the corpus
mean per layer (the anisotropy reference). :class:`IndexCache` keeps built indexes in memory
(bounded by count and bytes) and optionally on disk as npz (never pickled), keyed by the
checkpoint checksum, the corpus tokens and the vocabulary.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
from cachetools import LRUCache

from elmo_engine.analysis.contexts.compare import reference_mean
from elmo_engine.io.datasets.textio import iter_lines
from elmo_engine.errors import InputError
from elmo_engine.analysis.contexts.neighbours import NeighbourIndex, WordIndex
from elmo_engine.progress import TaskState, check, report

log = logging.getLogger(__name__)

SPECIAL_TOKENS = {"<S>", "</S>", "<UNK>", "<s>", "</s>", "<unk>"}
MAX_CORPUS_TOKENS = 1_000_000
MAX_VOCABULARY = 200_000


@dataclass(frozen=True)
class ReferenceText:
    """The sentences of a reference text and the blank lines skipped, said as every command
    says them ("" for none)."""

    path: Path
    sentences: List[List[str]]
    blank_note: str = ""


def read_corpus(path, pretokenized: bool = False, split_sentences: bool = True,
                max_tokens: int = MAX_CORPUS_TOKENS) -> ReferenceText:
    """A reference text: one sentence per line, or a paragraph that ``split_sentences`` cuts
    into sentences (the trainer's splitter, :func:`~elmo_engine.io.datasets.corpus_text.
    split_sentences`: ``--split-sentences``, the default), typed text tokenized or
    ``pretokenized`` (split on whitespace); a grouped ``group<TAB>sentence`` file gives its
    sentences; blank lines are skipped. Read by the one reader of sentence files
    (:func:`~elmo_engine.io.datasets.text_input.read_text_input`: bounded in bytes, and at
    ``max_tokens`` tokens); errors name the file and the line."""
    from elmo_engine.io.datasets.corpus_text import split_sentences as cut
    from elmo_engine.io.datasets.text_input import read_text_input

    text = read_text_input(path, pretokenized=pretokenized, max_tokens=max_tokens)
    sentences = [list(s) for s in text.tokens]
    if split_sentences:
        sentences = [piece for s in sentences for piece in cut(s)]
    return ReferenceText(Path(path), sentences, text.blank_note())


def read_vocabulary(path, limit: int = MAX_VOCABULARY) -> List[str]:
    """Word types from a vocabulary file (one per line; a count after a tab/space is ignored)."""
    words: List[str] = []
    for _, line in iter_lines(path):
        parts = line.split()
        if parts and parts[0] not in SPECIAL_TOKENS:
            words.append(parts[0])
            if len(words) >= limit:
                break
    return words


def vocabulary_file(options_path=None) -> Optional[Path]:
    """The known words of layer 0's neighbours: a ``vocab.txt`` beside the checkpoint's options
    file, else the demo model's, else None (the app and ``contexts --neighbours`` both use it)."""
    if options_path is not None:
        f = Path(options_path).parent / "vocab.txt"
        if f.is_file():
            return f
    from elmo_engine.resources import demo_checkpoint_path

    f = demo_checkpoint_path() / "vocab.txt"
    return f if f.is_file() else None


def index_key(checksum: str, tokens: Sequence[Sequence[str]],
              vocabulary: Sequence[str] = ()) -> str:
    """Cache key: the checkpoint checksum, the corpus tokens and the extra vocabulary."""
    h = hashlib.sha256(checksum.encode())
    for sent in tokens:
        h.update(b"\x1e" + "\x1f".join(sent).encode("utf-8", "surrogatepass"))
    h.update(b"\x1d")
    for w in vocabulary:
        h.update(w.encode("utf-8", "surrogatepass") + b"\x1f")
    return h.hexdigest()


def build_index(embedder, tokens: Sequence[Sequence[str]], vocabulary: Sequence[str] = (),
                state: Optional[TaskState] = None, key: str = "") -> NeighbourIndex:
    """Embed a corpus and index its contextual layers; index its types (+ vocabulary) in layer 0.

    ``embedder`` is an :class:`elmo_engine.embed.embedder.Embedder`; run this on the worker thread.
    """
    tokens = [list(s) for s in tokens]        # empty sentences stay: indices follow the corpus
    if not any(tokens):
        raise InputError("the reference corpus is empty")
    acts = embedder.embed(tokens, state=state)                     # each (L+1, n, 2P)
    check(state)
    layers = [np.concatenate([a[k] for a in acts], axis=0)         # (N, 2P)
              for k in range(1, acts[0].shape[0])]
    types = list(dict.fromkeys([t for s in tokens for t in s] + list(vocabulary)))
    vecs = []
    for start in range(0, len(types), 4096):
        check(state)
        vecs.append(embedder.token_vectors(types[start:start + 4096]))   # (chunk, P)
        report(state, min(start + 4096, len(types)), len(types), "indexing known words")
    words = WordIndex(types, np.concatenate(vecs, axis=0))
    report(state, 1, 1, "normalising the neighbour index")
    return NeighbourIndex(tokens, layers, words, key=key, mean=reference_mean(acts))


#: index files kept on disk at most, and their bytes at most (the least recently used go first)
DISK_MAX_FILES = 8
DISK_MAX_BYTES = 1 << 30
DISK_PATTERN = "neighbours-*.npz"


class IndexCache:
    """Built indexes, in memory (most recent few) and optionally on disk under ``cache_dir``
    (the app's: a launch finds the last one's index there instead of embedding the corpus
    again). On disk at most ``disk_files`` files and ``disk_bytes`` bytes of its own
    (``neighbours-*.npz``) are kept, the least recently used removed first; nothing else in the
    folder is touched."""

    def __init__(self, cache_dir=None, max_items: int = 2, max_bytes: int = 1 << 30,
                 disk_files: int = DISK_MAX_FILES, disk_bytes: int = DISK_MAX_BYTES):
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.disk_files, self.disk_bytes = disk_files, disk_bytes
        self._mem: LRUCache = LRUCache(maxsize=max(1, max_items))      # the newest always stays

    def _file(self, key: str) -> Optional[Path]:
        return None if self.cache_dir is None else self.cache_dir / f"neighbours-{key[:32]}.npz"

    def get(self, key: str) -> Optional[NeighbourIndex]:
        if key in self._mem:
            return self._mem[key]
        f = self._file(key)
        if f is not None and f.is_file():
            try:
                idx = NeighbourIndex.load(f)
            except Exception as exc:               # (the cache is optional: never a failure)
                log.warning("dropping a damaged neighbour index: %s", exc)
                with contextlib.suppress(OSError):
                    f.unlink(missing_ok=True)
                return None
            if idx.key == key:
                self._put_mem(key, idx)
                with contextlib.suppress(OSError):
                    os.utime(f)                                  # used now: evicted last
                return idx
        return None

    def _put_mem(self, key: str, idx: NeighbourIndex) -> None:
        self._mem[key] = idx
        while len(self._mem) > 1 and sum(i.nbytes for i in self._mem.values()) > self.max_bytes:
            self._mem.popitem()                          # the least recently used first

    def get_or_build(self, embedder, tokens, vocabulary: Sequence[str] = (),
                     state: Optional[TaskState] = None) -> NeighbourIndex:
        key = index_key(embedder.checksum, tokens, vocabulary)
        idx = self.get(key)
        if idx is not None:
            return idx
        idx = build_index(embedder, tokens, vocabulary, state=state, key=key)
        self._put_mem(key, idx)
        f = self._file(key)
        if f is not None:
            try:
                f.parent.mkdir(parents=True, exist_ok=True)
                idx.save(f)
                self._evict(keep=f)
            except OSError as exc:                                   # the disk cache is optional
                log.warning("could not write the neighbour index cache %s: %s", f, exc)
        return idx

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used index files beyond the disk bounds (never ``keep``,
        the one just written; only regular files of this cache's own name)."""
        assert self.cache_dir is not None
        files = []
        for p in self.cache_dir.glob(DISK_PATTERN):
            try:
                st = p.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                files.append((st.st_mtime, st.st_size, p))
        files.sort(reverse=True)                                     # newest first
        total = 0
        for n, (_, size, p) in enumerate(files):
            total += size
            if p != keep and (n >= self.disk_files or total > self.disk_bytes):
                with contextlib.suppress(OSError):
                    p.unlink()


__all__ = ["IndexCache", "ReferenceText", "build_index", "index_key", "read_corpus",
           "read_vocabulary"]
