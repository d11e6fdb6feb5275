"""Hubness per layer: how unevenly the tokens share the role of nearest neighbour.

Radovanović, Nanopoulos & Ivanović (2010, JMLR 11), "Hubs in space": in high-dimensional data
the k-occurrence ``N_k(x)`` — the number of points that have ``x`` among their ``k`` nearest
neighbours — grows right-skewed: a few *hubs* are everyone's neighbour and many points
(*anti-hubs*, ``N_k = 0``) nobody's. Its mean is always ``k``; its skewness
``S = E[(N_k − k)³] / σ³`` measures the hubness (0 for an even share, a few units for strongly
hubby data). Contextual vectors are anisotropic (Ethayarajh 2019), which makes hubs likelier.

Per layer, on a seeded sample of at most :data:`HUBNESS_MAX_POINTS` token occurrences, exact
cosine neighbours (:func:`~elmo_engine.analysis.projection.compute.exact_knn`), each point's own
entry excluded. At the context-free layer 0 the occurrences of one word are the same vector, so
they are each other's nearest neighbours (ties broken by the kNN's partition).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

# the neighbourhood size and the most tokens sampled per layer (exact kNN costs n² · D)
from elmo_engine.analysis.layers import HUBNESS_K, HUBNESS_MAX_POINTS
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

#: the hubs listed per layer
HUBNESS_TOP = 10
#: the words either side of a hub in its example context
CONTEXT_WORDS = 6


@dataclass(frozen=True)
class Hub:
    """One hub: its token, its k-occurrence and the occurrence's sentence (``[token]``
    marked, :data:`CONTEXT_WORDS` words either side)."""

    token: str
    count: int
    context: str

    def to_dict(self) -> dict:
        return {"token": self.token, "count": self.count, "context": self.context}


@dataclass(frozen=True)
class LayerHubness:
    """Hubness of one layer.

    Attributes
    ----------
    layer : the layer index (0 = the context-free token layer)
    skewness : the skewness of ``N_k`` (population moments; 0 when every ``N_k`` is equal)
    anti_hubs : the share of points with ``N_k = 0``
    max_count : the largest ``N_k``
    distribution : ``distribution[v]`` points have ``N_k = v`` (``v = 0 … max_count``)
    hubs : the :data:`HUBNESS_TOP` largest ``N_k``, largest first, each spelling once
    """

    layer: int
    skewness: float
    anti_hubs: float
    max_count: int
    distribution: Tuple[int, ...]
    hubs: Tuple[Hub, ...]

    def to_dict(self) -> dict:
        return {"layer": self.layer, "skewness": self.skewness, "anti_hubs": self.anti_hubs,
                "max_count": self.max_count, "distribution": list(self.distribution),
                "hubs": [h.to_dict() for h in self.hubs]}


@dataclass(frozen=True)
class HubnessResult:
    """Hubness of every layer on the same sample: ``k``, ``n`` points of ``n_total``, the
    sample's ``seed``, the ``metric``."""

    layers: Tuple[LayerHubness, ...]
    k: int
    n: int
    n_total: int
    seed: int
    metric: str = "cosine"

    DESCRIPTION = ("hubness (Radovanovic et al. 2010): per layer, the skewness of the "
                   "k-occurrence N_k (how many of the n sampled token occurrences have a point "
                   "among their k nearest neighbours, cosine, exact); 'anti_hubs': the share "
                   "with N_k = 0; 'distribution[v]': the points with N_k = v; 'hubs': the "
                   "largest N_k, each spelling once, with an example context")

    def to_dict(self) -> dict:
        return {"description": self.DESCRIPTION, "k": self.k, "n": self.n,
                "n_total": self.n_total, "sample_seed": self.seed, "metric": self.metric,
                "layers": [lay.to_dict() for lay in self.layers]}


def k_occurrence(x: np.ndarray, k: int, metric: str = "cosine",
                 state: Optional[TaskState] = None) -> np.ndarray:
    """``N_k (n,)`` int64 of the rows of ``x (n, D)``: how many rows have each among their
    ``k`` nearest neighbours (a row's own entry excluded). Sums to ``n · k``."""
    from elmo_engine.analysis.projection.compute import exact_knn

    n = x.shape[0]
    if not 1 <= k < n:
        raise InputError(f"k ({k}) must be in 1..{n - 1} for {n} points")
    idx, _ = exact_knn(x, k + 1, metric, state)                          # (n, k+1), self first
    return np.bincount(idx[:, 1:].ravel(), minlength=n).astype(np.int64)


