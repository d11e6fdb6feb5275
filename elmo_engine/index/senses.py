"""Sense induction: a word's occurrences clustered per layer, each cluster shown by its most
typical sentences and its most distinctive context words; purity and ARI against sense labels.

* Clustering: k-means on unit-length vectors (cosine geometry), ``k`` from 2 to ``k_max`` chosen
  by the mean silhouette (Rousseeuw 1987) with cosine distance — the number of senses comes from
  the data, per layer, as in the per-layer sense analyses of Peters et al. 2018 (§5.3) and the
  sense-cluster studies of Wiedemann et al. 2019 (*Does BERT make any sense?*).
* Typical sentences: the occurrences nearest their cluster's centroid.
* Distinctive context words: the log-odds ratio with an informative Dirichlet prior, as a
  z-score (Monroe, Colaresi & Quinn 2008, *Fightin' words*), of the words within ``window``
  tokens of the occurrence, in the cluster against the other clusters.
* With gold sense labels (SemCor): purity (the share of occurrences in their cluster's majority
  sense) and the adjusted Rand index (Hubert & Arabie 1985) per layer.

The functions take plain arrays and token lists, so that the CLI, the app's Corpus view and the
SemCor evaluation (:mod:`.sense_eval`) share them; :func:`induce_from_index` reads an index.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of the word: its sentence (tokens) and position; ``sentence_id`` is the
    index's (or the data set's running number)."""

    sentence_id: int
    position: int
    tokens: Tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


@dataclass(frozen=True)
class SenseCluster:
    label: int
    size: int
    typical: Tuple[int, ...]                       # occurrence indices, most typical first
    context_words: Tuple[Tuple[str, float], ...]   # (word, log-odds z-score), most distinctive
    majority: Optional[str] = None                 # the commonest gold sense, when labelled


@dataclass(frozen=True)
class LayerSenses:
    layer: int
    k: int
    silhouette: float                              # at the chosen k (nan for k = 1)
    silhouettes: Tuple[Tuple[int, float], ...]     # (k, silhouette) for every k tried
    labels: Tuple[int, ...]                        # cluster of each occurrence
    clusters: Tuple[SenseCluster, ...]
    purity: Optional[float] = None
    ari: Optional[float] = None


@dataclass(frozen=True)
class SenseInduction:
    word: str
    occurrences: Tuple[Occurrence, ...]
    layers: Tuple[LayerSenses, ...]
    n_total: int                                   # occurrences in the corpus (before sampling)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


#: the fewest occurrences a sense cluster may have: a "sense" of 2 or 3 occurrences is noise the
#: silhouette rewards (its typical sentences and distinctive words say nothing), so a k whose
#: smallest cluster is smaller is not chosen, and fewer than twice this many occurrences make one
#: cluster
MIN_CLUSTER_SIZE = 5
#: the most clusters tried by default (``senses``, the Corpus view's Senses tab)
K_MAX = 8


def choose_clusters(x: np.ndarray, k_max: int = K_MAX, seed: int = 0,
                    min_size: int = MIN_CLUSTER_SIZE
                    ) -> Tuple[np.ndarray, float, Tuple[Tuple[int, float], ...]]:
    """k-means labels for ``x`` ``(N, D)`` with ``k`` chosen by the cosine silhouette among the
    ``k`` whose every cluster has at least ``min_size`` occurrences.

    Returns ``(labels (N,), silhouette at k, ((k, silhouette), …))`` (every k tried, chosen or
    not); fewer than 4 points or ``2 · min_size``, all identical, or no k with clusters that
    big give one cluster."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    x = _unit(x)
    n = len(x)
    distinct = len(np.unique(np.round(x, 4), axis=0))   # the token layer repeats word forms
    if n < max(4, 2 * min_size) or distinct < 2:
        return np.zeros(n, np.int64), float("nan"), ()
    sample = min(n, 2000)
    best, tried = None, []
    for k in range(2, min(k_max, n - 1, distinct) + 1):
        labels = KMeans(k, n_init=4, random_state=seed).fit_predict(x)
        if len(set(labels.tolist())) < 2:
            continue
        s = float(silhouette_score(x, labels, metric="cosine", sample_size=sample,
                                   random_state=seed))
        tried.append((k, s))
        if np.bincount(labels).min() >= min_size and (best is None or s > best[1]):
            best = (labels, s)
    if best is None:
        return np.zeros(n, np.int64), float("nan"), tuple(tried)
    return best[0].astype(np.int64), best[1], tuple(tried)


def _stop_words() -> frozenset:
    """English stop words (scikit-learn's list, 318 words) and clitics ("'s", "n't")."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | {"'s", "’s", "n't", "n’t", "'re", "'ll", "'ve", "'d",
                                            "'m", "s", "t"}


