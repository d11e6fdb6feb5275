"""Units switched off in the live biLM, and the minimal pairs scored again (Lakretz et al. 2019).

:func:`sentence_log_probs` scores sentences with both LMs on the step path of
:mod:`elmo_engine.model.lstm_inspect`, with the interventions of the call (the same numbers
as :func:`~elmo_engine.analysis.language_model.pairs.score_pairs` when there are none; tested);
:func:`pair_accuracy` turns them into minimal-pair accuracies per set and direction.
:func:`ablation_experiment` is Lakretz et al.'s experiment on the model at hand: per direction,
the top-k units of a ranking zeroed at every position against k units drawn at random (not among
the top k; one draw per seed), the accuracy of that direction's LM, and of both combined with
both ablations, reported as mean ± sd over the seeds. :func:`token_predictions` is one
sentence word by word: each LM's surprisal of each word and its top prediction, with the
interventions of the call (the before / after of the Units view's intervention panel).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.analysis.language_model.pairs import MinimalPair
from elmo_engine.analysis.units.sizes import check_ks, default_ks
from elmo_engine.errors import InputError
from elmo_engine.model.lstm_inspect import Intervention, Op, StateKind, framed_tokens, inspect
from elmo_engine.progress import TaskState, check, report

#: softmax rows scored at once (rows × vocabulary floats)
SOFTMAX_CHUNK = 1024
ALL = "all"


def sentence_log_probs(model, softmax, sentences: Sequence[Sequence[str]],
                       interventions: Sequence[Intervention] = (), token_vectors=None
                       ) -> np.ndarray:
    """(B, 2) natural log-probability of each sentence under the forward and the backward LM
    (n + 1 predictions each, the end markers included), with ``interventions``."""
    tok, lengths = framed_tokens(model, sentences, token_vectors)
    top = inspect(model, tok, lengths, interventions=interventions).outputs()[-1]  # (B, T, 2·out)
    out = model.opts.output_dim
    rows: List[torch.Tensor] = []
    targets: List[int] = []
    owner: List[Tuple[int, int]] = []
    for r, sent in enumerate(sentences):
        n = len(sent)
        ids = softmax.ids(sent).tolist()
        rows.append(top[r, 0:n + 1, :out])                            # predicts w1 … wn </S>
        targets += ids + [softmax.eos]
        owner += [(r, 0)] * (n + 1)
        rows.append(top[r, 1:n + 2, out:])                            # predicts <S> w1 … wn
        targets += [softmax.bos] + ids
        owner += [(r, 1)] * (n + 1)
    h = torch.cat(rows).float()
    tgt = torch.tensor(targets)
    w = softmax.w.float()
    logp = torch.empty(h.shape[0], dtype=torch.float64)
    for a in range(0, h.shape[0], SOFTMAX_CHUNK):
        logits = torch.addmm(softmax.b, h[a:a + SOFTMAX_CHUNK], w.t())   # (rows, V)
        picked = logits.gather(1, tgt[a:a + SOFTMAX_CHUNK, None])[:, 0]
        logp[a:a + SOFTMAX_CHUNK] = (picked - torch.logsumexp(logits, 1)).double()
    total = np.zeros((len(sentences), 2))
    for (r, d), v in zip(owner, logp.tolist()):
        total[r, d] += v
    return total


LN2 = math.log(2.0)


@dataclass(frozen=True)
class WordPredictions:
    """One sentence word by word, per direction (0 forward, 1 backward): ``surprisal[d]`` of
    each word in bits (−log₂ p) and ``top[d]`` the LM's most probable word at that position."""

    words: Tuple[str, ...]
    surprisal: Tuple[Tuple[float, ...], Tuple[float, ...]]
    top: Tuple[Tuple[str, ...], Tuple[str, ...]]


def token_predictions(model, softmax, sentence: Sequence[str],
                      interventions: Sequence[Intervention] = (), token_vectors=None
                      ) -> WordPredictions:
    """Each LM's surprisal of each word of ``sentence`` and its top prediction there, on the
    step path with ``interventions`` (without any: the Language model view's numbers)."""
    sent = list(sentence)
    n = len(sent)
    if n == 0:
        raise InputError("an empty sentence has nothing to predict")
    tok, lengths = framed_tokens(model, [sent], token_vectors)
    top = inspect(model, tok, lengths, interventions=interventions).outputs()[-1][0]  # (T, 2·out)
    out = model.opts.output_dim
    h = torch.cat([top[0:n, :out], top[2:n + 2, out:]]).float()      # word i: rows i and n + i
    tgt = torch.cat([softmax.ids(sent), softmax.ids(sent)])
    logits = torch.addmm(softmax.b, h, softmax.w.float().t())         # (2n, V)
    logp = (logits.gather(1, tgt[:, None])[:, 0] - torch.logsumexp(logits, 1)).double()
    best = logits.argmax(1).tolist()
    bits = (-logp / LN2).tolist()
    words = [softmax.tokens[int(i)] for i in best]
    return WordPredictions(words=tuple(sent),
                           surprisal=(tuple(bits[:n]), tuple(bits[n:])),
                           top=(tuple(words[:n]), tuple(words[n:])))


