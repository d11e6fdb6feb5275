"""Search a corpus index by example: the occurrences nearest to a word in context, per layer.

A query is one occurrence of a word in a sentence; its vector of layer ``L`` is compared by cosine
with every indexed token of that layer. ``same_word`` limits the comparison to the occurrences of
the same word (case-folded): that search is **exact** (the rows come from the SQLite table, the
cosines from the memory-mapped float16 vectors). Over any word the per-layer HNSW graph
(:mod:`.ann`) answers approximately; the cosines it returns are recomputed from the stored vectors.
This is the "contextual nearest neighbours" of Peters et al. 2018 (§5.3, Table 4) over a whole
corpus, as exBERT (Hoover et al. 2020) searches a corpus for BERT's tokens.
"""
from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.errors import CancelledError, InputError
from elmo_engine.files import regular_file_problem
from elmo_engine.index.ann import AnnIndex, AnnSettings, ann_file
from elmo_engine.index.hits import Hit, kwic, kwic_line  # noqa: F401  (imported from here too)
from elmo_engine.io.datasets.sentence_source import SentenceSource
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS
from elmo_engine.index.store import (MANIFEST, TOKENS_DB, Manifest, load_npy, read_manifest,
                                     vectors_file)

#: the rows of recently searched words kept in memory, at most this many row numbers in all
ROWS_CACHE = 4_000_000
#: the largest HNSW settings a manifest may record (links per node, search candidates)
MAX_ANN_M = 1024
MAX_EF_SEARCH = 1 << 16


