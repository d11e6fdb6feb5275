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

import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.errors import InputError
from elmo_engine.index.ann import AnnIndex, AnnSettings, ann_file
from elmo_engine.index.store import TOKENS_DB, Manifest, load_npy, read_manifest, vectors_file

#: the rows of recently searched words kept in memory, at most this many row numbers in all
ROWS_CACHE = 4_000_000


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


def kwic(tokens: Sequence[str], position: int, width: int = 40) -> Tuple[str, str, str]:
    """Keyword in context: ``(left, word, right)`` of the token at ``position``, the left side
    cut from its start and the right side at its end to at most ``width`` characters each
    ("…" marks a cut); the word itself is never cut."""
    left = " ".join(tokens[:position])
    right = " ".join(tokens[position + 1:])
    if len(left) > width:
        left = "…" + left[-(width - 1):]
    if len(right) > width:
        right = right[:width - 1] + "…"
    return left, tokens[position], right


def kwic_line(tokens: Sequence[str], position: int, width: int = 40) -> str:
    """One keyword-in-context line, the word marked ``[word]`` and centred: the left side
    right-aligned in ``width`` characters, so that the marks of several lines stack (at most
    ``2 · width + len(word) + 4`` characters, whatever the sentence's length)."""
    left, word, right = kwic(tokens, position, width)
    return f"{left:>{width}} [{word}] {right}".rstrip()


@dataclass(frozen=True)
class Hit:
    """One occurrence found: where it is, the word, its cosine to the query, its sentence."""

    sentence_id: int
    position: int                     # 0-based token position in the sentence
    word: str
    cosine: float
    text: str                         # the sentence, tokens joined by spaces
    layer: int
    row: int                          # the token's row in the index's vector files

    def kwic(self, width: int = 40) -> Tuple[str, str, str]:
        """Keyword in context: ``(left, word, right)``, each side cut to ``width`` characters."""
        return kwic(self.text.split(" "), self.position, width)

    def to_dict(self) -> dict:
        return {"sentence_id": self.sentence_id, "position": self.position, "word": self.word,
                "cosine": self.cosine, "text": self.text, "layer": self.layer}


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
            v = load_npy(vectors_file(self.folder, layer))
            if v.shape != (m.n_tokens, m.dim) or v.dtype != np.float16:
                raise InputError(f"vectors of shape {v.shape} {v.dtype}; expected "
                                 f"({m.n_tokens}, {m.dim}) float16",
                                 path=vectors_file(self.folder, layer))
            self.vectors[layer] = v
        db = self.folder / TOKENS_DB
        if not db.is_file():
            raise InputError("the token table is missing; rebuild the index", path=db)
        self.db = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
        self._ann: Dict[int, AnnIndex] = {}
        self._rows: "OrderedDict[str, np.ndarray]" = OrderedDict()
        # the caches and the connection are shared by every thread that reads the index
        self._lock = threading.RLock()
        s: Dict[str, Any] = dict(m.ann)
        try:
            self.ann_settings = AnnSettings(int(s.get("m", 32)), int(s.get("ef_construction", 128)),
                                            int(s.get("ef_search", 128)), int(s.get("threads", 1)),
                                            str(s.get("quantizer", "fp16")))
        except (TypeError, ValueError) as e:
            raise InputError(f"malformed 'ann' settings in the manifest ({e})",
                             path=self.folder) from None

    def close(self) -> None:
        self.db.close()

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

    def _query(self, sql: str, params: Sequence = ()) -> list:
        """Every row of one query (the connection serves one query at a time)."""
        with self._lock:
            return self.db.execute(sql, params).fetchall()

    # ---- tokens ------------------------------------------------------------------------------
    def rows_of(self, word: str) -> np.ndarray:
        """The rows of every occurrence of ``word`` (case-folded), in corpus order. The most
        recently asked words' rows are kept (at most :data:`ROWS_CACHE` row numbers)."""
        key = word.casefold()
        with self._lock:
            if key in self._rows:
                self._rows.move_to_end(key)
                return self._rows[key]
            cur = self.db.execute("SELECT row FROM tokens WHERE folded = ? ORDER BY row", (key,))
            rows = np.fromiter((r for (r,) in cur), dtype=np.int64)
            rows.setflags(write=False)
            self._rows[key] = rows
            while sum(len(r) for r in self._rows.values()) > ROWS_CACHE and len(self._rows) > 1:
                self._rows.popitem(last=False)
            return rows

    def sentence(self, sentence_id: int) -> List[str]:
        found = self._query("SELECT text FROM sentences WHERE id = ?", (int(sentence_id),))
        got = found[0] if found else None
        if got is None:
            raise InputError(f"no sentence {sentence_id} in the index (it holds "
                             f"{self.manifest.n_sentences})", path=self.folder)
        return got[0].split(" ")

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
                out[rec[0]] = rec
        return [out[r] for r in rows]

    def row_of(self, sentence_id: int, position: int) -> int:
        found = self._query("SELECT row FROM tokens WHERE sentence_id = ? AND position = ?",
                            (int(sentence_id), int(position)))
        got = found[0] if found else None
        if got is None:
            raise InputError(f"no token {position} in sentence {sentence_id}", path=self.folder)
        return int(got[0])

    def vocabulary_sample(self, limit: int = 50_000) -> List[str]:
        return [w for (w,) in self._query("SELECT DISTINCT word FROM tokens LIMIT ?",
                                          (limit,))]

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
        (_, _, _, word, _), = self.tokens_at([row])
        return self.search(self.vectors[layer][row], layer, k, word if same_word else None,
                           None if include_self else row)


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