def is_label_word(word: str, stop: frozenset) -> bool:
    """Whether a context word may label a cluster: a word with a letter or a digit, not a stop
    word (the words every sense shares say nothing about one)."""
    return any(c.isalnum() for c in word) and word not in stop and len(word) > 1


def _contexts(occ: Occurrence, window: int, stop: frozenset = frozenset()) -> List[str]:
    lo, hi = max(0, occ.position - window), occ.position + window + 1
    word = occ.tokens[occ.position].casefold()
    return [t.casefold() for i, t in enumerate(occ.tokens[lo:hi], lo)
            if i != occ.position and t.casefold() != word and is_label_word(t.casefold(), stop)]


def distinctive_words(occs: Sequence[Occurrence], labels: np.ndarray, cluster: int,
                      window: int = 5, top: int = 8, prior: float = 10.0,
                      min_count: int = 2) -> Tuple[Tuple[str, float], ...]:
    """Words near the occurrences of ``cluster`` that mark it against the other clusters: the
    log-odds z-score with the informative Dirichlet prior of Monroe et al. (2008, eq. 22; the
    prior's mass ``prior`` spread by each word's share of all contexts), highest first, z > 0;
    stop words and punctuation are left out (:func:`is_label_word`)."""
    stop = _stop_words()
    inside: Counter = Counter()
    outside: Counter = Counter()
    for occ, lab in zip(occs, labels):
        (inside if lab == cluster else outside).update(_contexts(occ, window, stop))
    n_in, n_out = sum(inside.values()), sum(outside.values())
    n_all = n_in + n_out
    scored = []
    for w, y_i in inside.items():
        if y_i < min_count:
            continue
        y_j = outside.get(w, 0)
        a = prior * (y_i + y_j) / n_all
        d = (math.log((y_i + a) / (n_in + prior - y_i - a))
             - math.log((y_j + a) / (n_out + prior - y_j - a)))
        z = d / math.sqrt(1 / (y_i + a) + 1 / (y_j + a))
        if z > 0:
            scored.append((w, round(z, 3)))
    scored.sort(key=lambda p: (-p[1], p[0]))
    return tuple(scored[:top])


def purity(labels: "Sequence[int] | np.ndarray", gold: Sequence[str]) -> float:
    by: Dict[int, Counter] = {}
    for lab, g in zip(labels, gold):
        by.setdefault(lab, Counter())[g] += 1
    return sum(c.most_common(1)[0][1] for c in by.values()) / max(1, len(gold))


def cluster_layer(layer: int, x: np.ndarray, occs: Sequence[Occurrence], k_max: int = K_MAX,
                  seed: int = 0, gold: Optional[Sequence[str]] = None, typical: int = 3,
                  window: int = 5) -> LayerSenses:
    """Cluster one layer's vectors ``x`` ``(N, D)`` of the occurrences ``occs``."""
    from sklearn.metrics import adjusted_rand_score

    x = _unit(x)
    labels, sil, tried = choose_clusters(x, k_max, seed)
    clusters = []
    for c in range(int(labels.max()) + 1 if len(labels) else 0):
        members = np.flatnonzero(labels == c)
        centre = x[members].mean(0)
        near = members[np.argsort(-(x[members] @ centre), kind="stable")[:typical]]
        maj = Counter(gold[int(i)] for i in members).most_common(1)[0][0] if gold else None
        clusters.append(SenseCluster(c, len(members), tuple(int(i) for i in near),
                                     distinctive_words(occs, labels, c, window), maj))
    pur = ari = None
    if gold is not None:
        pur = purity(labels, gold)
        ari = float(adjusted_rand_score(gold, labels))
    return LayerSenses(layer, len(clusters), sil, tried, tuple(int(v) for v in labels),
                       tuple(clusters), pur, ari)


