"""One word across sentences: per-layer cosine similarity, self-similarity, group separation.

Everything here is plain NumPy on the arrays the embedder returns: per sentence ``(L+1, n, 2P)``
float32, where layer 0 is ``[token, token]`` and layer ``l ≥ 1`` is ``[forward_l, backward_l]``
(``docs/checkpoint-format.md`` §9). The first half of a layer is what the forward LSTM saw
(left context only), the second half the backward LSTM (right context only).

The views compared are the layers ``0..L`` plus a user-weighted scalar mix ``Σ_k w_k h_k`` with
``w`` normalised to sum to 1 (the weights a trained AllenNLP ``ScalarMix`` holds after its
softmax, without the γ scale, which cosines ignore).

Self-similarity follows Ethayarajh (2019), "How contextual are contextualized word
representations?": the mean cosine between a word's occurrences over all pairs ``i ≠ j``.
Anisotropy correction subtracts the mean vector of a reference set of tokens (per layer and
direction) before the cosine, because raw cosines in ELMo's upper layers are high for any pair.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis import DIRECTIONS
from elmo_engine.atomic import atomic_path, atomic_write_text
from elmo_engine.analysis.contexts.permutation import PermutationResult, group_permutation_test
from elmo_engine.errors import InputError

#: vectors shorter than this (after centring) have no direction: their cosines are set to 0
EPS = 1e-12

Occurrence = Tuple[int, int]          # (sentence index, token index)


# ---- finding and gathering -----------------------------------------------------------------
#: occurrences compared at most (the first in reading order): the view and ``contexts`` alike
MAX_OCCURRENCES = 300

def find_occurrences(tokens: Sequence[Sequence[str]], word: str, ignore_case: bool = False
                     ) -> List[Occurrence]:
    """Every ``(sentence, token)`` position where ``word`` occurs, in reading order."""
    if ignore_case:
        target = word.casefold()
        return [(s, t) for s, sent in enumerate(tokens) for t, tok in enumerate(sent)
                if tok.casefold() == target]
    return [(s, t) for s, sent in enumerate(tokens) for t, tok in enumerate(sent) if tok == word]


def gather(activations: Sequence[Optional[np.ndarray]], occurrences: Sequence[Occurrence]) -> np.ndarray:
    """Stack the vectors of the given occurrences: ``(L+1, n_occ, 2P)`` float32."""
    if not occurrences:
        raise InputError("no occurrences to compare")
    cols = []
    for s, t in occurrences:
        arr = activations[s]
        if arr is None:
            raise InputError(f"sentence {s} has not been embedded yet")
        if not 0 <= t < arr.shape[1]:
            raise InputError(f"sentence {s} has no token {t} (it has {arr.shape[1]})")
        cols.append(arr[:, t])                                  # (L+1, 2P)
    return np.stack(cols, axis=1).astype(np.float32, copy=False)


def snippet(tokens: Sequence[str], index: int, context: int = 2, max_chars: int = 32) -> str:
    """A short label for a token in its sentence: ``"…the [bank] of…"``, about ``max_chars``
    long and centred on the word; the ``[word]`` mark is never cut (context words are dropped
    from the far ends first)."""
    lo, hi = max(0, index - context), min(len(tokens), index + 1 + context)

    def text(lo: int, hi: int) -> str:
        return " ".join(list(tokens[lo:index]) + [f"[{tokens[index]}]"]
                        + list(tokens[index + 1:hi]))

    while len(text(lo, hi)) > max_chars and (lo < index or hi > index + 1):
        if index - lo >= hi - index - 1 and lo < index:
            lo += 1
        else:
            hi -= 1
    return ("…" if lo > 0 else "") + text(lo, hi) + ("…" if hi < len(tokens) else "")


# ---- halves and mix -------------------------------------------------------------------------
def half(x: np.ndarray, direction: str) -> np.ndarray:
    """Select a direction on the last axis (2P wide): both, forward (first P), backward (last P)."""
    if direction not in DIRECTIONS:
        raise InputError(f"unknown direction '{direction}' (use {', '.join(DIRECTIONS)})")
    if direction == "both":
        return x
    p = x.shape[-1] // 2
    return x[..., :p] if direction == "forward" else x[..., p:]


def normalise_weights(weights: Optional[Sequence[float]], n_layers: int) -> np.ndarray:
    """Mix weights over ``n_layers`` layers, non-negative and summing to 1.

    ``None`` or all zeros give the uniform mix (an untrained ScalarMix).
    """
    if weights is None:
        return np.full(n_layers, 1.0 / n_layers)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != n_layers:
        raise InputError(f"{w.shape[0]} mix weights given for {n_layers} layers")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("mix weights must be finite and non-negative")
    total = w.sum()
    if total <= 0:
        return np.full(n_layers, 1.0 / n_layers)
    return w / total


def mix_layers(stack: np.ndarray, weights: "Sequence[float] | np.ndarray") -> np.ndarray:
    """``Σ_k w_k · stack[k]`` over the first axis: ``(L+1, ...) → (...)`` (float32).

    With normalised ``w`` this is ``elmo_engine.model.mix.scalar_mix_numpy(stack, log w)`` (γ = 1),
    written out here so that zero weights need no ``log 0``.
    """
    w = np.asarray(weights, dtype=np.float64)
    out = np.tensordot(w, stack.astype(np.float64, copy=False), axes=(0, 0))
    return out.astype(np.float32)


# ---- similarity -----------------------------------------------------------------------------
def cosine_matrix(x: np.ndarray, center: Optional[np.ndarray] = None) -> np.ndarray:
    """Pairwise cosine similarity of the rows of ``x`` ``(n, d)`` → ``(n, n)`` float64.

    ``center`` ``(d,)`` is subtracted first (anisotropy correction). A row that is (numerically)
    the zero vector has cosine 0 with everything, itself included.
    """
    x = np.asarray(x, dtype=np.float64)
    if center is not None:
        x = x - np.asarray(center, dtype=np.float64)[None, :]
    norms = np.linalg.norm(x, axis=1)                           # (n,)
    safe = np.where(norms > EPS, norms, np.inf)
    u = x / safe[:, None]                                       # (n, d), unit rows or zeros
    sim = u @ u.T                                               # (n, n)
    return np.clip(sim, -1.0, 1.0)


def self_similarity(sim: np.ndarray) -> float:
    """Mean off-diagonal entry of a similarity matrix (NaN for fewer than 2 occurrences)."""
    n = sim.shape[0]
    if n < 2:
        return math.nan
    return float((sim.sum() - np.trace(sim)) / (n * (n - 1)))


def group_similarity(sim: np.ndarray, groups: Sequence[Optional[str]]) -> Tuple[float, float]:
    """Mean similarity within groups and between groups, over pairs ``i ≠ j``.

    Occurrences whose group is ``None`` or ``""`` take no part. A mean with no pairs is NaN.
    """
    n = sim.shape[0]
    if len(groups) != n:
        raise InputError(f"{len(groups)} group labels for {n} occurrences")
    labelled = np.array([bool(g) for g in groups])
    if labelled.sum() < 2:
        return math.nan, math.nan
    g = np.array([str(x) if x else "" for x in groups], dtype=object)
    same = g[:, None] == g[None, :]                             # (n, n)
    both = labelled[:, None] & labelled[None, :]
    off = ~np.eye(n, dtype=bool)
    within = both & same & off
    between = both & ~same
    w = float(sim[within].mean()) if within.any() else math.nan
    b = float(sim[between].mean()) if between.any() else math.nan
    return w, b


def reference_mean(activations: Sequence[Optional[np.ndarray]]) -> np.ndarray:
    """Mean vector of every token of a reference set, per layer: ``(L+1, 2P)`` float64."""
    total = None
    count = 0
    for arr in activations:
        if arr is None or arr.shape[1] == 0:
            continue
        part = arr.astype(np.float64).sum(axis=1)               # (L+1, 2P)
        total = part if total is None else total + part
        count += arr.shape[1]
    if total is None:
        raise InputError("the reference set for the anisotropy correction has no tokens")
    return total / count


def layer_stats(activations: Sequence[Optional[np.ndarray]]) -> np.ndarray:
    """Per layer, one mean and one standard deviation over every element of every token
    (AllenNLP's ``do_layer_norm`` statistics): ``(L+1, 2)`` float64."""
    arrs = [a for a in activations if a is not None and a.shape[1]]
    if not arrs:
        raise InputError("no tokens to normalise the layers with")
    # two passes, one sentence at a time (no float64 copy of every token at once)
    n = sum(a[0].size for a in arrs)
    mean = sum(a.reshape(a.shape[0], -1).sum(axis=1, dtype=np.float64) for a in arrs) / n
    sq = sum(np.square(a.reshape(a.shape[0], -1) - mean[:, None]).sum(axis=1) for a in arrs)
    return np.stack([mean, np.sqrt(sq / n + 1e-12)], axis=1)


def view_names(n_layers: int) -> List[str]:
    """Names of the compared views: ``layer 0 … layer L`` and ``mix``."""
    return [f"layer {k}" for k in range(n_layers)] + ["mix"]


# ---- the comparison -------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """The cross-context comparison of one word's occurrences.

    Attributes
    ----------
    word : the word compared
    occurrences : ``(sentence, token)`` per occurrence
    labels : a short snippet per occurrence
    names : view names (``layer 0 … layer L``, ``mix``), K of them
    matrices : ``(K, n, n)`` cosine similarity per view
    self_sim : ``(K,)`` mean self-similarity per view
    within, between : ``(K,)`` mean within-group / between-group similarity (NaN if ungrouped)
    groups : group label per occurrence ("" for none)
    weights : the normalised mix weights used
    direction : "both", "forward" or "backward"
    corrected : whether the reference mean was subtracted
    p_value : ``(K,)`` one-sided permutation p-value of within − between > 0 (NaN: no test)
    test : how the p-values were obtained (:class:`~.permutation.PermutationResult`)
    layer_norm : whether each layer was normalised before mixing (ScalarMix's do_layer_norm)
    """

    word: str
    occurrences: Tuple[Occurrence, ...]
    labels: Tuple[str, ...]
    names: Tuple[str, ...]
    matrices: np.ndarray
    self_sim: np.ndarray
    within: np.ndarray
    between: np.ndarray
    groups: Tuple[str, ...]
    weights: np.ndarray
    direction: str
    corrected: bool
    p_value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    test: Optional[PermutationResult] = None
    layer_norm: bool = False

    def summary_rows(self) -> List[Tuple[str, List[float]]]:
        """Rows of the per-view summary: self-similarity, within, between, within − between."""
        return [("self-similarity", list(self.self_sim)),
                ("within groups", list(self.within)),
                ("between groups", list(self.between)),
                ("within − between", list(self.within - self.between)),
                ("p (permutation)", list(self.p_value))]


def compare(vectors: np.ndarray, weights: Optional[Sequence[float]] = None,
            direction: str = "both", center: Optional[np.ndarray] = None,
            groups: Optional[Sequence[Optional[str]]] = None, word: str = "",
            occurrences: Sequence[Occurrence] = (), labels: Sequence[str] = (),
            layer_norm: Optional[np.ndarray] = None) -> Comparison:
    """Compare occurrences layer by layer.

    Parameters
    ----------
    vectors : ``(L+1, n, 2P)`` the occurrences' vectors (:func:`gather`)
    weights : mix weights over the L+1 layers (normalised here; None = uniform)
    direction : "both", "forward" or "backward" half of every layer
    center : ``(L+1, 2P)`` reference mean per layer (:func:`reference_mean`) to subtract, or None
    groups : a group label per occurrence (None/"" = ungrouped)
    word, occurrences, labels : carried into the result for display and export
    layer_norm : ``(L+1, 2)`` mean and standard deviation per layer (:func:`layer_stats`): each
        layer is normalised with them before mixing, as AllenNLP's ``ScalarMix(do_layer_norm)``
        does; the layers' own views are unchanged (a cosine ignores the scale)
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 3:
        raise InputError(f"expected vectors of shape (layers, n, dim), got {vectors.shape}")
    n_layers, n, _ = vectors.shape
    w = normalise_weights(weights, n_layers)
    views = [half(vectors[k], direction) for k in range(n_layers)]          # each (n, d)
    stats = None if layer_norm is None else np.asarray(layer_norm, dtype=np.float64)
    normed = vectors if stats is None else \
        (vectors - stats[:, :1, None]) / stats[:, 1:, None]
    views.append(half(mix_layers(normed, w), direction))
    centers: List[Optional[np.ndarray]] = [None] * (n_layers + 1)
    if center is not None:
        center = np.asarray(center, dtype=np.float64)
        if center.shape != (n_layers, vectors.shape[2]):
            raise InputError(f"reference mean has shape {center.shape}, expected "
                             f"{(n_layers, vectors.shape[2])}")
        centers = [half(center[k], direction) for k in range(n_layers)]
        c = center if stats is None else (center - stats[:, :1]) / stats[:, 1:]
        centers.append(half(np.tensordot(w, c, axes=(0, 0)), direction))
    mats = np.stack([cosine_matrix(v, c) for v, c in zip(views, centers)])   # (K, n, n)
    grp = tuple("" if g is None else str(g) for g in (groups if groups is not None else [""] * n))
    sims = np.array([self_similarity(m) for m in mats])
    wb = np.array([group_similarity(m, grp) for m in mats]).reshape(-1, 2)
    test = group_permutation_test(mats, grp)
    return Comparison(word=word, occurrences=tuple((int(o[0]), int(o[1])) for o in occurrences),
                      labels=tuple(labels), names=tuple(view_names(n_layers)), matrices=mats,
                      self_sim=sims, within=wb[:, 0], between=wb[:, 1], groups=grp, weights=w,
                      direction=direction, corrected=center is not None, p_value=test.p,
                      test=test, layer_norm=stats is not None)


def compare_word(tokens: Sequence[Sequence[str]], activations: Sequence[Optional[np.ndarray]],
                 word: str, weights: Optional[Sequence[float]] = None, direction: str = "both",
                 corrected: bool = False, groups: Optional[dict] = None, ignore_case: bool = False,
                 max_occurrences: int = MAX_OCCURRENCES, center: Optional[np.ndarray] = None,
                 layer_norm: bool = False
                 ) -> Tuple[Optional[Comparison], Optional[np.ndarray], int]:
    """Find ``word`` in tokenized sentences with activations and compare its occurrences.

    With ``corrected``, the anisotropy reference mean is ``center`` ``(L+1, 2P)`` when given
    (e.g. a neighbour index's corpus mean), else the mean of every token of ``activations``.
    ``groups`` maps
    ``(sentence, token)`` to a label; the occurrences are ordered by group (groups in the order
    they first occur, unlabelled ones last, reading order within a group). With ``layer_norm``
    every layer is normalised by its mean and standard deviation over all tokens of
    ``activations`` before the mix (:func:`layer_stats`). Returns ``(comparison, vectors (L+1, n,
    2P), total)`` where ``total`` counts all occurrences (only the first ``max_occurrences`` are
    compared), or ``(None, None, total)`` when there are none.
    """
    occ = find_occurrences(tokens, word, ignore_case)
    total = len(occ)
    occ = occ[:max_occurrences]
    if not occ:
        return None, None, total
    groups = groups or {}
    first: Dict[str, int] = {}
    for o in occ:
        first.setdefault(groups.get(o, ""), len(first))
    occ.sort(key=lambda o: (not groups.get(o, ""), first[groups.get(o, "")]))
    vectors = gather(activations, occ)
    if not corrected:
        center = None
    elif center is None:
        center = reference_mean(activations)
    comp = compare(vectors, weights, direction, center, [groups.get(o, "") for o in occ],
                   word=word, occurrences=occ, labels=[snippet(tokens[s], t) for s, t in occ],
                   layer_norm=layer_stats(activations) if layer_norm else None)
    return comp, vectors, total


# ---- exports --------------------------------------------------------------------------------
def write_matrices_csv(path, comp: Comparison) -> None:
    """All views' matrices in one CSV: per view a square block ``view, occurrence, <labels…>``."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    heads = [f"{i + 1}: {lab}" for i, lab in enumerate(comp.labels)] or \
        [str(i + 1) for i in range(comp.matrices.shape[1])]
    out.writerow(["view", "occurrence", *heads])
    for name, mat in zip(comp.names, comp.matrices):
        for i, row in enumerate(mat):
            out.writerow([name, heads[i], *(f"{v:.6f}" for v in row)])
    atomic_write_text(path, buf.getvalue())


def read_matrices_csv(path) -> dict:
    """Read :func:`write_matrices_csv` back: ``{view name: (n, n) array}``."""
    mats: dict = {}
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows or rows[0][:2] != ["view", "occurrence"]:
        raise InputError("not a similarity-matrix CSV (header 'view,occurrence,…' missing)",
                         path=path, line=1)
    for lineno, row in enumerate(rows[1:], start=2):
        try:
            mats.setdefault(row[0], []).append([float(v) for v in row[2:]])
        except (ValueError, IndexError):
            raise InputError("malformed matrix row", path=path, line=lineno) from None
    return {k: np.array(v) for k, v in mats.items()}


def write_vectors_npz(path, vectors: np.ndarray, occurrences: Sequence[Occurrence],
                      words: Sequence[str], sentences: Sequence[str],
                      groups: Sequence[str] = ()) -> None:
    """Vectors of selected occurrences ``(L+1, n, 2P)`` with their places, as npz (no pickle)."""
    occ = np.asarray(occurrences, dtype=np.int64).reshape(-1, 2)
    arrays: Dict[str, np.ndarray] = {
              "vectors": np.asarray(vectors, dtype=np.float32), "sentence": occ[:, 0],
              "token": occ[:, 1], "word": np.array(list(words), dtype=str),
              "text": np.array(list(sentences), dtype=str),
              "group": np.array(list(groups) or [""] * len(occ), dtype=str)}
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, allow_pickle=False, **arrays)


__all__ = ["DIRECTIONS", "Comparison", "Occurrence", "compare", "compare_word", "cosine_matrix",
           "find_occurrences", "gather", "group_similarity", "half", "layer_stats", "mix_layers",
           "normalise_weights", "read_matrices_csv", "reference_mean", "self_similarity",
           "snippet", "view_names", "write_matrices_csv", "write_vectors_npz"]
