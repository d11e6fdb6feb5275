"""Contextual nearest neighbours over a reference corpus, and nearest known words in layer 0.

:class:`NeighbourIndex` holds, for every contextual layer ``1..L`` of every token of a reference
corpus, the forward and backward halves as L2-normalised float32 matrices ``(N, P)`` plus the
coefficients that turn two half-cosines into the cosine of the whole vector::

    cos(x, q) = a_x · (x̂_f · q_f/|q|) + b_x · (x̂_b · q_b/|q|),  a_x = |x_f|/|x|, b_x = |x_b|/|x|

so one copy of the data answers "both", "forward" and "backward" queries by matrix–vector
products, and the top k come from ``np.argpartition`` (``O(N)``, no full sort). Layer 0 is
context-free, so it is indexed by word *type* instead (:class:`WordIndex`): a vocabulary of known
words (the corpus's types plus an optional vocabulary file) through the model's character CNN.

Building, reading corpora and caching live in :mod:`elmo_engine.analysis.contexts.neighbour_corpus`.
"""
from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path, atomic_write_text
from elmo_engine.analysis.contexts.compare import DIRECTIONS
from elmo_engine.errors import InputError

#: the most tokens, sentences and words a cached index may hold (a corpus of 1,000,000 tokens
#: beside the loaded sentences, and its known words)
MAX_INDEX_TOKENS = 4_000_000
#: 2: strings as UTF-8 bytes (read by the bounded, numbers-only npz reader); 1 held str arrays
INDEX_FORMAT = 2
#: the columns of a neighbour list (:meth:`NeighbourTable.csv_rows`, :func:`write_neighbours_csv`)
NEIGHBOUR_COLUMNS = ("view", "rank", "score", "word", "sentence", "token", "text")


@dataclass(frozen=True)
class Neighbour:
    """One nearest neighbour: a token of the reference corpus and its cosine to the query."""

    sentence: int
    token: int
    score: float