def align_layers(layers: Sequence[LayerSenses]) -> Tuple[LayerSenses, ...]:
    """The clusters of each layer renumbered to match the layer before: the pairing that shares
    the most occurrences (Hungarian assignment on the contingency table) keeps the previous
    layer's number, a cluster with no partner takes a number no cluster had before; clusters in
    number order. So "cluster 2" is, as far as the data allow, one sense in every layer (numbers
    may then skip: layer 1's clusters 1, 2, 3 may be layer 2's clusters 1 and 3)."""
    from scipy.optimize import linear_sum_assignment

    out: List[LayerSenses] = []
    top = -1                                       # the highest number given so far
    for ls in layers:
        if not ls.clusters:
            out.append(ls)
            continue
        cur = np.asarray(ls.labels, np.int64)
        if not out or not out[-1].clusters:
            new = {c.label: c.label for c in ls.clusters}
        else:
            prev = np.asarray(out[-1].labels, np.int64)
            table = np.zeros((int(cur.max()) + 1, int(prev.max()) + 1), np.int64)
            np.add.at(table, (cur, prev), 1)
            rows, cols = linear_sum_assignment(-table)
            new = {int(r): int(c) for r, c in zip(rows, cols) if table[r, c] > 0}
            for c in ls.clusters:
                if c.label not in new:
                    top += 1
                    new[c.label] = top
        top = max(top, *new.values())
        clusters = sorted((SenseCluster(new[c.label], c.size, c.typical, c.context_words,
                                        c.majority) for c in ls.clusters),
                          key=lambda c: c.label)
        out.append(LayerSenses(ls.layer, ls.k, ls.silhouette, ls.silhouettes,
                               tuple(new[int(v)] for v in cur), tuple(clusters), ls.purity,
                               ls.ari))
    return tuple(out)


def induce_from_index(index, word: str, layers: Optional[Sequence[int]] = None,
                      k_max: int = K_MAX, max_occurrences: int = 2000, seed: int = 0,
                      state: Optional[TaskState] = None) -> SenseInduction:
    """Sense induction over ``word``'s occurrences in a :class:`~.search.CorpusIndex` (an even
    sample of ``max_occurrences`` when there are more)."""
    rows = index.rows_of(word)
    if len(rows) == 0:
        raise InputError(f"'{word}' does not occur in the index", path=index.folder)
    n_total = len(rows)
    if len(rows) > max_occurrences:
        pick = np.random.default_rng(seed).choice(len(rows), max_occurrences, replace=False)
        rows = rows[np.sort(pick)]
    occs = tuple(Occurrence(sid, pos, tuple(text.split(" ")))
                 for _, sid, pos, _, text in index.tokens_at(rows))
    layers = list(index.layers if layers is None else [index.layer(v) for v in layers])
    out = []
    for i, layer in enumerate(layers):
        check(state)
        report(state, i, len(layers), f"clustering layer {layer}")
        x = np.asarray(index.vectors[layer][rows], np.float32)         # (N, D)
        out.append(cluster_layer(layer, x, occs, k_max, seed))
    report(state, len(layers), len(layers), "done")
    return SenseInduction(word, occs, align_layers(out), n_total)


class _Induced(Protocol):
    """What :func:`layer_summary` reads: one word's senses per layer (a :class:`SenseInduction`
    or :class:`~elmo_engine.index.sense_eval.LemmaInduction`)."""

    @property
    def layers(self) -> Sequence[LayerSenses]: ...


def layer_summary(results: Sequence[_Induced]) -> Dict[int, Dict[str, float]]:
    """Mean purity, ARI and k per layer over several words' inductions (labelled ones)."""
    acc: Dict[int, Dict[str, list]] = {}
    for r in results:
        for ls in r.layers:
            d = acc.setdefault(ls.layer, {"purity": [], "ari": [], "k": []})
            if ls.purity is not None:
                d["purity"].append(ls.purity)
                d["ari"].append(ls.ari)
            d["k"].append(ls.k)
    return {layer: {name: float(np.mean(v)) if v else float("nan") for name, v in d.items()}
            for layer, d in sorted(acc.items())}
