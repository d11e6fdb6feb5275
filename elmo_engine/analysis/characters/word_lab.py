"""The word lab: what the token layer makes of one word.

For each word: the character ids the model reads (truncated at ``max_characters_per_token``,
with the begin/end-of-word marks), every filter's max-pool value with the window (n-gram) that
wins it, the highway gates per layer (the file's "carry" gate multiplies the transformed branch,
so ``g`` is the share transformed and ``1 − g`` the share carried), the layer-0 vector, its norm
among the vocabulary's norms, and its nearest known words at layer 0 by cosine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.analysis.characters.windows import Filters, all_windows, render_ids
from elmo_engine.errors import InputError
from elmo_engine.model.chars import PAD_CHAR, char_ids_for_types
from elmo_engine.progress import TaskState, check, report


@dataclass(frozen=True)
class FilterHit:
    """One filter's max-pool on a word: its value (conv + bias, before the non-linearity),
    the winning window's start position and its n-gram."""

    filter: int
    width: int
    value: float
    position: int
    ngram: str


@dataclass(frozen=True)
class HighwayLayer:
    """One highway layer on one word: ``x_out = g·t + (1 − g)·x_in`` (all (N,) float32)."""

    gate: np.ndarray          # g: the share of each dimension transformed
    transformed: np.ndarray   # t = relu(W_t x + b_t)
    x_in: np.ndarray

    @property
    def transform_share(self) -> float:
        return float(self.gate.mean())

    @property
    def carry_share(self) -> float:
        return float(1.0 - self.gate.mean())

    def output(self) -> np.ndarray:
        return self.gate * self.transformed + (1.0 - self.gate) * self.x_in


@dataclass(frozen=True)
class WordReport:
    """Everything the lab shows about one word."""

    word: str
    char_ids: Tuple[int, ...]       # the M ids the model reads
    truncated: bool                 # the word had more than M − 2 UTF-8 bytes
    n_bytes: int
    pooled: np.ndarray              # (N,) max-pool values before the non-linearity
    positions: np.ndarray           # (N,) the winning window's start
    highway: Tuple[HighwayLayer, ...]
    vector: np.ndarray              # (P,) the layer-0 vector
    norm: float
    norm_percentile: Optional[float] = None          # among the vocabulary's norms, 0–100
    neighbours: Tuple[Tuple[str, float], ...] = field(default=())

    @property
    def shown_ids(self) -> str:
        """The ids up to the end-of-word mark, as text (``⟨blorft⟩``)."""
        body = [i for i in self.char_ids if i != PAD_CHAR]
        return render_ids(body)

    def top_filters(self, filters: Filters, k: int) -> List[FilterHit]:
        """The ``k`` filters with the largest max-pool values, each with its winning n-gram."""
        widths = filters.widths()
        order = np.argsort(-self.pooled, kind="stable")[:k]
        return [FilterHit(int(j), int(widths[j]), float(self.pooled[j]),
                          int(self.positions[j]),
                          render_ids(self.char_ids[int(self.positions[j]):
                                                   int(self.positions[j]) + int(widths[j])]))
                for j in order]

    def to_dict(self, filters: Filters, k: int) -> dict:
        return {"word": self.word, "characters": self.shown_ids,
                "char_ids": [int(i) for i in self.char_ids if i != PAD_CHAR],
                "truncated": self.truncated, "utf8_bytes": self.n_bytes,
                "kept_bytes": len(self.char_ids) - 2,       # M − 2: the word marks take two
                "top_filters": [{"filter": h.filter, "width": h.width, "value": round(h.value, 5),
                                 "position": h.position, "ngram": h.ngram}
                                for h in self.top_filters(filters, k)],
                "highway": [{"layer": i, "transform_share": round(h.transform_share, 5),
                             "carry_share": round(h.carry_share, 5),
                             "mostly_transformed": int((h.gate > 0.5).sum()),
                             "dimensions": int(h.gate.shape[0])}
                            for i, h in enumerate(self.highway)],
                "norm": round(self.norm, 5),
                "norm_percentile": (None if self.norm_percentile is None
                                    else round(self.norm_percentile, 2)),
                "neighbours": [{"word": w, "cosine": round(c, 5)} for w, c in self.neighbours]}