def _unit_rows(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Rows scaled to unit length (zero rows stay zero) and their norms."""
    norms = np.linalg.norm(x, axis=1)                              # (N,)
    safe = np.where(norms > 0, norms, 1.0)
    return (x / safe[:, None]).astype(np.float32), norms


def top_k(scores: np.ndarray, k: int, exclude: Iterable[int] = ()) -> Tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest scores (best first), skipping ``exclude``."""
    scores = np.asarray(scores)
    ex = [i for i in exclude if 0 <= i < scores.shape[0]]
    if ex:
        scores = scores.copy()
        scores[ex] = -np.inf
    k = max(0, min(int(k), scores.shape[0] - len(ex)))
    if k == 0:
        return np.zeros(0, np.int64), np.zeros(0, scores.dtype)
    idx = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    return idx, scores[idx]


class WordIndex:
    """Nearest known words by cosine of their context-free token vectors (layer 0)."""

    def __init__(self, words: Sequence[str], vectors: np.ndarray):
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(words):
            raise InputError(f"{len(words)} words for token vectors of shape {vectors.shape}")
        self.words = list(words)
        self.unit, _ = _unit_rows(vectors)                          # (V, P)
        self._pos = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def query(self, vector: np.ndarray, k: int = 10, exclude: Sequence[str] = ()
              ) -> List[Tuple[str, float]]:
        """The ``k`` words nearest to a token vector ``(P,)``, best first, without ``exclude``."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        n = float(np.linalg.norm(q))
        if n == 0 or not len(self.words):
            return []
        scores = self.unit @ (q / n)                                 # (V,)
        idx, vals = top_k(scores, k, [self._pos[w] for w in exclude if w in self._pos])
        return [(self.words[i], float(v)) for i, v in zip(idx, vals)]


class NeighbourIndex:
    """Contextual layers ``1..L`` of every token of a reference corpus, ready for cosine top-k.

    Parameters
    ----------
    tokens : the corpus, tokenized
    layers : per contextual layer, ``(N, 2P)`` vectors of all corpus tokens in reading order
    words : the optional layer-0 word index
    key : the cache key this index was built for
    mean : ``(L+1, 2P)`` mean vector of all corpus tokens per layer (the anisotropy reference)
    """

    def __init__(self, tokens: Sequence[Sequence[str]], layers: Sequence[np.ndarray],
                 words: Optional[WordIndex] = None, key: str = "",
                 mean: Optional[np.ndarray] = None):
        self.tokens = [list(s) for s in tokens]
        lengths = np.array([len(s) for s in self.tokens], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])     # (S+1,)
        n = int(self.offsets[-1])
        self.fwd: List[np.ndarray] = []
        self.bwd: List[np.ndarray] = []
        self.coef: List[np.ndarray] = []
        for arr in layers:
            if arr.shape[0] != n:
                raise InputError(f"layer vectors have {arr.shape[0]} rows for {n} corpus tokens")
            p = arr.shape[1] // 2
            f, nf = _unit_rows(arr[:, :p])
            b, nb = _unit_rows(arr[:, p:])
            whole = np.sqrt(nf ** 2 + nb ** 2)
            safe = np.where(whole > 0, whole, 1.0)
            self.fwd.append(f)
            self.bwd.append(b)
            self.coef.append(np.stack([nf / safe, nb / safe]).astype(np.float32))  # (2, N)
        self.words = words
        self.key = key
        self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def nbytes(self) -> int:
        """Memory held by the index's arrays."""
        words = 0 if self.words is None else self.words.unit.nbytes
        return words + sum(a.nbytes + b.nbytes + c.nbytes
                           for a, b, c in zip(self.fwd, self.bwd, self.coef))

    @property
    def n_layers(self) -> int:
        """Number of layers including layer 0 (L+1)."""
        return len(self.fwd) + 1

    def flat(self, sentence: int, token: int) -> int:
        return int(self.offsets[sentence] + token)

    def place(self, flat: int) -> Tuple[int, int]:
        s = int(np.searchsorted(self.offsets, flat, side="right") - 1)
        return s, int(flat - self.offsets[s])

    def scores(self, layer: int, vector: np.ndarray, direction: str = "both") -> np.ndarray:
        """Cosine of a query ``(2P,)`` with every corpus token in contextual ``layer`` ≥ 1."""
        if not 1 <= layer <= len(self.fwd):
            raise InputError(f"contextual layer {layer} out of range 1..{len(self.fwd)}")
        if direction not in DIRECTIONS:
            raise InputError(f"unknown direction '{direction}'")
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        p = q.shape[0] // 2
        qf, qb = q[:p], q[p:]
        i = layer - 1
        if direction == "forward":
            n = float(np.linalg.norm(qf))
            return self.fwd[i] @ (qf / n) if n > 0 else np.zeros(self.n_tokens, np.float32)
        if direction == "backward":
            n = float(np.linalg.norm(qb))
            return self.bwd[i] @ (qb / n) if n > 0 else np.zeros(self.n_tokens, np.float32)
        n = float(np.linalg.norm(q))
        if n == 0:
            return np.zeros(self.n_tokens, np.float32)
        a, b = self.coef[i]
        return a * (self.fwd[i] @ (qf / n)) + b * (self.bwd[i] @ (qb / n))

    def query(self, layer: int, vector: np.ndarray, k: int = 10, direction: str = "both",
              exclude: Sequence[Tuple[int, int]] = ()) -> List[Neighbour]:
        """The ``k`` corpus tokens nearest to ``vector`` in ``layer``, best first."""
        scores = self.scores(layer, vector, direction)
        ex = [self.flat(s, t) for s, t in exclude
              if 0 <= s < len(self.tokens) and 0 <= t < len(self.tokens[s])]
        idx, vals = top_k(scores, k, ex)
        return [Neighbour(*self.place(int(i)), float(v)) for i, v in zip(idx, vals)]

    # ---- npz round trip (numbers only: no pickle, no strings) -----------------------------------
    def save(self, path) -> None:
        """Write the index atomically as an npz of numeric arrays (the words and tokens as UTF-8
        bytes with their offsets), readable by :meth:`load`."""
        arrays = {"format": np.array(INDEX_FORMAT, np.int64),
                  "key": _utf8([self.key])[0],
                  "lengths": np.diff(self.offsets).astype(np.int64)}
        arrays["tokens"], arrays["token_ends"] = _utf8([t for s in self.tokens for t in s])
        for i in range(len(self.fwd)):
            arrays[f"fwd{i}"], arrays[f"bwd{i}"], arrays[f"coef{i}"] = \
                self.fwd[i], self.bwd[i], self.coef[i]
        if self.words is not None:
            arrays["words"], arrays["word_ends"] = _utf8(self.words.words)
            arrays["word_unit"] = self.words.unit
        if self.mean is not None:
            arrays["mean"] = self.mean
        with atomic_path(path, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, allow_pickle=False, **arrays)

    @classmethod
    def load(cls, path) -> "NeighbourIndex":
        """An index written by :meth:`save`. The npz is checked from its headers before
        anything is read (numeric arrays only, sizes bounded: :func:`elmo_engine.io.npz_lazy.
        open_npz`; at most :data:`MAX_INDEX_TOKENS` tokens, sentences and words), then every
        array against the others; anything else is an :class:`InputError` naming the file."""
        from elmo_engine.io.npz_lazy import open_npz

        try:
            z = open_npz(path)
            for name in ("format", "key", "lengths", "tokens", "token_ends"):
                if name not in z:
                    raise InputError(f"neighbour index: no array '{name}'", path=path)
            counted = [("lengths", "sentences"), ("token_ends", "tokens")]
            counted += [("word_ends", "words")] if "word_ends" in z else []
            for name, what in counted:
                shape = z.shape(name)
                if len(shape) != 1 or shape[0] > MAX_INDEX_TOKENS:
                    raise InputError(f"neighbour index: {what} {shape} (at most "
                                     f"{MAX_INDEX_TOKENS:,})", path=path)
            fmt = z["format"]
            if fmt.shape != () or fmt.dtype.kind not in "iu" or int(fmt) != INDEX_FORMAT:
                raise InputError("neighbour index of another format version", path=path)
            lengths = _integers(z["lengths"], "lengths", path)
            if (lengths < 0).any() or (lengths > MAX_INDEX_TOKENS).any():
                raise InputError("neighbour index: bad sentence lengths", path=path)
            offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            flat = _strings(z["tokens"], z["token_ends"], path)
            n = len(flat)
            if n != int(offs[-1]):
                raise InputError(f"neighbour index: {n} tokens for sentences of "
                                 f"{int(offs[-1])}", path=path)
            self = cls.__new__(cls)
            self.tokens = [flat[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
            self.offsets = offs
            self.key = bytes(_integers(z["key"], "key", path).astype(np.uint8)).decode("utf-8")
            n_layers = sum(1 for name in z if name.startswith("fwd"))
            self.fwd = [z[f"fwd{i}"] for i in range(n_layers)]
            self.bwd = [z[f"bwd{i}"] for i in range(n_layers)]
            self.coef = [z[f"coef{i}"] for i in range(n_layers)]
            width = self.fwd[0].shape[1] if n_layers and self.fwd[0].ndim == 2 else None
            for f, b, c in zip(self.fwd, self.bwd, self.coef):
                if (f.shape != (n, width) or b.shape != f.shape or c.shape != (2, n)
                        or not f.dtype == b.dtype == c.dtype == np.float32):
                    raise InputError("neighbour index: a layer's arrays do not fit its tokens",
                                     path=path)
            self.words = None
            self.mean = None
            if "mean" in z:
                self.mean = z["mean"].astype(np.float64)
                if width is None or self.mean.shape != (n_layers + 1, 2 * width):
                    raise InputError("neighbour index: the mean does not fit the layers",
                                     path=path)
            if "words" in z:
                words = WordIndex.__new__(WordIndex)
                words.words = _strings(z["words"], z["word_ends"], path)
                words.unit = z["word_unit"]
                if (words.unit.ndim != 2 or words.unit.shape[0] != len(words.words)
                        or words.unit.dtype != np.float32
                        or (width is not None and words.unit.shape[1] != width)):
                    raise InputError("neighbour index: the word vectors do not fit the words",
                                     path=path)
                words._pos = {w: i for i, w in enumerate(words.words)}
                self.words = words
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise InputError(f"unreadable neighbour index: {exc}", path=path) from None
        return self


def _integers(a: np.ndarray, name: str, path) -> np.ndarray:
    """``a`` as int64 when it holds integers (one dimension); else an :class:`InputError`."""
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise InputError(f"neighbour index: '{name}' is not a list of integers", path=path)
    return a.astype(np.int64)


def _utf8(strings: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array (uint8) and each one's end offset (int64)."""
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64) if encoded else \
        np.zeros(0, np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), ends


def _strings(blob: np.ndarray, ends: np.ndarray, path) -> List[str]:
    """:func:`_utf8` read back, the offsets checked against the bytes."""
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise InputError("neighbour index: bad string arrays", path=path)
    ends = _integers(ends, "ends", path)
    if (len(ends) and (ends[-1] != len(blob) or (np.diff(ends) < 0).any() or ends[0] < 0)
            or (not len(ends) and len(blob))):
        raise InputError("neighbour index: string offsets do not fit their bytes", path=path)
    data = blob.tobytes()
    starts = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
    return [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts.tolist(),
                                                                      ends.tolist())]


@dataclass(frozen=True)
class NeighbourTable:
    """Nearest neighbours of one token: known words in layer 0, corpus tokens per layer ≥ 1."""

    query: str
    words: Tuple[Tuple[str, float], ...]
    layers: Tuple[Tuple[str, Tuple[Neighbour, ...]], ...]

    def csv_rows(self, index: "NeighbourIndex") -> List[list]:
        """Rows for :func:`write_neighbours_csv` (sentence/token are corpus indices)."""
        rows: List[list] = [["layer 0", r, f"{s:.6f}", w, "", "", ""]
                            for r, (w, s) in enumerate(self.words, start=1)]
        for name, nbs in self.layers:
            for r, nb in enumerate(nbs, start=1):
                toks = index.tokens[nb.sentence]
                rows.append([name, r, f"{nb.score:.6f}", toks[nb.token], nb.sentence, nb.token,
                             " ".join(toks)])
        return rows


def neighbour_table(index: "NeighbourIndex", vectors: Optional[np.ndarray], word: str,
                    k: int = 10, direction: str = "both", exclude: Sequence[Tuple[int, int]] = (),
                    token_vector: Optional[np.ndarray] = None) -> NeighbourTable:
    """Neighbours of one token given its layer vectors ``(L+1, 2P)``.

    Without ``vectors`` (a word typed but not in any sentence) only layer 0 is answered, from
    ``token_vector`` ``(P,)``. The word itself is left out of the known words.
    """
    tok = token_vector if vectors is None else vectors[0, : vectors.shape[1] // 2]
    words = []
    if index.words is not None and tok is not None:
        words = index.words.query(tok, k, exclude=[word])
    layers = []
    if vectors is not None:
        for layer in range(1, vectors.shape[0]):
            nbs = index.query(layer, vectors[layer], k, direction, exclude)
            layers.append((f"layer {layer}", tuple(nbs)))
    return NeighbourTable(word, tuple(words), tuple(layers))


def highlight_html(tokens: Sequence[str], index: int) -> str:
    """The sentence as HTML-escaped text with the token at ``index`` in bold."""
    return " ".join(f"<b>{html.escape(t)}</b>" if i == index else html.escape(t)
                    for i, t in enumerate(tokens))


def write_neighbours_csv(path, rows: Sequence[Sequence[object]]) -> None:
    """Neighbour lists as CSV: ``view, rank, score, word, sentence, token, text`` per row."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(NEIGHBOUR_COLUMNS)
    for row in rows:
        out.writerow(row)
    atomic_write_text(path, buf.getvalue())


__all__ = ["NEIGHBOUR_COLUMNS", "Neighbour", "NeighbourIndex", "NeighbourTable", "WordIndex", "highlight_html",
           "neighbour_table", "top_k", "write_neighbours_csv"]
