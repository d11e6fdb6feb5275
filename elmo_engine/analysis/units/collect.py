"""The states of labelled tokens, gathered for ranking: one (N, width) float16 matrix per layer,
direction and state kind, the rows the labelled words of the sentences in order.

Sentences are run in batches of similar length through the step path of
:mod:`elmo_engine.model.lstm_inspect` (the fast path has no internal states to give); only the
rows of labelled words are kept. The bytes of every matrix are computed from the sentences
before anything is run and checked against a bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.errors import InputError
from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect, state_width
from elmo_engine.progress import TaskState, check, report

#: default bound on the gathered matrices (float16)
DEFAULT_MAX_BYTES = 2 << 30
#: framed positions per batch of the step path
BATCH_TOKENS = 4096

Key = Tuple[int, int, StateKind]                 # (layer, direction, state kind)


@dataclass
class UnitData:
    """``states[key]`` (N, width) float16 for the N labelled words; ``labels`` (N,) class ids
    into ``classes``; ``sentence`` (N,) the index of each word's sentence (for splits)."""

    states: Dict[Key, np.ndarray]
    labels: np.ndarray
    classes: Tuple[str, ...]
    sentence: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def collect(model, sentences: Sequence[LabelledSentence], kinds: Sequence[StateKind],
            layers: Optional[Sequence[int]] = None, directions: Sequence[int] = (0, 1),
            max_tokens: Optional[int] = None, max_bytes: int = DEFAULT_MAX_BYTES,
            token_vectors=None, state: Optional[TaskState] = None) -> UnitData:
    """The states of every labelled word of ``sentences`` (the first ``max_tokens`` labelled
    words when given). :class:`InputError` when there is nothing labelled or the matrices would
    exceed ``max_bytes`` (checked before any is allocated)."""
    opts = model.opts
    layer_list = tuple(range(opts.n_layers)) if layers is None else tuple(layers)
    keep: List[Tuple[int, LabelledSentence]] = []
    count, cut = 0, False
    for k, sent in enumerate(sentences):
        targets = sent.targets()
        if not targets or len(sent) == 0:
            continue
        if max_tokens is not None and count + len(targets) > max_tokens:
            if count == 0:
                raise InputError(f"the first labelled sentence holds {len(targets)} labelled "
                                 f"words, more than the {max_tokens} asked (--max-tokens)")
            cut = True
            break
        keep.append((k, sent))
        count += len(targets)
    if count == 0:
        raise InputError("no labelled words to rank units on")
    if len(keep) < 2:                      # before the LSTM runs: the ranking holds one out
        raise InputError("ranking units needs at least two labelled sentences (one is held "
                         f"out); {'the first words asked keep' if cut else 'there is'} one")
    cap = Capture(kinds=tuple(kinds), layers=layer_list, directions=tuple(directions))
    keys = [(layer, d, kind) for layer, d in cap.keys(opts.n_layers) for kind in cap.kinds]
    need = count * sum(state_width(opts, kind) for _, _, kind in keys) * 2
    if need > max_bytes:
        raise InputError(f"the states of {count} words ({len(keys)} layer-direction-states) "
                         f"need {need / 2 ** 20:.0f} MiB, over the bound of "
                         f"{max_bytes / 2 ** 20:.0f} MiB: fewer tokens (--max-tokens), states "
                         "or layers")
    classes = label_classes(s for _, s in keep)
    if len(classes) < 2:                   # before the LSTM runs, as the ranking would refuse
        raise InputError(f"ranking units needs two classes or more; the labels have "
                         f"{len(classes)} ({', '.join(classes)})")
    index = {c: i for i, c in enumerate(classes)}
    out = {key: np.empty((count, state_width(opts, key[2])), dtype=np.float16) for key in keys}
    labels = np.empty(count, dtype=np.int64)
    sent_of = np.empty(count, dtype=np.int64)
    order = sorted(range(len(keep)), key=lambda j: len(keep[j][1]))
    starts = np.zeros(len(keep) + 1, dtype=np.int64)          # rows of each kept sentence
    for j, (_, s) in enumerate(keep):
        starts[j + 1] = starts[j] + len(s.targets())
    done = 0
    batch: List[int] = []

    def flush(batch: List[int]) -> None:
        sents = [keep[j][1] for j in batch]
        tok, lengths = framed_tokens(model, [s.tokens for s in sents], token_vectors)
        res = inspect(model, tok, lengths, cap, states_only=True)
        for r, j in enumerate(batch):
            targets = keep[j][1].targets()
            pos = torch.tensor([i + 1 for i, _ in targets])           # framed positions
            rows = slice(int(starts[j]), int(starts[j + 1]))
            for key in keys:
                out[key][rows] = res.states[key][r, pos].cpu().numpy()
            labels[rows] = [index[lab] for _, lab in targets]
            sent_of[rows] = keep[j][0]

    for j in order:
        check(state)
        batch.append(j)
        if (len(batch) + 1) * (len(keep[j][1]) + 2) > BATCH_TOKENS:
            flush(batch)
            done += len(batch)
            batch = []
            report(state, done, len(keep), "running the LSTM step by step")
    if batch:
        flush(batch)
    report(state, len(keep), len(keep), "running the LSTM step by step")
    return UnitData(states=out, labels=labels, classes=classes, sentence=sent_of)


