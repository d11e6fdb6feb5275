"""What else an intervention changes: a probe's accuracy and a word's similarity across contexts.

A probe can decode what the model never uses (the point of Lakretz et al. 2019's ablations, and
of amnesic probing, Elazar et al. 2021): so a probe is trained on the **unchanged** model's
vectors of one representation layer and then scored on the held-out sentences' vectors with and
without the intervention — the drop is what the changed units carried *for that layer's
readers*. A word's similarity across its contexts (Ethayarajh 2019's self-similarity: the mean
cosine between the vectors of its occurrences) is measured before and after the same way, with
the cosine of each occurrence's vector before and after.

Vectors come from the step path (:func:`elmo_engine.model.lstm_inspect.inspect`), in the layout
of :meth:`BiLM.contextual`: representation layer 0 is the token layer, 1 … L the LSTM layers'
outputs (an intervention on LSTM layer l reaches representation layers l + 1 … L).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.errors import InputError
from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.model.lstm_inspect import Intervention, framed_tokens, inspect
from elmo_engine.progress import TaskState, check, report

#: framed positions per step-path batch
BATCH_TOKENS = 4096


def layer_vectors(model, sentences: Sequence[Sequence[str]], layer: int,
                  interventions: Sequence[Intervention] = (), token_vectors=None,
                  state: Optional[TaskState] = None) -> List[np.ndarray]:
    """Per sentence, its words' (n, 2·out) float32 vectors of representation ``layer`` (0 the
    token layer, 1 … L the LSTM layers), with ``interventions`` (in every sentence)."""
    n_layers = model.opts.n_layers
    if not 0 <= layer <= n_layers:
        raise InputError(f"representation layer {layer}: the model has layers 0 … {n_layers} "
                         "(0 the token layer)")
    out: List[np.ndarray] = [np.zeros((0, 0), np.float32)] * len(sentences)
    order = sorted(range(len(sentences)), key=lambda j: len(sentences[j]))
    batch: List[int] = []

    def flush(batch: List[int]) -> None:
        sents = [list(sentences[j]) for j in batch]
        tok, lengths = framed_tokens(model, sents, token_vectors)
        with torch.no_grad():
            rep = inspect(model, tok, lengths, interventions=interventions).outputs()[layer]
        for r, j in enumerate(batch):                                 # rep: (B, T, 2·out)
            out[j] = rep[r, 1:len(sents[r]) + 1].float().cpu().numpy()

    for j in order:
        if not sentences[j]:
            continue
        batch.append(j)
        if (len(batch) + 1) * (len(sentences[j]) + 2) > BATCH_TOKENS:
            check(state)
            flush(batch)
            batch = []
    if batch:
        flush(batch)
    for j, s in enumerate(sentences):
        if not s:
            out[j] = np.zeros((0, 2 * model.opts.output_dim), np.float32)
    return out


# ---- a probe trained on the unchanged model ---------------------------------------------------
@dataclass
class LayerProbe:
    """A softmax regression on representation ``layer``'s standardised vectors, trained on the
    unchanged model's training sentences; ``test`` are the held-out sentences it is scored on.
    ``weights`` (2·out + 1, C), the last row the bias; ``mean``/``sd`` (2·out,) of the training
    vectors."""

    layer: int
    classes: Tuple[str, ...]
    weights: torch.Tensor
    mean: np.ndarray
    sd: np.ndarray
    test: Tuple[LabelledSentence, ...]
    train_tokens: int
    majority: float

    @property
    def test_tokens(self) -> int:
        return sum(len(s.targets()) for s in self.test)

    def accuracy(self, model, interventions: Sequence[Intervention] = (), token_vectors=None,
                 state: Optional[TaskState] = None) -> float:
        """Held-out accuracy on the vectors the model makes with ``interventions``."""
        x, y = _rows(layer_vectors(model, [s.tokens for s in self.test], self.layer,
                                   interventions, token_vectors, state), self.test, self.classes)
        z = torch.from_numpy((x - self.mean) / self.sd)
        pred = (z @ self.weights[:-1] + self.weights[-1]).argmax(1).numpy()
        return float((pred == y).mean())


def _rows(vectors: Sequence[np.ndarray], sents: Sequence[LabelledSentence],
          classes: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """(N, D) vectors and (N,) class ids of the labelled words (a class not in ``classes``:
    id -1, never right)."""
    index = {c: i for i, c in enumerate(classes)}
    xs, ys = [], []
    for v, s in zip(vectors, sents):
        for i, lab in s.targets():
            xs.append(v[i])
            ys.append(index.get(lab, -1))
    dim = vectors[0].shape[1] if len(vectors) else 0
    return (np.stack(xs).astype(np.float32) if xs else np.zeros((0, dim), np.float32),
            np.asarray(ys, dtype=np.int64))


def fit_probe(model, sentences: Sequence[LabelledSentence], layer: int,
              test_fraction: float = 0.2, seed: int = 0, token_vectors=None,
              state: Optional[TaskState] = None) -> LayerProbe:
    """Train the probe of :class:`LayerProbe` on the unchanged model (``test_fraction`` of the
    sentences held out, whole sentences; the same split rule as the units ranking)."""
    from elmo_engine.analysis.units.rank import RankSettings, _softmax_regression

    sents = [s for s in sentences if s.targets()]
    if len(sents) < 2:
        raise InputError("a probe needs at least two labelled sentences (one is held out)")
    rng = np.random.default_rng(seed)
    held = set(rng.permutation(len(sents))[:max(1, int(round(test_fraction * len(sents))))]
               .tolist())
    train = [s for j, s in enumerate(sents) if j not in held]
    test = tuple(s for j, s in enumerate(sents) if j in held)
    classes = tuple(sorted({lab for s in train for _, lab in s.targets()}))
    if len(classes) < 2:
        raise InputError(f"a probe needs two classes or more; the training words have "
                         f"{len(classes)} ({', '.join(classes)})")
    report(state, 0, 2, "the probe's training vectors")
    x, y = _rows(layer_vectors(model, [s.tokens for s in train], layer, (), token_vectors,
                               state), train, classes)
    mean, sd = x.mean(0), np.maximum(x.std(0), 1e-6)
    check(state)
    report(state, 1, 2, "training the probe")
    wb = _softmax_regression(torch.from_numpy((x - mean) / sd), torch.from_numpy(y),
                             len(classes), RankSettings(), 0.0, RankSettings().l2, seed)
    _, yte = _rows([np.zeros((len(s), 1), np.float32) for s in test], test, classes)
    majority = float((yte == int(np.bincount(y, minlength=len(classes)).argmax())).mean())
    return LayerProbe(layer=layer, classes=classes, weights=wb, mean=mean, sd=sd, test=test,
                      train_tokens=len(y), majority=majority)


@dataclass(frozen=True)
class ProbeRemeasure:
    """A probe of representation ``layer`` scored before and after an intervention."""

    layer: int
    classes: Tuple[str, ...]
    train_tokens: int
    test_tokens: int
    majority: float
    before: float
    after: float


def probe_under(model, probe: LayerProbe, interventions: Sequence[Intervention],
                token_vectors=None, state: Optional[TaskState] = None) -> ProbeRemeasure:
    """``probe`` scored on the unchanged model and with ``interventions``."""
    before = probe.accuracy(model, (), token_vectors, state)
    after = probe.accuracy(model, interventions, token_vectors, state)
    return ProbeRemeasure(layer=probe.layer, classes=probe.classes,
                          train_tokens=probe.train_tokens, test_tokens=probe.test_tokens,
                          majority=probe.majority, before=before, after=after)


# ---- a word's similarity across its contexts --------------------------------------------------
@dataclass(frozen=True)
class SimilarityRemeasure:
    """``word``'s occurrences (sentence, token) in the contexts, the mean cosine between the
    vectors of every two of them (representation ``layer``) before and after an intervention,
    and ``shift`` the cosine of each occurrence's vector before to after."""

    word: str
    layer: int
    occurrences: Tuple[Tuple[int, int], ...]
    before: float
    after: float
    shift: Tuple[float, ...]