@dataclass(frozen=True)
class Accuracy:
    """Share of pairs each LM prefers the good sentence of: ``by_set[set]`` and ``all``,
    each (forward, backward, combined)."""

    by_set: Dict[str, Tuple[float, float, float]]

    @property
    def overall(self) -> Tuple[float, float, float]:
        return self.by_set[ALL]


def pair_accuracy(model, softmax, pairs: Sequence[MinimalPair],
                  interventions: Sequence[Intervention] = (), token_vectors=None) -> Accuracy:
    """Minimal-pair accuracy per set and direction with ``interventions`` (one step-path run
    over all the pairs' sentences)."""
    sents = [p.good for p in pairs] + [p.bad for p in pairs]
    lp = sentence_log_probs(model, softmax, sents, interventions, token_vectors)
    good, bad = lp[:len(pairs)], lp[len(pairs):]
    right = np.stack([good[:, 0] > bad[:, 0], good[:, 1] > bad[:, 1],
                      good.sum(1) > bad.sum(1)], 1)                   # (pairs, 3)
    groups: Dict[str, List[int]] = {}
    for k, p in enumerate(pairs):
        groups.setdefault(p.set, []).append(k)
    by_set = {name: tuple(float(v) for v in right[idx].mean(0)) for name, idx in groups.items()}
    by_set[ALL] = tuple(float(v) for v in right.mean(0))
    return Accuracy(by_set={k: (v[0], v[1], v[2]) for k, v in by_set.items()})


def ablate(layer: int, state: StateKind, units_by_direction: Mapping[int, Sequence[int]]
           ) -> List[Intervention]:
    """Zero ``units`` of ``state`` in ``layer`` at every position, per direction."""
    return [Intervention(layer, d, state, tuple(units), Op.ZERO)
            for d, units in units_by_direction.items() if len(units)]


@dataclass(frozen=True)
class AblationRow:
    """One k: the accuracy (forward, backward, combined) with the top k ablated, and the mean
    and sd over the seeds with k random units ablated; per set (``ALL`` included)."""

    k: int
    top: Accuracy
    random: Tuple[Accuracy, ...]
    #: the extra measures (:mod:`.remeasure`) with the top k of both directions ablated, and
    #: per seed with k random units of both directions ablated
    measures_top: Dict[str, float] = field(default_factory=dict)
    measures_random: Dict[str, Tuple[float, ...]] = field(default_factory=dict)

    def measure_stats(self, name: str) -> Tuple[float, float]:
        """Mean and sd (ddof 1; 0 for one seed) of measure ``name`` over the random draws."""
        vals = np.asarray(self.measures_random[name], dtype=float)
        return float(vals.mean()), float(vals.std(ddof=1)) if len(vals) > 1 else 0.0

    def random_stats(self, name: str = ALL) -> Tuple[Tuple[float, float], ...]:
        vals = np.array([a.by_set[name] for a in self.random])       # (seeds, 3)
        sd = vals.std(0, ddof=1) if len(vals) > 1 else np.zeros(3)
        return tuple((float(m), float(s)) for m, s in zip(vals.mean(0), sd))


@dataclass(frozen=True)
class AblationResult:
    layer: int
    state: StateKind
    top_units: Dict[int, Tuple[int, ...]]                 # per direction, best first
    baseline: Accuracy
    rows: Tuple[AblationRow, ...]
    measures_baseline: Dict[str, float] = field(default_factory=dict)


def ablation_experiment(model, softmax, pairs: Sequence[MinimalPair], layer: int,
                        state: StateKind, order: Mapping[int, Sequence[int]], ks: Sequence[int],
                        seeds: int = 5, seed: int = 0, token_vectors=None,
                        task: Optional[TaskState] = None,
                        measures: Optional[Mapping[str, Callable[[Sequence[Intervention]],
                                                                 float]]] = None
                        ) -> AblationResult:
    """Per k: the top-k units of ``order[direction]`` (a ranking per direction, best first)
    zeroed, against k random units of the same layer, direction and state (not among the top
    k), ``seeds`` draws. ``measures``: more numbers re-taken under each ablation (both
    directions' units at once), e.g. :func:`.remeasure.probe_measure`."""
    from elmo_engine.model.lstm_inspect import state_width

    width = state_width(model.opts, state)
    check_ks(ks, width, layer, state)
    baseline = pair_accuracy(model, softmax, pairs, token_vectors=token_vectors)
    measures = dict(measures or {})
    measured = {name: m(()) for name, m in measures.items()}
    rows = []
    steps = len(ks) * (1 + seeds)
    done = 0
    for k in ks:
        top_units = {d: list(order[d][:k]) for d in order}
        check(task)
        top_ivs = ablate(layer, state, top_units)
        top = pair_accuracy(model, softmax, pairs, top_ivs, token_vectors)
        m_top = {name: m(top_ivs) for name, m in measures.items()}
        m_rand: Dict[str, List[float]] = {name: [] for name in measures}
        done += 1
        rand = []
        for s in range(seeds):
            check(task)
            rng = np.random.default_rng([seed, s, k])
            picks = {}
            for d, units in top_units.items():
                rest = np.setdiff1d(np.arange(width), np.asarray(units, dtype=np.int64))
                picks[d] = [int(u) for u in rng.choice(rest, size=min(k, len(rest)),
                                                       replace=False)]
            ivs = ablate(layer, state, picks)
            rand.append(pair_accuracy(model, softmax, pairs, ivs, token_vectors))
            for name, m in measures.items():
                m_rand[name].append(m(ivs))
            done += 1
            report(task, done, steps, "scoring the minimal pairs with units ablated")
        rows.append(AblationRow(k, top, tuple(rand), m_top,
                                {name: tuple(v) for name, v in m_rand.items()}))
    kmax = max(ks) if ks else 0
    return AblationResult(layer=layer, state=state,
                          top_units={d: tuple(int(u) for u in order[d][:kmax]) for d in order},
                          baseline=baseline, rows=tuple(rows), measures_baseline=measured)