def label_classes(sentences: Iterable[LabelledSentence]) -> Tuple[str, ...]:
    """The distinct labels of ``sentences``' labelled words, sorted (the classes of a ranking)."""
    return tuple(sorted({lab for s in sentences for lab in s.labels if lab is not None}))


def labelled_file(path, label: str = "upos", max_tokens: Optional[int] = None,
                  max_sentences: int = 200_000, conllu: Optional[bool] = None
                  ) -> List[LabelledSentence]:
    """The labelled sentences of a user's file, read as the Probes view reads its tasks: a
    CoNLL-U file (``conllu``; None: by the name, ``.conllu``, ``.conllu.gz``, or by its first
    word line, :func:`~elmo_engine.analysis.units.corpus.holds_conllu`; ``label`` upos, xpos,
    deprel or ``feats:NAME``) or else a token<TAB>label TSV (``label`` unused), up to
    ``max_tokens`` labelled words, each sentence of at most ``MAX_SENTENCE_TOKENS`` words.
    Bad input is the readers' one line naming the file and line; labels of one class alone,
    one line naming the file (:func:`check_classes`), before any model runs."""
    import itertools
    from pathlib import Path

    from elmo_engine.analysis.units.corpus import holds_conllu
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS

    conllu_file = holds_conllu(Path(path)) if conllu is None else conllu
    if conllu_file:
        from elmo_engine.io.datasets.conllu import read_conllu

        sents = read_conllu(path, label=label)
    else:
        from elmo_engine.io.datasets.tsv import read_tsv

        sents = read_tsv(path)
    out: List[LabelledSentence] = []
    count = 0
    for s in itertools.islice(sents, max_sentences):
        if len(s.tokens) > MAX_SENTENCE_TOKENS:
            raise InputError(f"a sentence of {len(s.tokens):,} words (at most "
                             f"{MAX_SENTENCE_TOKENS:,})", path=path, line=s.meta.get("line"))
        out.append(s)
        count += len(s.targets())
        if max_tokens is not None and count >= max_tokens:
            break
    if count == 0:
        raise InputError(f"no labelled words (label {label})" if conllu_file else
                         "no labelled words (token<TAB>label lines)", path=path)
    check_classes(out, path)
    return out


def check_classes(sentences: Sequence[LabelledSentence], path) -> Tuple[str, ...]:
    """The classes of ``sentences`` read from ``path``; one class alone is an InputError
    naming the file (said before the model runs: a ranking and a probe need two or more)."""
    classes = label_classes(sentences)
    if len(classes) < 2:
        raise InputError(f"one class among the labelled words read ({', '.join(classes)}); "
                         "ranking units (or a probe) needs two or more", path=path)
    return classes
