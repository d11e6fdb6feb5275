"""Probe inputs: per-layer feature arrays of labelled tokens, control labels, and metrics.

The biLM runs once per sentence (through the :class:`~elmo_engine.embed.embedder.Embedder`, which
caches activations); only the labelled tokens' vectors are kept, as one ``(K, N, 2P)`` float32 array
(``K = L+1`` layers, ``N`` labelled tokens). Control labels follow Hewitt & Liang (2019): every word
type gets one random label drawn from the task's label distribution, so a probe can only reach them
by memorising word identity.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.activations import iter_embedded
from elmo_engine.io.datasets.records import LabelledSentence, WsdSentence
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState

#: sentences embedded per call (the embedder sorts them by length and batches inside; this bounds
#: the memory held at once)
EMBED_CHUNK = 2048
#: more labelled tokens than this are stored as float16 (full SemCor: 226 k × 3 layers × 2P)
HALF_ABOVE = 50_000


@dataclass
class Examples:
    """Labelled tokens of one split with their per-layer vectors.

    Attributes
    ----------
    features : (K, N, D) float32, one vector per layer per example
    labels : N gold labels (for WSD: the first gold sense key)
    types : N word types (lower-cased form) — what the control task keys on
    gold : N tuples of acceptable labels (WSD: every gold key; tagging: ``(label,)``)
    groups : N lemma keys ``lemma#POS`` (WSD) or empty strings (tagging)
    first_sense : N WordNet first senses (WSD) or None
    n_sentences : the sentences these examples come from
    candidates : N tuples of the lemma's WordNet senses (WSD; empty when unknown)
    """

    features: np.ndarray
    labels: List[str]
    types: List[str]
    gold: List[Tuple[str, ...]] = field(default_factory=list)
    groups: List[str] = field(default_factory=list)
    first_sense: List[Optional[str]] = field(default_factory=list)
    n_sentences: int = 0
    candidates: List[Tuple[str, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.labels)
        if not self.candidates:
            self.candidates = [()] * n
        if not self.gold:
            self.gold = [(lab,) for lab in self.labels]
        if not self.groups:
            self.groups = [""] * n
        if not self.first_sense:
            self.first_sense = [None] * n
        if self.features.ndim != 3 or self.features.shape[1] != n:
            raise ValueError(f"features {self.features.shape} do not match {n} labels")
        if not (len(self.types) == len(self.gold) == len(self.groups) == len(self.first_sense)
                == len(self.candidates) == n):
            raise ValueError("Examples fields differ in length")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def n_layers(self) -> int:
        return self.features.shape[0]

    def with_labels(self, labels: Sequence[str]) -> "Examples":
        """The same examples (shared features) with other labels (the control task)."""
        return Examples(self.features, list(labels), self.types, [(lab,) for lab in labels],
                        self.groups, self.first_sense, self.n_sentences, self.candidates)


def _gather(embedder, sentences: Sequence[Sequence[str]], spans: Sequence[Sequence[Tuple[int, int]]],
            state: Optional[TaskState], what: str) -> np.ndarray:
    """Embed sentences in chunks; return the mean vector of every span, (K, N, D) float32, or
    float16 above :data:`HALF_ABOVE` spans (only the target vectors are kept)."""
    n_targets = sum(len(s) for s in spans)
    dtype = np.float16 if n_targets > HALF_ABOVE else np.float32
    out: Optional[np.ndarray] = None
    col = 0
    for start, arrays in iter_embedded(embedder, sentences, state, what, EMBED_CHUNK):
        for arr, sp in zip(arrays, spans[start:start + EMBED_CHUNK]):
            if out is None:
                out = np.empty((arr.shape[0], n_targets, arr.shape[2]), dtype)       # (K, N, D)
            for a, b in sp:
                out[:, col] = arr[:, a] if b == a + 1 else arr[:, a:b].mean(axis=1)  # (K, D)
                col += 1
    if out is None:
        raise InputError(f"the {what} data has no labelled tokens")
    return out


def tagging_examples(embedder, sentences: Sequence[LabelledSentence],
                     state: Optional[TaskState] = None, what: str = "data") -> Examples:
    """Examples for a token-labelling task (POS, dependency relation, TSV labels).

    Every token with a label (not ``None``) becomes one example; unlabelled tokens still give
    context to the biLM.
    """
    keep = [s for s in sentences if any(lab is not None for lab in s.labels)]
    if not keep:
        raise InputError(f"the {what} data has no labelled tokens")
    spans = [[(i, i + 1) for i, _ in s.targets()] for s in keep]
    feats = _gather(embedder, [s.tokens for s in keep], spans, state, what)
    labels = [lab for s in keep for _, lab in s.targets()]
    types = [s.tokens[i].lower() for s in keep for i, _ in s.targets()]
    return Examples(feats, labels, types, n_sentences=len(keep))


def wsd_examples(embedder, sentences: Sequence[WsdSentence], state: Optional[TaskState] = None,
                 what: str = "data", need_keys: bool = True,
                 first_sense_fn: Optional[Callable[[str, str], Optional[str]]] = None) -> Examples:
    """Examples for word-sense disambiguation: one per instance (mean over a multiword span).

    Parameters
    ----------
    need_keys : skip instances without a gold key (they cannot be trained on or scored)
    first_sense_fn : ``(lemma, pos) -> key`` for instances without WordNet candidates
    """
    kept: List[WsdSentence] = []
    spans, labels, gold, groups, first, types, cands = [], [], [], [], [], [], []
    for s in sentences:
        insts = [i for i in s.instances if i.keys or not need_keys]
        if not insts:
            continue
        kept.append(s)
        spans.append([(i.start, i.stop) for i in insts])
        for i in insts:
            labels.append(i.keys[0] if i.keys else "")
            gold.append(tuple(i.keys))
            groups.append(lemma_group(i.lemma, i.pos))
            fs = i.candidates[0] if i.candidates else (
                first_sense_fn(i.lemma, i.pos) if first_sense_fn else None)
            first.append(fs)
            types.append(" ".join(s.tokens[i.start:i.stop]).lower())
            cands.append(tuple(i.candidates))
    if not kept:
        raise InputError(f"the {what} data has no sense-annotated instances"
                         + (" (was the gold key file given?)" if need_keys else ""))
    feats = _gather(embedder, [s.tokens for s in kept], spans, state, what)
    return Examples(feats, labels, types, gold, groups, first, n_sentences=len(kept),
                    candidates=cands)


def lemma_group(lemma: str, pos: str) -> str:
    """The key senses are grouped by: lower-cased lemma and coarse POS (``bank#NOUN``)."""
    return f"{lemma.lower()}#{pos.upper()}"


def subsample(items: Sequence, n: Optional[int], seed: int) -> list:
    """A seeded random subset of ``n`` items, in their original order (all if ``n`` is None)."""
    items = list(items)
    if n is None or n >= len(items):
        return items
    if n < 1:
        raise InputError(f"cannot keep {n} sentences; give a positive number")
    idx = np.sort(np.random.default_rng(seed).choice(len(items), size=n, replace=False))
    return [items[i] for i in idx]


def split_off(items: Sequence, fraction: float, seed: int) -> Tuple[list, list]:
    """Split sentences into (rest, held-out) with a seeded shuffle; held-out gets ``fraction``."""
    items = list(items)
    if len(items) < 2:
        raise InputError("need at least two training sentences to hold out a dev split")
    n_dev = min(len(items) - 1, max(1, int(round(fraction * len(items)))))
    perm = np.random.default_rng(seed).permutation(len(items))
    dev = set(perm[:n_dev].tolist())
    return ([x for i, x in enumerate(items) if i not in dev],
            [x for i, x in enumerate(items) if i in dev])


# ---- control task (Hewitt & Liang 2019) ----------------------------------------------------------
def _unit(seed: int, key: str) -> float:
    """A reproducible uniform number in [0, 1) for (seed, key), independent of order."""
    h = hashlib.sha256(f"{seed}\x1f{key}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64


class ControlTask:
    """Word type → random label (Hewitt & Liang 2019).

    Tagging: drawn from the training label distribution. Word sense: for each word type (form
    within its lemma), one of the lemma's WordNet candidate senses, uniformly — so the control
    asks "which sense was this form given at random?", answerable only by remembering the form;
    lemmas without known candidates draw from their training senses. The same type always gets
    the same control label, in every split; types never seen in training get one too.

    Parameters
    ----------
    train : the training examples (their label distribution is kept)
    seed : the control task's seed
    """

    def __init__(self, train: Examples, seed: int = 0):
        self.seed = seed
        self._dists: Dict[str, Tuple[List[str], np.ndarray]] = {}
        by_group: Dict[str, Counter] = {}
        for g, lab in zip(train.groups, train.labels):
            by_group.setdefault(g, Counter())[lab] += 1
        for g, counts in by_group.items():
            labs = sorted(counts)
            cdf = np.cumsum([counts[x] for x in labs], dtype=np.float64)
            self._dists[g] = (labs, cdf / cdf[-1])

    def label(self, word_type: str, group: str = "", candidates: Tuple[str, ...] = ()
              ) -> Optional[str]:
        """The control label of a type (``None`` if its group has no training labels and no
        candidates)."""
        if candidates:
            u = _unit(self.seed, f"{group}\x1f{word_type}")
            return sorted(candidates)[min(int(u * len(candidates)), len(candidates) - 1)]
        dist = self._dists.get(group)
        if dist is None:
            return None
        labs, cdf = dist
        u = _unit(self.seed, f"{group}\x1f{word_type}")
        return labs[min(int(np.searchsorted(cdf, u, side="right")), len(labs) - 1)]

    def relabel(self, ex: Examples) -> Examples:
        """The examples with control labels (examples of unseen groups keep their gold label,
        which no probe can predict either: they go to the fallback)."""
        labs = []
        for t, g, lab, cand in zip(ex.types, ex.groups, ex.labels, ex.candidates):
            c = self.label(t, g, cand)
            labs.append(lab if c is None else c)
        return ex.with_labels(labs)


# ---- metrics -------------------------------------------------------------------------------------
def classification_scores(gold: Sequence[Tuple[str, ...]], pred: Sequence[Optional[str]]
                          ) -> Dict[str, Any]:
    """Accuracy / WSD precision-recall-F1, macro-F1 and per-label scores.

    ``gold`` holds the acceptable labels of each example; ``pred`` a label or ``None`` (no
    answer). Precision = correct / attempted, recall = correct / total, F1 their harmonic mean
    (Raganato et al.'s scorer); with an answer for every example all three equal the accuracy.
    Per-label scores use the first gold label.
    """
    n = len(gold)
    correct = sum(1 for g, p in zip(gold, pred) if p is not None and p in g)
    attempted = sum(1 for p in pred if p is not None)
    precision = correct / attempted if attempted else 0.0
    recall = correct / n if n else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    tp: Counter = Counter()
    n_pred: Counter = Counter()
    n_gold: Counter = Counter()
    for g, p in zip(gold, pred):
        first = g[0] if g else ""
        n_gold[first] += 1
        if p is not None:
            n_pred[p] += 1
            if p in g:
                tp[first] += 1
    per_label = {}
    for lab in sorted(n_gold):
        p_ = tp[lab] / n_pred[lab] if n_pred[lab] else 0.0
        r_ = tp[lab] / n_gold[lab]
        per_label[lab] = {"precision": p_, "recall": r_,
                          "f1": 2 * p_ * r_ / (p_ + r_) if p_ + r_ else 0.0, "support": n_gold[lab]}
    macro = float(np.mean([v["f1"] for v in per_label.values()])) if per_label else 0.0
    return {"accuracy": recall, "precision": precision, "recall": recall, "f1": f1,
            "macro_f1": macro, "attempted": attempted, "correct": correct, "total": n,
            "per_label": per_label}


def majority_baseline(train: Examples, test: Examples, per_lemma: bool = False
                      ) -> Dict[str, float]:
    """Baselines: the majority label; per word type (tagging) or per lemma (WSD) majority label
    with the global / first-sense fallback; and WordNet's first sense (WSD). ``per_lemma``: WSD
    scores are the mean of the per-lemma accuracies (see :func:`per_group_accuracy`)."""
    overall = Counter(train.labels).most_common(1)[0][0]
    out: Dict[str, float] = {}
    wsd = any(g for g in train.groups)
    key_train = train.groups if wsd else train.types
    key_test = test.groups if wsd else test.types
    per: Dict[str, Counter] = {}
    for k, lab in zip(key_train, train.labels):
        per.setdefault(k, Counter())[lab] += 1
    if wsd:
        mfs = [per[g].most_common(1)[0][0] if g in per else fs
               for g, fs in zip(key_test, test.first_sense)]
        if per_lemma:
            out["majority"] = float(per_group_accuracy(test.gold, mfs, test.groups)["macro"])
            out["first_sense"] = float(per_group_accuracy(test.gold, test.first_sense,
                                                          test.groups)["macro"])
        else:
            out["majority"] = float(classification_scores(test.gold, mfs)["f1"])
            out["first_sense"] = float(classification_scores(test.gold, test.first_sense)["f1"])
    else:
        out["majority"] = float(classification_scores(test.gold, [overall] * len(test))["accuracy"])
        out["word_majority"] = float(classification_scores(
            test.gold, [per[t].most_common(1)[0][0] if t in per else overall
                        for t in key_test])["accuracy"])
    return out




def per_group_accuracy(gold: Sequence[Tuple[str, ...]], pred: Sequence[Optional[str]],
                       groups: Sequence[str]) -> Dict[str, Any]:
    """Accuracy per group (lemma) and their unweighted mean: ``{"macro": m, "per_lemma":
    {lemma: {"accuracy", "support"}}}`` — the demo word-sense task is scored this way."""
    hits: Counter = Counter()
    total: Counter = Counter()
    for g, p, grp in zip(gold, pred, groups):
        total[grp] += 1
        hits[grp] += int(p is not None and p in g)
    per = {k: {"accuracy": hits[k] / total[k], "support": total[k]} for k in sorted(total)}
    macro = float(np.mean([v["accuracy"] for v in per.values()])) if per else 0.0
    return {"macro": macro, "per_lemma": per}


__all__ = ["ControlTask", "EMBED_CHUNK", "Examples", "classification_scores", "lemma_group",
           "majority_baseline", "per_group_accuracy", "split_off", "subsample",
           "tagging_examples", "wsd_examples"]
