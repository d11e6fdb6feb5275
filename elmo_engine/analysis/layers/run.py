"""The layer analyses of one model on one corpus, end to end: what both the ``layers`` command
and the app's Layers view run.

:func:`.sample.read_sample` reads the sample of a corpus file that both analyse (the shipped
reference corpus is :func:`reference_corpus_path`); :func:`analyse_layers` embeds it a chunk at
a time and returns the contextuality measures (:mod:`.contextuality`) and the CKA matrix between
the layers (:mod:`.cka`) on a seeded sample of whole sentences, whose activations it keeps for
:func:`compare_layers` (CKA between two models on the same tokens). :func:`mdl_probe` runs the
online-code MDL probes (:mod:`.mdl`) of every layer on labelled sentences (:func:`demo_mdl_data`:
a built-in demo task).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.activations import iter_embedded
from elmo_engine.analysis.layers import (MAX_LAYERS_TOKENS, REFERENCE_CORPUS,  # noqa: F401
                                         reference_corpus_path)
from elmo_engine.analysis.layers.cka import CKAResult, cka_matrix, cross_cka
from elmo_engine.analysis.layers.contextuality import ContextualityAccumulator
from elmo_engine.analysis.layers.contextuality_result import ContextualityResult
from elmo_engine.analysis.layers.hubness import (HUBNESS_K, HUBNESS_MAX_POINTS, HubnessResult,
                                                 hubness)
from elmo_engine.analysis.layers.mdl import MDLConfig, MDLResult, online_codelength
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState

#: the built-in demo tasks an MDL probe can transmit
DEMO_MDL_TASKS = ("demo-pos", "demo-supersense", "demo-wsd")


def subset(n: int, keep: Optional[int], seed: int) -> np.ndarray:
    """Indexes of a seeded random subset of ``keep`` of ``n`` items, in order (all: None)."""
    if keep is None or keep >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=keep, replace=False))


def cka_sentences(tokens: Sequence[Sequence[str]], budget: int, seed: int) -> np.ndarray:
    """Whole sentences in a seeded random order until ``budget`` tokens (all if they fit)."""
    return sentences_within(np.array([len(s) for s in tokens], np.int64), budget, seed)


def sentences_within(lengths: np.ndarray, budget: int, seed: int) -> np.ndarray:
    """Indexes (sorted) of whole sentences of ``lengths`` taken in a seeded random order while
    their tokens fit in ``budget`` (all if they fit; at least one)."""
    if lengths.sum() <= budget:
        return np.arange(len(lengths))
    order = np.random.default_rng(seed + 1).permutation(len(lengths))
    fits = np.cumsum(lengths[order]) <= budget
    chosen = order[fits] if fits.any() else order[:1]
    return np.sort(chosen)


def gather_rows(emb, tokens, chosen: np.ndarray, state: Optional[TaskState], what: str
                ) -> np.ndarray:
    """The activations of the chosen sentences' tokens, ``(K, Σn, D)`` float32."""
    sents = [tokens[i] for i in chosen]
    out = np.empty((emb.opts.n_output_layers, sum(len(s) for s in sents),
                    2 * emb.opts.output_dim), np.float32)
    col = 0
    for _, arrays in iter_embedded(emb, sents, state, what):
        for arr in arrays:
            out[:, col:col + arr.shape[1]] = arr
            col += arr.shape[1]
    return out


@dataclass
class LayersAnalysis:
    """What :func:`analyse_layers` found: the contextuality measures, the layers' CKA matrix,
    the CKA sample (sentence indexes and their activations, ``(K, n, D)``), the hubness of
    every layer on a sample of the CKA sample's tokens (:mod:`.hubness`) and timings."""

    contextuality: ContextualityResult
    cka: CKAResult
    cka_chosen: np.ndarray
    cka_rows: np.ndarray
    timings: Dict[str, float] = field(default_factory=dict)
    hubness: Optional[HubnessResult] = None