def fmt_pm(mean: float, sd: float) -> str:
    return f"{mean:.3f} ± {sd:.3f}" if not math.isnan(sd) else f"{mean:.3f}"


#: the labelled words of the Number experiment when the user names none
NUMBER_LABEL = "feats:Number"


def default_ewt_train() -> Optional[Path]:
    """UD English EWT train in the shared data beside a source checkout
    (``../shared/data/ud_english_ewt/en_ewt-ud-train.conllu.gz``), or None."""
    repo = Path(__file__).resolve().parents[3]
    path = repo.parent / "shared" / "data" / "ud_english_ewt" / "en_ewt-ud-train.conllu.gz"
    return path if path.exists() else None


@dataclass(frozen=True)
class NumberSource:
    """Where the labelled words of :func:`number_units_experiment` come from: ``label`` is
    ``feats:Number`` on EWT, ``upos`` on the bundled demo POS task (the fallback)."""

    name: str
    label: str
    sentences: Tuple


def number_source(max_tokens: int, max_sentences: int = 200_000) -> NumberSource:
    """EWT train's words with a ``Number`` feature (:func:`default_ewt_train`) up to
    ``max_tokens`` labelled words; without EWT the bundled demo POS task's UPOS tags (it
    carries no FEATS): the ranking is then for part of speech, and says so."""
    import itertools

    ewt = default_ewt_train()
    if ewt is not None:
        from elmo_engine.io.datasets.conllu import read_conllu

        it = read_conllu(ewt, label=NUMBER_LABEL)
        name, label = "UD English EWT train", NUMBER_LABEL
    else:
        from elmo_engine.io.datasets.demo import load_demo_task

        it = iter(load_demo_task("pos", "train"))
        name, label = "the demo POS task (no EWT found)", "upos"
    out, count = [], 0
    for sent in itertools.islice(it, max_sentences):
        out.append(sent)
        count += len(sent.targets())
        if count >= max_tokens:
            break
    return NumberSource(name=name, label=label, sentences=tuple(out))


def number_units_experiment(model, softmax, pairs: Sequence[MinimalPair],
                            ks: Optional[Sequence[int]],
                            seeds: int, max_tokens: int, layer: Optional[int] = None,
                            source: Optional[NumberSource] = None, token_vectors=None,
                            task: Optional[TaskState] = None
                            ) -> Tuple[NumberSource, AblationResult]:
    """``units ablate``'s computation with its defaults: the cells of ``layer`` (default the
    top) ranked per direction by the class-mean difference on :func:`number_source`, then
    :func:`ablation_experiment` on ``pairs``. ``ks`` None: the default numbers the
    layer's cells allow (:func:`~.sizes.default_ks`); ``ks`` given: each checked
    (:func:`check_ks`)."""
    from elmo_engine.analysis.units.collect import collect
    from elmo_engine.analysis.units.rank import Method, RankSettings, rank_units

    from elmo_engine.model.lstm_inspect import state_width

    src = number_source(max_tokens) if source is None else source
    layer = model.opts.n_layers - 1 if layer is None else layer
    kind = StateKind.C
    width = state_width(model.opts, kind)
    if ks is None:
        ks = default_ks(width, layer, kind)
    check_ks(ks, width, layer, kind)                             # before the collecting
    report(task, 0, 1, f"gathering the cells on {src.name}")
    data = collect(model, list(src.sentences), [kind], layers=[layer], max_tokens=max_tokens,
                   token_vectors=token_vectors, state=task)
    check(task)
    report(task, 0, 1, "ranking the cells")
    ranked = rank_units(data, RankSettings(ks=()), keys=[(layer, 0, kind), (layer, 1, kind)],
                        state=task)
    order = {r.key[1]: [int(u) for u in r.order[Method.MEAN_DIFF]] for r in ranked}
    res = ablation_experiment(model, softmax, pairs, layer, kind, order, ks, seeds=seeds,
                              token_vectors=token_vectors, task=task)
    return src, res