def top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` highest ``scores`` ``(N,)``, best first, ties in position
    order: the same as the first ``k`` of a stable descending sort, without sorting all N."""
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        cand = np.flatnonzero(scores >= kth)                      # every tie at the boundary too
    else:
        cand = np.arange(len(scores))
    return cand[np.lexsort((cand, -scores[cand]))][:k]


def cosines(vecs: np.ndarray, rows: np.ndarray, q: np.ndarray, block: int = 65536) -> np.ndarray:
    """``vecs[rows] @ q`` for float16 ``vecs`` ``(N, D)`` and a float32 ``q`` ``(D,)``, in
    blocks of ``block`` rows; torch widens the halves to float32 and multiplies (several times
    faster than NumPy's float16 → float32 conversion), float32 accumulation either way."""
    qt = torch.from_numpy(np.ascontiguousarray(q, np.float32))
    out = np.empty(len(rows), np.float32)
    for s in range(0, len(rows), block):
        part = torch.from_numpy(np.ascontiguousarray(vecs[rows[s:s + block]]))   # (b, D) f16
        out[s:s + block] = (part.float() @ qt).numpy()
    return out


class CorpusIndex:
    """A complete index folder, opened for reading (vectors memory-mapped, SQLite read-only)."""

    def __init__(self, folder: Path, checksum: Optional[str] = None):
        self.folder = Path(folder)
        self.manifest: Manifest = read_manifest(self.folder)
        m = self.manifest
        if not m.complete:
            raise InputError("the index is not complete; run 'elmo-explorer index' again to "
                             "resume it (or '--merge' to join its parts)", path=self.folder)
        if checksum is not None and checksum != m.checksum:
            raise InputError(f"was built with another model (checksum {m.checksum[:12]}…; the "
                             f"loaded one is {checksum[:12]}…)", path=self.folder)
        self.vectors: Dict[int, np.ndarray] = {}
        for layer in m.layers:
            self.vectors[layer] = load_npy(vectors_file(self.folder, layer),
                                           shape=(m.n_tokens, m.dim))
        self.db_path = self.folder / TOKENS_DB
        self.db = open_tokens_db(self.db_path, m)
        self._ann: Dict[int, AnnIndex] = {}
        self._rows: "OrderedDict[str, np.ndarray]" = OrderedDict()
        # the caches and the connection are shared by every thread that reads the index
        self._lock = threading.RLock()
        self._closing = False                # set by close(), from any thread
        s: Dict[str, Any] = dict(m.ann)
        try:
            self.ann_settings = AnnSettings(int(s.get("m", 32)), int(s.get("ef_construction", 128)),
                                            int(s.get("ef_search", 128)), int(s.get("threads", 1)),
                                            str(s.get("quantizer", "fp16")))
        except (TypeError, ValueError, OverflowError, InputError) as e:
            raise InputError(f"malformed 'ann' settings in the manifest ({e})",
                             path=self.folder / MANIFEST) from None
        a = self.ann_settings
        if not (2 <= a.m <= MAX_ANN_M and 1 <= a.ef_search <= MAX_EF_SEARCH):
            raise InputError(f"malformed 'ann' settings in the manifest (m {a.m}, ef_search "
                             f"{a.ef_search}; at most {MAX_ANN_M} and {MAX_EF_SEARCH})",
                             path=self.folder / MANIFEST)

    def close(self) -> None:
        """Close the token table; safe while other threads read the index (the app closes an
        index its jobs may still hold). A query running now is interrupted and it, like every
        later one, ends in :class:`CancelledError`: closing the connection under a running
        query would free what it reads. The vectors and the ANN indexes stay readable."""
        if self._closing:
            return
        self._closing = True
        # the running query stops at its next step; one that started just after an interrupt
        # (which stops only what runs) is interrupted again until the connection is free
        self.db.interrupt()
        while not self._lock.acquire(timeout=0.05):
            self.db.interrupt()
        try:
            self.db.close()
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """The token table's connection, one reader at a time; a damaged table is one error
        naming it, a closed index (or one closed under the query) :class:`CancelledError`."""
        with self._lock:
            self._check_open()
            try:
                yield self.db
            except sqlite3.Error as e:
                self._check_open()           # interrupted by close(): not a damaged table
                raise _db_error(self.db_path, e) from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> List[tuple]:
        """Every row of a query on the token table."""
        with self._connection() as db:
            return db.execute(sql, params).fetchall()

    def _check_open(self) -> None:
        if self._closing:
            raise CancelledError(f"{self.folder}: the corpus index was closed")

    def folded_between(self, lo: int, hi: int,
                       check: Callable[[], None] = lambda: None) -> Dict[int, str]:
        """The case-folded word of each row in ``lo..hi``, read in one pass; ``check()`` is
        called every 100,000 rows (a job's cancel check)."""
        folded: Dict[int, str] = {}
        with self._connection() as db:
            cur = db.execute("SELECT row, folded FROM tokens WHERE row BETWEEN ? AND ?", (lo, hi))
            for k, (r, w) in enumerate(cur):
                if k % 100_000 == 0:
                    check()
                    self._check_open()
                folded[r] = w
        return folded

    def _row_numbers(self, got: Sequence[tuple]) -> np.ndarray:
        """The first column of ``got`` as vector rows, each checked to be one."""
        if not all(type(r[0]) is int for r in got):
            raise _db_error(self.db_path, "a row number that is not a whole number")
        rows = np.fromiter((r[0] for r in got), dtype=np.int64, count=len(got))
        if len(rows) and (rows.min() < 0 or rows.max() >= self.manifest.n_tokens):
            raise _db_error(self.db_path, f"a row number outside 0..{self.manifest.n_tokens - 1}")
        return rows

    @property
    def layers(self) -> Tuple[int, ...]:
        return self.manifest.layers

    def layer(self, layer: Optional[int]) -> int:
        """``layer`` checked against the indexed ones (None: the top one indexed)."""
        if layer is None:
            return max(self.layers)
        if layer not in self.layers:
            raise InputError(f"layer {layer} is not in the index (it holds layers "
                             f"{', '.join(map(str, self.layers))})", path=self.folder)
        return layer

    def ann(self, layer: int) -> AnnIndex:
        with self._lock:
            if layer not in self._ann:
                m = self.manifest
                self._ann[layer] = AnnIndex(ann_file(self.folder, layer), m.n_tokens, m.dim,
                                            self.ann_settings)
            return self._ann[layer]

    # ---- tokens ------------------------------------------------------------------------------
    def rows_of(self, word: str) -> np.ndarray:
        """The rows of every occurrence of ``word`` (case-folded), in corpus order. The most
        recently asked words' rows are kept (at most :data:`ROWS_CACHE` row numbers)."""
        key = word.casefold()
        with self._lock:
            if key in self._rows:
                self._rows.move_to_end(key)
                return self._rows[key]
            rows = self._row_numbers(self._query(
                "SELECT row FROM tokens WHERE folded = ? ORDER BY row", (key,)))
            rows.setflags(write=False)
            self._rows[key] = rows
            while sum(len(r) for r in self._rows.values()) > ROWS_CACHE and len(self._rows) > 1:
                self._rows.popitem(last=False)
            return rows

    def sentence(self, sentence_id: int) -> List[str]:
        got = self._query("SELECT text FROM sentences WHERE id = ?", (int(sentence_id),))
        if not got:
            raise InputError(f"no sentence {sentence_id} in the index (it holds "
                             f"{self.manifest.n_sentences})", path=self.folder)
        if not isinstance(got[0][0], str):
            raise _db_error(self.db_path, f"sentence {sentence_id} is not text")
        return got[0][0].split(" ")

    def sentences(self, start: int, count: int) -> List[List[str]]:
        """Sentences ``start`` … ``start + count - 1`` (fewer past the end), in order, as
        :meth:`sentence` gives one: a reader that goes through the corpus a batch at a time."""
        got = self._query("SELECT id, text FROM sentences WHERE id >= ? AND id < ? ORDER BY id",
                          (int(start), int(start) + int(count)))
        out = []
        for i, (sid, text) in enumerate(got):
            if sid != start + i or not isinstance(text, str):
                raise _db_error(self.db_path, f"sentence {start + i} is missing or not text")
            words = text.split(" ")
            if len(words) > MAX_SENTENCE_TOKENS:        # the build cuts longer ones
                raise _db_error(self.db_path, f"sentence {sid} has {len(words):,} words (an "
                                f"index holds at most {MAX_SENTENCE_TOKENS:,})")
            out.append(words)
        return out

    def sentence_source(self) -> SentenceSource:
        """Every sentence, read a batch at a time (:meth:`sentences`)."""
        return SentenceSource(self.sentences, self.manifest.n_sentences, self.manifest.n_tokens)

    def tokens_at(self, rows: "Sequence[int] | np.ndarray") -> List[Tuple[int, int, int, str, str]]:
        """``(row, sentence_id, position, word, sentence text)`` for each row, in that order."""
        out = {}
        rows = [int(r) for r in rows]
        for start in range(0, len(rows), 500):
            chunk = rows[start:start + 500]
            q = ("SELECT t.row, t.sentence_id, t.position, t.word, s.text FROM tokens t JOIN "
                 "sentences s ON s.id = t.sentence_id WHERE t.row IN (%s)"
                 % ",".join("?" * len(chunk)))
            for rec in self._query(q, chunk):
                if not (type(rec[0]) is int and type(rec[1]) is int and type(rec[2]) is int
                        and isinstance(rec[3], str) and isinstance(rec[4], str)):
                    raise _db_error(self.db_path, f"the token of row {rec[0]!r} is malformed")
                out[rec[0]] = rec
        missing = [r for r in rows if r not in out]
        if missing:
            raise _db_error(self.db_path, f"row {missing[0]} is not in the token table")
        return [out[r] for r in rows]

    def row_of(self, sentence_id: int, position: int) -> int:
        got = self._query("SELECT row FROM tokens WHERE sentence_id = ? AND position = ?",
                         (int(sentence_id), int(position)))
        if not got:
            raise InputError(f"no token {position} in sentence {sentence_id}", path=self.folder)
        return int(self._row_numbers(got[:1])[0])

    def vocabulary_sample(self, limit: int = 50_000) -> List[str]:
        return [w for (w,) in self._query("SELECT DISTINCT word FROM tokens LIMIT ?", (limit,))
                if isinstance(w, str)]

    def absent(self, word: str) -> InputError:
        """The error for ``word`` that the index does not hold, naming the index, with a
        did-you-mean (``search`` and the Corpus view say it alike)."""
        from elmo_engine.errors import absent_word

        return absent_word(word, [self.vocabulary_sample()], "the index", path=self.folder,
                           hint="the search is case-folded")

    # ---- search ------------------------------------------------------------------------------
    def search(self, query: np.ndarray, layer: Optional[int] = None, k: int = 10,
               same_word: Optional[str] = None, exclude_row: Optional[int] = None) -> List[Hit]:
        """The ``k`` occurrences nearest to ``query`` ``(D,)`` in ``layer``, best first.

        ``same_word``: only that word's occurrences (exact search); else any token (ANN)."""
        layer = self.layer(layer)
        if k < 1:
            raise InputError("k must be at least 1")
        q = np.asarray(query, np.float32).reshape(-1)                    # (D,)
        if q.shape[0] != self.manifest.dim:
            raise InputError(f"a query of width {q.shape[0]}; the index holds width "
                             f"{self.manifest.dim}")
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        vecs = self.vectors[layer]
        extra = 1 if exclude_row is not None else 0
        if same_word is not None:
            rows = self.rows_of(same_word)
            scores = cosines(vecs, rows, q)                                   # (n,)
            top = top_rows(scores, k + extra)
            rows, scores = rows[top], scores[top]
        else:
            _, found = self.ann(layer).search(q[None], k + extra)
            rows = found[0][found[0] >= 0].astype(np.int64)
            scores = vecs[rows].astype(np.float32) @ q                      # exact cosines
            order = np.argsort(-scores, kind="stable")
            rows, scores = rows[order], scores[order]
        keep = [i for i, r in enumerate(rows) if r != exclude_row][:k]
        hits = []
        for (row, sid, pos, word, text), score in zip(self.tokens_at(rows[keep]), scores[keep]):
            hits.append(Hit(int(sid), int(pos), word, float(score), text, layer, int(row)))
        return hits

    def search_row(self, row: int, layer: Optional[int] = None, k: int = 10,
                   same_word: bool = True, include_self: bool = True) -> List[Hit]:
        """Search by an indexed token (the app's "select any token in the corpus")."""
        layer = self.layer(layer)
        if not 0 <= int(row) < self.manifest.n_tokens:
            raise InputError(f"no row {row} in the index (it holds {self.manifest.n_tokens})",
                             path=self.folder)
        (_, _, _, word, _), = self.tokens_at([row])
        return self.search(self.vectors[layer][row], layer, k, word if same_word else None,
                           None if include_self else row)


#: the token table's columns, as :func:`.build.write_tokens_db` creates them
TOKEN_TABLES = {"sentences": ("id", "first_row", "n_tokens", "text"),
                "tokens": ("row", "sentence_id", "position", "word", "folded")}
#: the most bytes a token table may take per token (the word twice, the sentence's text, the
#: indexes on both), plus a fixed allowance
DB_BYTES_PER_TOKEN = 4096
DB_BYTES_BASE = 64 << 20


@contextlib.contextmanager
def open_sentences(folder) -> Iterator[SentenceSource]:
    """The corpus index in ``folder`` opened (any model's: only its sentences are read) and
    closed after, its sentences read a batch at a time (``units top/pattern --index``, the Units
    view). InputError for a folder that is not a complete index."""
    index = CorpusIndex(Path(folder))
    try:
        yield index.sentence_source()
    finally:
        index.close()


def _db_error(path: Path, why: object) -> InputError:
    return InputError(f"not this index's token table, or damaged ({why}); rebuild the index "
                      "with 'elmo-explorer index … --force'", path=path)


def open_tokens_db(path: Path, m: Manifest) -> sqlite3.Connection:
    """``tokens.sqlite`` opened read-only after the checks that make every later query safe:
    a regular file of a size such a table can have; the two tables with their columns; rows
    ``0..n_tokens-1`` and sentences ``0..n_sentences-1`` (their first and last, by key)."""
    if not path.exists():
        raise InputError("the token table is missing; rebuild the index", path=path)
    problem = regular_file_problem(path)
    if problem:
        raise InputError(problem, path=path)
    size = path.stat().st_size
    most = DB_BYTES_BASE + DB_BYTES_PER_TOKEN * m.n_tokens
    if size > most:
        raise InputError(f"{size} bytes; a token table of {m.n_tokens} tokens takes at most "
                         f"{most}", path=path)
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True,
                             check_same_thread=False)
    except sqlite3.Error as e:
        raise _db_error(path, e) from None
    try:
        for table, cols in TOKEN_TABLES.items():
            have = tuple(r[1] for r in db.execute(f"PRAGMA table_info({table})"))
            if have != cols:
                raise _db_error(path, f"table '{table}' has columns {list(have)}, expected "
                                      f"{list(cols)}")
        ranges = (("tokens", "row", m.n_tokens), ("sentences", "id", m.n_sentences))
        for table, key, count in ranges:
            lo, hi = db.execute(f"SELECT MIN({key}), MAX({key}) FROM {table}").fetchone()
            want = (0, count - 1) if count else (None, None)
            if (lo, hi) != want:
                raise _db_error(path, f"'{table}' numbered {lo}..{hi}, the manifest says "
                                      f"0..{count - 1}")
    except sqlite3.Error as e:
        db.close()
        raise _db_error(path, e) from None
    except InputError:
        db.close()
        raise
    return db


def occurrence(tokens: Sequence[str], word: str, n: int = 1) -> int:
    """The position of the ``n``-th (1-based) occurrence of ``word`` in ``tokens``: exact
    spelling first, else case-folded. Errors say how many there are."""
    if n < 1:
        raise InputError("--occurrence counts from 1")
    exact = [i for i, t in enumerate(tokens) if t == word]
    found = exact or [i for i, t in enumerate(tokens) if t.casefold() == word.casefold()]
    if not found:
        raise InputError(f"'{word}' does not occur in the sentence "
                         f"({' '.join(tokens)[:80]!r})")
    if n > len(found):
        raise InputError(f"'{word}' occurs {len(found)} time(s) in the sentence; "
                         f"--occurrence {n} is beyond that")
    return found[n - 1]


def query_vectors(embedder, tokens: Sequence[str], position: int,
                  layers: Sequence[int]) -> Dict[int, np.ndarray]:
    """The vector of ``tokens[position]`` in each of ``layers``, as the index stores it."""
    acts = embedder.embed([list(tokens)])[0]                          # (L+1, n, D)
    return {layer: acts[layer, position].astype(np.float32) for layer in layers}