def analyse_layers(emb, tokens: Sequence[Sequence[str]], *, min_count: int = 5,
                   baseline_samples: int = 1000, seed: int = 0, lowercase: bool = False,
                   centre_mev: bool = False, cka_tokens: int = 50_000, unbiased: bool = True,
                   hub_k: int = HUBNESS_K, hub_points: int = HUBNESS_MAX_POINTS,
                   state: Optional[TaskState] = None) -> LayersAnalysis:
    """Embed ``tokens`` with ``emb`` (an Embedder) a chunk at a time; the contextuality of every
    layer and direction over all of them, linear CKA between the layers on a seeded sample
    of whole sentences of at most ``cka_tokens`` tokens, and the hubness of every layer
    (``hub_k`` neighbours) on a seeded sample of at most ``hub_points`` of those tokens.
    Progress and cancel through ``state``."""
    k, dim = emb.opts.n_output_layers, 2 * emb.opts.output_dim
    n_tokens = sum(len(s) for s in tokens)
    if n_tokens > MAX_LAYERS_TOKENS:
        raise InputError(f"the corpus has {n_tokens:,} tokens; layers analyses at most "
                         f"{MAX_LAYERS_TOKENS:,} (its per-word activations are kept): use "
                         "--max-sentences N or a smaller file")
    acc = ContextualityAccumulator(tokens, k, dim, min_count=min_count,
                                   baseline_samples=baseline_samples, seed=seed,
                                   lowercase=lowercase, centre_mev=centre_mev)
    chosen = cka_sentences(tokens, cka_tokens, seed)
    slot = np.full(len(tokens), -1)
    slot[chosen] = np.arange(len(chosen))
    offsets = np.concatenate([[0], np.cumsum([len(tokens[i]) for i in chosen])]).astype(int)
    rows = np.empty((k, int(offsets[-1]), dim), np.float32)
    t_embed = t_add = 0.0
    t0 = time.perf_counter()
    for start, arrays in iter_embedded(emb, tokens, state, "corpus"):
        t1 = time.perf_counter()
        t_embed += t1 - t0
        acc.add(arrays)
        for j, arr in enumerate(arrays):
            s = slot[start + j]
            if s >= 0:
                rows[:, offsets[s]:offsets[s + 1]] = arr
        t0 = time.perf_counter()
        t_add += t0 - t1
    ctx = acc.result(state)
    timings = {"embedding_s": t_embed, "contextuality_s": t_add + time.perf_counter() - t0}
    t0 = time.perf_counter()
    names = [f"layer {i}" for i in range(k)]
    cka = CKAResult(cka_matrix(rows, unbiased, state=state), names, names, unbiased,
                    rows.shape[1], len(chosen))
    timings["cka_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    hubs = hubness(rows, [tokens[i] for i in chosen], hub_k, hub_points, seed, state)
    timings["hubness_s"] = time.perf_counter() - t0
    return LayersAnalysis(ctx, cka, chosen, rows, timings, hubs)


def compare_layers(emb_b, tokens: Sequence[Sequence[str]], analysis: LayersAnalysis,
                   state: Optional[TaskState] = None) -> Dict[str, CKAResult]:
    """CKA between the layers of model A (``analysis``) and model B (``emb_b``) on the same
    tokens (A's CKA sample): ``{"cka": rows A × columns B, "cka_self": B's own layer matrix}``."""
    a = analysis.cka
    rows_b = gather_rows(emb_b, tokens, analysis.cka_chosen, state, "model B")
    names_b = [f"B layer {i}" for i in range(emb_b.opts.n_output_layers)]
    cross = CKAResult(cross_cka(analysis.cka_rows, rows_b, a.unbiased, state=state),
                      [f"A {n}" for n in a.rows], names_b, a.unbiased, a.n_tokens, a.n_sentences)
    own = CKAResult(cka_matrix(rows_b, a.unbiased, state=state), names_b, names_b, a.unbiased,
                    a.n_tokens, a.n_sentences)
    return {"cka": cross, "cka_self": own}


def demo_mdl_data(task: str) -> Tuple[list, str]:
    """The labelled sentences of a built-in demo task (``demo-pos``, ``demo-supersense``,
    ``demo-wsd``; all three splits) and a description of where they came from."""
    from elmo_engine.io.datasets import demo

    if task not in DEMO_MDL_TASKS:
        raise InputError(f"unknown demo task {task!r}; choose one of {', '.join(DEMO_MDL_TASKS)}")
    name = task[len("demo-"):]
    sents = [s for split in demo.SPLITS for s in demo.load_demo_task(name, split)]
    return sents, f"built-in demo task '{name}' (train + dev + test)"


def mdl_probe(emb, sents: list, task: str, source: str, *, label: str = "label",
              max_sentences: Optional[int] = None, seed: int = 0, device: str = "cpu",
              state: Optional[TaskState] = None) -> MDLResult:
    """Online-code MDL probes of every layer (and the mix) on labelled sentences: each labelled
    token's activations are the features. ``demo-wsd`` codes each sense among its lemma's
    senses. ``max_sentences``: a seeded random subset."""
    sents = [s for s in sents if any(lab is not None for lab in s.labels)]
    sents = [sents[i] for i in subset(len(sents), max_sentences, seed)]
    if not sents:
        raise InputError(f"{source}: no labelled tokens")
    tokens = [list(s.tokens) for s in sents]
    feats = gather_rows(emb, tokens, np.arange(len(tokens)), state, "MDL data")
    starts = np.concatenate([[0], np.cumsum([len(t) for t in tokens])])
    cols, labels = [], []
    for s, a in zip(sents, starts):
        for i, lab in s.targets():
            cols.append(a + i)
            labels.append(lab)
    feats = feats[:, np.asarray(cols)]
    groups = None
    if task == "demo-wsd":                  # each sense among its lemma's senses
        from elmo_engine.io.datasets.wordnet import parse_sense_key

        groups = ["#".join(parse_sense_key(lab)[:2]) for lab in labels]
    result = online_codelength(feats, labels, groups=groups,
                               config=MDLConfig(seed=seed, device=str(device)), state=state)
    result.extra = {"task": task, "source": source, "label": label, "sentences": len(sents)}
    return result


__all__ = ["DEMO_MDL_TASKS", "LayersAnalysis", "analyse_layers", "cka_sentences",
           "compare_layers", "demo_mdl_data", "gather_rows", "mdl_probe",
           "reference_corpus_path", "sentences_within", "subset"]
