"""Sense-labelled evaluations per layer: induced-sense purity on SemCor lemmas, and the
nearest-neighbour word sense disambiguation of Peters et al. 2018, §5.3.

* :func:`semcor_induction` — for the most frequent polysemous SemCor lemmas, cluster their
  occurrences per layer (:func:`.senses.cluster_layer`) and score the clusters against the gold
  senses (purity, adjusted Rand index), beside the purity of one cluster (the majority sense).
* :func:`wsd_nn` — Peters et al.'s nearest-neighbour WSD (after Melamud et al. 2016): a sense's
  representation is the mean of its SemCor occurrences' unit vectors in a layer; a test
  occurrence takes the sense, among its lemma's WordNet candidates that have a representation,
  whose representation is nearest by cosine, and WordNet's first sense when none has. Scored
  as Raganato et al. (2017): a prediction is right when it is one of the gold keys; precision,
  recall and F1 over all instances (every instance with a candidate gets an answer).

Vectors are those of the instance's first token (a multiword expression's head word).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.embed.embedder import Embedder
from elmo_engine.index.senses import K_MAX, LayerSenses, Occurrence, cluster_layer
from elmo_engine.io.datasets.records import WsdInstance, WsdSentence
from elmo_engine.progress import TaskState, check, report


def instance_vectors(sentences: Sequence[WsdSentence], embedder: Embedder,
                     layers: Sequence[int], state: Optional[TaskState] = None,
                     chunk: int = 256, want=lambda inst: True
                     ) -> Tuple[List[Tuple[int, WsdInstance]], Dict[int, np.ndarray]]:
    """``[(sentence index, instance)]`` of the wanted instances and, per layer, their unit
    vectors ``(n_instances, D)`` (float32), embedding ``chunk`` sentences at a time."""
    keep: List[Tuple[int, WsdInstance]] = []
    parts: Dict[int, List[np.ndarray]] = {layer: [] for layer in layers}
    todo = [i for i, s in enumerate(sentences) if any(want(x) for x in s.instances)]
    for n, start in enumerate(range(0, len(todo), chunk)):
        check(state)
        idx = todo[start:start + chunk]
        arrays = embedder.embed([list(sentences[i].tokens) for i in idx])     # (L+1, n_i, D)
        for i, acts in zip(idx, arrays):
            insts = [x for x in sentences[i].instances if want(x)]
            keep.extend((i, x) for x in insts)
            for layer in layers:
                parts[layer].append(acts[layer, [x.start for x in insts]])
        report(state, min(len(todo), start + chunk), len(todo), "embedding sentences")
    vecs = {}
    for layer in layers:
        v = np.concatenate(parts[layer]) if parts[layer] else np.zeros((0, 1), np.float32)
        vecs[layer] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return keep, vecs


# ---- induced senses on SemCor ----------------------------------------------------------------
@dataclass(frozen=True)
class LemmaInduction:
    lemma: str
    pos: str
    n: int
    n_senses: int
    majority_purity: float               # purity of a single cluster: the commonest sense's share
    layers: Tuple[LayerSenses, ...]


def pick_lemmas(sentences: Sequence[WsdSentence], n_lemmas: int, min_count: int = 40,
                min_sense: int = 5) -> List[Tuple[str, str]]:
    """The ``n_lemmas`` commonest ``(lemma, pos)`` with at least ``min_count`` occurrences and
    two senses of at least ``min_sense`` occurrences each (frequency order, then name)."""
    senses: Dict[Tuple[str, str], Counter] = defaultdict(Counter)
    for s in sentences:
        for x in s.instances:
            if x.keys:
                senses[(x.lemma, x.pos)][x.keys[0]] += 1
    ok = [(sum(c.values()), lp) for lp, c in senses.items()
          if sum(c.values()) >= min_count and sum(v >= min_sense for v in c.values()) >= 2]
    return [lp for _, lp in sorted(ok, key=lambda p: (-p[0], p[1]))[:n_lemmas]]


def semcor_induction(sentences: Sequence[WsdSentence], embedder: Embedder,
                     layers: Sequence[int], n_lemmas: int = 40, max_occurrences: int = 300,
                     k_max: int = K_MAX, seed: int = 0, state: Optional[TaskState] = None
                     ) -> List[LemmaInduction]:
    """Induced senses of the commonest polysemous lemmas, scored per layer."""
    lemmas = set(pick_lemmas(sentences, n_lemmas))
    keep, vecs = instance_vectors(sentences, embedder, layers, state,
                                  want=lambda x: bool(x.keys) and (x.lemma, x.pos) in lemmas)
    by: Dict[Tuple[str, str], List[int]] = defaultdict(list)
    for j, (_, x) in enumerate(keep):
        by[(x.lemma, x.pos)].append(j)
    rng = np.random.default_rng(seed)
    out = []
    for (lemma, pos), js in sorted(by.items(), key=lambda p: (-len(p[1]), p[0])):
        check(state)
        if len(js) > max_occurrences:
            js = sorted(rng.choice(js, max_occurrences, replace=False).tolist())
        gold = [keep[j][1].keys[0] for j in js]
        occs = [Occurrence(keep[j][0], keep[j][1].start, sentences[keep[j][0]].tokens)
                for j in js]
        res = tuple(cluster_layer(layer, vecs[layer][js], occs, k_max, seed, gold)
                    for layer in layers)
        counts = Counter(gold)
        out.append(LemmaInduction(lemma, pos, len(js), len(counts),
                                  counts.most_common(1)[0][1] / len(js), res))
    return out


# ---- nearest-neighbour WSD -------------------------------------------------------------------
@dataclass(frozen=True)
class WsdLayerScore:
    layer: int
    precision: float
    recall: float
    f1: float
    n: int                                 # test instances
    backoff: int                           # answered by the first sense (no representation)


@dataclass(frozen=True)
class WsdNNResult:
    layers: Tuple[WsdLayerScore, ...]
    first_sense: WsdLayerScore             # the baseline, ``layer`` = -1
    n_train_instances: int
    n_senses: int                          # senses with a representation


def sense_representations(train: Sequence[WsdSentence], embedder: Embedder,
                          layers: Sequence[int], state: Optional[TaskState] = None
                          ) -> Tuple[Dict[int, Dict[str, np.ndarray]], int]:
    """Per layer, ``{sense key: mean unit vector}`` over the training occurrences (an
    instance with several gold keys counts for each)."""
    keep, vecs = instance_vectors(train, embedder, layers, state, want=lambda x: bool(x.keys))
    reps: Dict[int, Dict[str, np.ndarray]] = {}
    for layer in layers:
        sums: Dict[str, np.ndarray] = {}
        counts: Counter = Counter()
        for j, (_, x) in enumerate(keep):
            for key in x.keys:
                if key in sums:
                    sums[key] += vecs[layer][j]
                else:
                    sums[key] = vecs[layer][j].astype(np.float64).copy()
                counts[key] += 1
        reps[layer] = {k: (v / counts[k]).astype(np.float32) for k, v in sums.items()}
    return reps, len(keep)


def _score(layer: int, predicted: Iterable[Optional[str]], gold: Sequence[Tuple[str, ...]],
           backoff: int) -> WsdLayerScore:
    pred = list(predicted)
    answered = sum(p is not None for p in pred)
    right = sum(p is not None and p in g for p, g in zip(pred, gold))
    p = right / answered if answered else 0.0
    r = right / len(gold) if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return WsdLayerScore(layer, p, r, f, len(gold), backoff)


def wsd_nn(train: Sequence[WsdSentence], test: Sequence[WsdSentence], embedder: Embedder,
           layers: Sequence[int], state: Optional[TaskState] = None) -> WsdNNResult:
    """Peters et al. 2018 §5.3 per layer (test instances need ``candidates``: read them with a
    WordNet)."""
    reps, n_train = sense_representations(train, embedder, layers, state)
    keep, vecs = instance_vectors(test, embedder, layers, state, want=lambda x: bool(x.keys))
    gold = [x.keys for _, x in keep]
    first = [x.candidates[0] if x.candidates else None for _, x in keep]
    scores = []
    for layer in layers:
        pred, backoff = [], 0
        for j, (_, x) in enumerate(keep):
            seen = [c for c in x.candidates if c in reps[layer]]
            if not seen:
                pred.append(first[j])
                backoff += first[j] is not None
                continue
            mat = np.stack([reps[layer][c] for c in seen])                     # (S, D)
            cos = mat @ vecs[layer][j] / np.maximum(np.linalg.norm(mat, axis=1), 1e-12)
            pred.append(seen[int(np.argmax(cos))])
        scores.append(_score(layer, pred, gold, backoff))
    base = _score(-1, first, gold, sum(f is not None for f in first))
    return WsdNNResult(tuple(scores), base, n_train, len(reps[layers[0]]) if layers else 0)