def occurrences(word: str, sentences: Sequence[Sequence[str]]) -> Tuple[Tuple[int, int], ...]:
    return tuple((s, t) for s, sent in enumerate(sentences) for t, w in enumerate(sent)
                 if w == word)


def mean_pairwise_cosine(vectors: np.ndarray) -> float:
    """The mean cosine over every two rows of ``vectors`` (k, D), k ≥ 2."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sim = unit @ unit.T                                               # (k, k)
    k = len(vectors)
    return float((sim.sum() - np.trace(sim)) / (k * (k - 1)))


def word_vectors(model, word: str, sentences: Sequence[Sequence[str]], layer: int,
                 interventions: Sequence[Intervention] = (), token_vectors=None
                 ) -> Tuple[Tuple[Tuple[int, int], ...], np.ndarray]:
    """``word``'s occurrences and their (k, 2·out) vectors of representation ``layer``."""
    occ = occurrences(word, sentences)
    if len(occ) < 2:
        raise InputError(f"'{word}' occurs {len(occ)} time(s) in the {len(sentences)} "
                         "sentences: its similarity across contexts needs two or more")
    rows = sorted({s for s, _ in occ})
    vecs = layer_vectors(model, [sentences[s] for s in rows], layer, interventions,
                         token_vectors)
    where = {s: k for k, s in enumerate(rows)}
    return occ, np.stack([vecs[where[s]][t] for s, t in occ])


def similarity_under(model, word: str, sentences: Sequence[Sequence[str]], layer: int,
                     interventions: Sequence[Intervention], token_vectors=None
                     ) -> SimilarityRemeasure:
    """``word``'s similarity across its contexts in ``sentences`` before and after
    ``interventions`` (InputError when it occurs fewer than twice)."""
    occ, before = word_vectors(model, word, sentences, layer, (), token_vectors)
    _, after = word_vectors(model, word, sentences, layer, interventions, token_vectors)
    nb = np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1)
    shift = (before * after).sum(1) / np.maximum(nb, 1e-12)
    return SimilarityRemeasure(word=word, layer=layer, occurrences=occ,
                               before=mean_pairwise_cosine(before),
                               after=mean_pairwise_cosine(after),
                               shift=tuple(float(v) for v in shift))


#: a measure re-taken under each intervention set of an ablation experiment
Measure = Callable[[Sequence[Intervention]], float]


def probe_measure(model, probe: LayerProbe, token_vectors=None) -> Measure:
    """``probe``'s held-out accuracy under the interventions it is given."""
    return lambda ivs: probe.accuracy(model, ivs, token_vectors)


def similarity_measure(model, word: str, sentences: Sequence[Sequence[str]], layer: int,
                       token_vectors=None) -> Measure:
    """``word``'s mean cosine across its contexts under the interventions it is given."""
    occurrences_of = occurrences(word, sentences)
    if len(occurrences_of) < 2:
        raise InputError(f"'{word}' occurs {len(occurrences_of)} time(s) in the "
                         f"{len(sentences)} sentences: its similarity needs two or more")

    def measure(ivs: Sequence[Intervention]) -> float:
        return mean_pairwise_cosine(word_vectors(model, word, sentences, layer, ivs,
                                                 token_vectors)[1])

    return measure