def skewness(values: np.ndarray) -> float:
    """``E[(v − μ)³] / σ³`` with population moments (scipy's ``skew(bias=True)``); 0 when
    every value is the same."""
    v = np.asarray(values, np.float64)
    d = v - v.mean()
    sd = np.sqrt(np.mean(d * d))
    if sd <= 1e-12 * max(1.0, abs(float(v.mean()))):
        return 0.0
    return float(np.mean(d ** 3) / sd ** 3)


def context_of(sentence: Sequence[str], position: int, words: int = CONTEXT_WORDS) -> str:
    """``… the [bank] of the …``: ``words`` either side of ``position``."""
    lo, hi = max(0, position - words), min(len(sentence), position + words + 1)
    out = list(sentence[lo:hi])
    out[position - lo] = f"[{out[position - lo]}]"
    return ("… " if lo > 0 else "") + " ".join(out) + (" …" if hi < len(sentence) else "")


def layer_hubness(layer: int, counts: np.ndarray, words: Sequence[str],
                  contexts: Sequence[str], top: int = HUBNESS_TOP) -> LayerHubness:
    """Summarise the k-occurrences ``counts (n,)`` of one layer; ``words`` and ``contexts``
    name each point. The hubs are the ``top`` largest N_k, each spelling once (its occurrence
    with the largest N_k; ties: the earlier point): at layer 0 every occurrence of a word is
    the same vector, so one frequent word would otherwise fill the list."""
    hubs: List[Hub] = []
    seen = set()
    for i in np.argsort(-counts, kind="stable").tolist():
        if words[i] in seen:
            continue
        seen.add(words[i])
        hubs.append(Hub(words[i], int(counts[i]), contexts[i]))
        if len(hubs) == top:
            break
    return LayerHubness(int(layer), skewness(counts), float(np.mean(counts == 0)),
                        int(counts.max()), tuple(int(c) for c in np.bincount(counts)),
                        tuple(hubs))


def hubness(rows: np.ndarray, sentences: Sequence[Sequence[str]], k: int = HUBNESS_K,
            max_points: int = HUBNESS_MAX_POINTS, seed: int = 0,
            state: Optional[TaskState] = None) -> HubnessResult:
    """Hubness of every layer of ``rows (L+1, N, D)``, the activations of the tokens of
    ``sentences`` in reading order; a seeded sample of ``max_points`` tokens when there are
    more (the same tokens at every layer)."""
    n_layers, n_total = rows.shape[0], rows.shape[1]
    lengths = [len(s) for s in sentences]
    if sum(lengths) != n_total:
        raise InputError(f"{n_total} activation rows for {sum(lengths)} tokens")
    if n_total < 3:
        raise InputError(f"hubness needs at least 3 tokens, got {n_total}")
    keep = np.arange(n_total)
    if n_total > max_points:
        keep = np.sort(np.random.default_rng(seed).choice(n_total, max_points, replace=False))
    sent = np.repeat(np.arange(len(sentences)), lengths)                 # (N,) sentence of a row
    pos = np.arange(n_total) - np.repeat(np.cumsum([0] + lengths[:-1]), lengths)
    words = [sentences[s][p] for s, p in zip(sent[keep].tolist(), pos[keep].tolist())]
    contexts = [context_of(sentences[s], p) for s, p in zip(sent[keep].tolist(),
                                                             pos[keep].tolist())]
    k_used = min(int(k), len(keep) - 1)
    out: List[LayerHubness] = []
    for layer in range(n_layers):
        report(state, layer, n_layers, f"hubness of layer {layer} ({len(keep):,} tokens)")
        check(state)
        counts = k_occurrence(rows[layer, keep], k_used, "cosine", state)
        out.append(layer_hubness(layer, counts, words, contexts))
    report(state, n_layers, n_layers, "hubness done")
    return HubnessResult(tuple(out), k_used, len(keep), n_total, seed)


__all__ = ["HUBNESS_K", "HUBNESS_MAX_POINTS", "HUBNESS_TOP", "Hub", "HubnessResult",
           "LayerHubness", "context_of", "hubness", "k_occurrence", "layer_hubness",
           "skewness"]