def pool(filters: Filters, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Max-pool values (n, N) and winning positions (n, N) of ``ids`` (n, M), over every
    window ``p = 0 … M − w`` (the first of equal maxima wins)."""
    values, where = [], []
    for b, (width, _, _, _) in enumerate(filters.banks):
        win = all_windows(ids, width)                                 # (n, M−w+1, w)
        n, npos, _ = win.shape
        v = filters.window_values(b, win.reshape(n * npos, width)).view(n, npos, -1)
        best, arg = v.max(1)                                          # (n, k)
        values.append(best.numpy())
        where.append(arg.numpy())
    return np.concatenate(values, 1), np.concatenate(where, 1)


def token_layer(filters: Filters, pooled: np.ndarray
                ) -> Tuple[np.ndarray, List[Tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Layer 0 from the max-pool values (n, N): ``(vectors (n, P), [(g, t, x_in)] per highway
    layer)``, the same operations as the model's."""
    x = filters.nonlinear(torch.from_numpy(pooled))
    gates = []
    for wc, bc, wt, bt in filters.highway:
        g = torch.sigmoid(torch.addmm(bc, x, wc))
        t = torch.relu(torch.addmm(bt, x, wt))
        gates.append((g.numpy(), t.numpy(), x.numpy()))
        x = g * t + (1.0 - g) * x
    if filters.projection is not None:
        x = torch.addmm(filters.projection[1], x, filters.projection[0])     # (n, P)
    return x.numpy(), gates


def analyse(filters: Filters, words: Sequence[str],
            vocabulary: Optional["Vocabulary"] = None, neighbours: int = 10) -> List[WordReport]:
    """A :class:`WordReport` per word; with ``vocabulary``, its norm percentile and its
    ``neighbours`` nearest known words at layer 0 (cosine; the word itself left out)."""
    words = list(words)
    if not words:
        raise InputError("no word given")
    for w in words:
        if not w or any(ch.isspace() for ch in w):
            raise InputError(f"not a word: {w!r} (one token, no spaces)")
    m = filters.max_chars
    ids = char_ids_for_types(words, m)                                # (n, M)
    with torch.inference_mode():
        pooled, positions = pool(filters, ids)
        vectors, gates = token_layer(filters, pooled)
    out = []
    for r, w in enumerate(words):
        n_bytes = len(w.encode("utf-8", errors="ignore"))
        hw = tuple(HighwayLayer(g[r], t[r], x[r]) for g, t, x in gates)
        vec = vectors[r]
        norm = float(np.linalg.norm(vec))
        pct: Optional[float] = None
        near: Tuple[Tuple[str, float], ...] = ()
        if vocabulary is not None:
            pct = vocabulary.norm_percentile(norm)
            near = tuple(vocabulary.nearest(vec, neighbours, exclude=w))
        out.append(WordReport(w, tuple(int(i) for i in ids[r]), n_bytes > m - 2, n_bytes,
                              pooled[r], positions[r], hw, vec, norm, pct, near))
    return out


class Vocabulary:
    """Known words with their layer-0 vectors: norms and nearest neighbours by cosine."""

    def __init__(self, words: Sequence[str], vectors: np.ndarray, source: str = "",
                 own: bool = False):
        """``own``: ``vectors`` (float32) is this object's to normalise in place (one (V, P)
        array is held, not three: 2,000,000 words once took 9 GB)."""
        if len(words) != len(vectors):
            raise ValueError("one vector per word")
        self.words = list(words)
        self.source = source
        unit = np.asarray(vectors, np.float32) if own else np.array(vectors, np.float32)
        self.norms = np.sqrt(np.einsum("vp,vp->v", unit, unit))      # no (V, P) temporary
        unit /= np.maximum(self.norms, 1e-12)[:, None]
        self._unit = unit
        self._sorted_norms = np.sort(self.norms)

    @property
    def vectors(self) -> np.ndarray:
        """The layer-0 vectors (V, P), rebuilt from the unit vectors and the norms (not held)."""
        return self._unit * self.norms[:, None]

    @staticmethod
    def _allocate(n_words: int, dim: int) -> np.ndarray:
        """The (V, P) float32 array of ``n_words`` vectors, refused in one line over
        :data:`MAX_VOCAB_VECTOR_BYTES` before it is allocated."""
        need = n_words * dim * 4
        if need > MAX_VOCAB_VECTOR_BYTES:
            raise InputError(f"the vectors of {n_words:,} known words ({dim} wide) need "
                             f"{need / 2 ** 30:.1f} GiB, over the bound of "
                             f"{MAX_VOCAB_VECTOR_BYTES / 2 ** 30:.0f} GiB; give fewer words")
        return np.empty((n_words, dim), np.float32)

    @classmethod
    def from_words(cls, filters: Filters, words: Sequence[str], source: str = "",
                   chunk: int = 4096, char_cnn=None) -> "Vocabulary":
        """Layer-0 vectors of ``words`` (distinct, in order): by ``char_cnn`` (the model's own
        token layer, the fast path: it pools only the windows that touch each word) when given,
        else from ``filters`` (:func:`pool`, every window)."""
        words = list(dict.fromkeys(w for w in words if w and not any(c.isspace() for c in w)))
        p = filters.projection[0].shape[1] if filters.projection else filters.n_filters
        out = cls._allocate(len(words), p)
        with torch.inference_mode():
            for s in range(0, len(words), chunk):
                ids = char_ids_for_types(words[s:s + chunk], filters.max_chars)
                if char_cnn is not None:
                    dev = next(char_cnn.parameters()).device
                    out[s:s + len(ids)] = char_cnn(torch.from_numpy(ids).to(dev)).float().cpu()
                else:
                    out[s:s + len(ids)] = token_layer(filters, pool(filters, ids)[0])[0]
        return cls(words, out, source, own=True)

    @classmethod
    def from_embedder(cls, embedder, words: Sequence[str], source: str = "",
                      state: Optional[TaskState] = None, chunk: int = 4096) -> "Vocabulary":
        """Layer-0 vectors of ``words`` (distinct, in order) by the embedder's token layer (its
        type cache, its device and precision), ``chunk`` words at a time: progress to ``state``
        (words done / total) and a cancel checked between chunks."""
        words = list(dict.fromkeys(w for w in words if w and not any(c.isspace() for c in w)))
        out = cls._allocate(len(words), embedder.opts.projection_dim)
        for s in range(0, len(words), chunk):
            check(state)
            report(state, s, len(words), f"the layer-0 vectors of {len(words):,} known words")
            part = embedder.token_vectors(words[s:s + chunk])
            out[s:s + len(part)] = part
        report(state, len(words), len(words), f"the layer-0 vectors of {len(words):,} known words")
        return cls(words, out, source, own=True)

    def norm_percentile(self, norm: float) -> Optional[float]:
        if not len(self._sorted_norms):
            return None
        return 100.0 * float(np.searchsorted(self._sorted_norms, norm, side="right")) / len(
            self._sorted_norms)

    def nearest(self, vector: np.ndarray, k: int, exclude: str = "") -> List[Tuple[str, float]]:
        if k <= 0 or not self.words:
            return []
        u = vector / max(float(np.linalg.norm(vector)), 1e-12)
        cos = self._unit @ u.astype(np.float32)                       # (V,)
        order = np.argsort(-cos, kind="stable")
        out = []
        for i in order:
            if self.words[i] == exclude:
                continue
            out.append((self.words[i], float(cos[i])))
            if len(out) == k:
                break
        return out


def reference_words(limit: Optional[int] = None) -> List[str]:
    """The word types of the bundled reference corpus (``resources/reference_corpus``,
    tokenized as typed text), in order of first occurrence."""
    from elmo_engine.model.tokenize import tokenize
    from elmo_engine.resources import HERE

    text = (HERE / "reference_corpus" / "sentences.txt").read_text(encoding="utf-8")
    seen: dict = {}
    for line in text.splitlines():
        for t in tokenize(line):
            seen.setdefault(t, None)
        if limit is not None and len(seen) >= limit:
            break
    return list(seen)[:limit] if limit is not None else list(seen)


#: a vocabulary file's limits: bytes read (after gzip), words kept
MAX_VOCAB_BYTES = 64 << 20
MAX_VOCAB_WORDS = 2_000_000
#: the most the known words' layer-0 vectors may take (float32): a published model's 793,471
#: words at 512 wide take 1.5 GiB, the limit's 2,000,000 words at the demo's 256 take 1.9 GiB
MAX_VOCAB_VECTOR_BYTES = 2 << 30
#: a vocab.txt's entries that are not words
NOT_WORDS = ("<S>", "</S>", "<UNK>")


def read_vocabulary(path) -> List[str]:
    """A vocabulary file: one word a line (the first field of a line; a ``vocab.txt`` of a
    published model or a trained one reads as it is), UTF-8, blank lines and the boundary and
    unknown-word entries skipped; plain or gzip. Bad input: one :class:`InputError` naming the
    file and line."""
    from elmo_engine.io.datasets.textio import line_not_utf8, read_bytes_limited

    data = read_bytes_limited(path, MAX_VOCAB_BYTES)
    if data.startswith(b"\xef\xbb\xbf"):       # a byte-order mark is not part of the first word
        data = data[3:]
    words: dict = {}
    for no, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise line_not_utf8(raw, e, path, no) from None
        if not line:
            continue
        w = line.split()[0]
        if w not in NOT_WORDS:
            words.setdefault(w, None)
        if len(words) > MAX_VOCAB_WORDS:
            raise InputError(f"more than {MAX_VOCAB_WORDS:,} words", path=path, line=no)
    if not words:
        raise InputError("holds no word", path=path)
    return list(words)


#: the known words' sources a saved Characters view names (``views["characters"]["vocabulary"]``)
REFERENCE_SOURCE = "the reference corpus's word types"
MODEL_SOURCE = "the model's vocab.txt"


def model_vocabulary_file(options_path) -> Optional[Path]:
    """The ``vocab.txt`` beside a checkpoint's options file (the published models ship one;
    ``train-lm`` writes one), else None."""
    f = Path(options_path).parent / "vocab.txt"
    return f if f.is_file() else None


def known_words(choice: str, path: str = "", options_path=None) -> Tuple[List[str], str]:
    """The word lab's known words for a choice as the Characters view saves it: ``"reference"``
    (the reference corpus's word types), ``"model"`` (the ``vocab.txt`` beside the checkpoint
    whose options file is ``options_path``) or ``"file"`` (``path``): ``(words, source)``.
    Raises :class:`InputError` (no such vocabulary, a bad file)."""
    if choice == "reference":
        return reference_words(), REFERENCE_SOURCE
    if choice == "model":
        f = None if options_path is None else model_vocabulary_file(options_path)
        if f is None:
            raise InputError("the checkpoint has no vocab.txt beside it")
        return read_vocabulary(f), MODEL_SOURCE
    if choice == "file":
        if not path:
            raise InputError("no vocabulary file named")
        return read_vocabulary(path), str(path)
    raise InputError(f"unknown vocabulary choice {choice!r} (reference, model or file)")
