"""What ELMo's two language models predict at every token of a sentence.

ELMo's vectors are the hidden states of two one-directional LMs (Peters et al. 2018): the
forward LM reads the words to the left, the backward LM those to the right, and both feed one
softmax (:class:`~elmo_engine.model.softmax.Softmax`). For each word *i* and each direction this
reports the probability and rank of the actual word, its surprisal ``−log₂ p`` (bits), the
entropy of the predicted distribution (bits) and the top-k words, as GLTR (Gehrmann et al. 2019)
does for one LM; the perplexity per direction; and the **substitutes**: the words both directions
agree on, the forward prediction from word *i−1* times the backward prediction from word *i+1*,
renormalised over the vocabulary (``p ∝ p_fwd(w | left) · p_bwd(w | right)``; Amrami & Goldberg
2018 draw word-sense-induction substitutes from the same two predictions).

Perplexity is ``2^(mean surprisal)`` over the n+1 predictions of a direction: the n words and
the end marker (``</S>`` forward, ``<S>`` backward), as ``eval-lm`` and bilm-tf count them. A word
outside the softmax vocabulary is scored as ``<UNK>`` (``in_vocabulary`` false).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

from elmo_engine.errors import InputError
from elmo_engine.model.chars import BOS_TOKEN as BOS, EOS_TOKEN as EOS, UNK_TOKEN as UNK
from elmo_engine.progress import TaskState, check

if TYPE_CHECKING:                      # torch is imported by the functions that compute
    from elmo_engine.model.softmax import Softmax

LN2 = math.log(2.0)
FORWARD, BACKWARD = 0, 1
#: the longest sentence predicted (one biLM batch, 2n+2 softmax rows; issue 38: a pair of
#: 20,000-token sentences took 1.7 GB)
MAX_SENTENCE_TOKENS = 1000


@dataclass(frozen=True)
class Candidate:
    """A predicted word and its probability."""

    word: str
    prob: float


@dataclass(frozen=True)
class TokenPrediction:
    """One direction's prediction of one word (surprisal and entropy in bits; rank 1 = best)."""

    word: str
    in_vocabulary: bool
    prob: float
    rank: int
    surprisal: float
    entropy: float
    top: Tuple[Candidate, ...]


@dataclass(frozen=True)
class SentencePredictions:
    """Both LMs on one sentence. ``forward[i]`` / ``backward[i]`` predict word *i*;
    ``forward_end`` is the forward LM's ``</S>``, ``backward_start`` the backward LM's ``<S>``;
    ``substitutes[i]`` the words both agree on at *i*; ``perplexity`` (forward, backward)."""

    tokens: Tuple[str, ...]
    forward: Tuple[TokenPrediction, ...]
    backward: Tuple[TokenPrediction, ...]
    forward_end: TokenPrediction
    backward_start: TokenPrediction
    substitutes: Tuple[Tuple[Candidate, ...], ...]
    perplexity: Tuple[float, float]

    def log_prob(self, direction: int) -> float:
        """Natural log-probability of the whole sentence (n+1 predictions) in ``direction``."""
        recs = (self.forward + (self.forward_end,) if direction == FORWARD
                else (self.backward_start,) + self.backward)
        return -sum(r.surprisal for r in recs) * LN2

    def to_json(self) -> dict:
        def rec(r: TokenPrediction) -> dict:
            return {"word": r.word, "in_vocabulary": r.in_vocabulary, "prob": r.prob,
                    "rank": r.rank, "surprisal": r.surprisal, "entropy": r.entropy,
                    "top": [[c.word, c.prob] for c in r.top]}

        return {"tokens": list(self.tokens),
                "forward": [rec(r) for r in self.forward],
                "backward": [rec(r) for r in self.backward],
                "forward_end": rec(self.forward_end),
                "backward_start": rec(self.backward_start),
                "substitutes": [[[c.word, c.prob] for c in s] for s in self.substitutes],
                "perplexity": {"forward": self.perplexity[0], "backward": self.perplexity[1]}}


def is_substitute(word: str) -> bool:
    """Whether a predicted word reads as a substitute: not a marker (``<UNK>``, ``<S>``,
    ``</S>``) and not punctuation (it holds a letter or a digit)."""
    return word not in (BOS, EOS, UNK) and any(c.isalnum() for c in word)


#: extra candidates scanned for the substitutes, of which <UNK>, markers and punctuation drop out
SUBSTITUTE_MARGIN = 32


def check_sentence_length(n: int, path=None, line=None) -> None:
    """One sentence's predictions are one biLM batch and one softmax pass over its 2n+2 rows:
    a sentence of more than :data:`MAX_SENTENCE_TOKENS` tokens is refused before any of it."""
    if n > MAX_SENTENCE_TOKENS:
        raise InputError(f"a sentence of {n:,} tokens is too long for the language models' "
                         f"predictions (at most {MAX_SENTENCE_TOKENS:,}); split it", path=path,
                         line=line)


def predict(embedder, softmax: Softmax, sentences: Sequence[Sequence[str]], top_k: int = 10,
            state: Optional[TaskState] = None, all_substitutes: bool = False
            ) -> Tuple[SentencePredictions, ...]:
    """:class:`SentencePredictions` of each tokenized sentence (one biLM batch per sentence,
    one pass over the softmax per sentence). The substitutes leave out ``<UNK>``, the sentence
    markers and punctuation (:func:`is_substitute`) unless ``all_substitutes``: the top
    ``top_k`` words both directions agree on among those that remain (the scan keeps
    :data:`SUBSTITUTE_MARGIN` more, so that there are ``top_k`` of them)."""
    if top_k < 1:
        raise InputError("--top-k must be at least 1")
    softmax.check_fits(embedder.opts.output_dim, "the model")
    out = []
    for sent in sentences:
        check(state)
        sent = tuple(sent)
        if not sent:
            raise InputError("an empty sentence has nothing to predict")
        check_sentence_length(len(sent))
        out.append(_predict_one(embedder, softmax, sent, top_k, state, all_substitutes))
    return tuple(out)


def _predict_one(embedder, softmax: Softmax, sent: Tuple[str, ...], top_k: int,
                 state: Optional[TaskState], all_substitutes: bool = False
                 ) -> SentencePredictions:
    import torch

    from elmo_engine.analysis.language_model.states import framed_layers, lm_rows
    from elmo_engine.model.softmax_scan import scan

    n = len(sent)
    layers = framed_layers(embedder, [sent])
    fwd, bwd = lm_rows(layers, 0, n, embedder.opts.output_dim)        # (n+1, out) each
    h = torch.cat([fwd, bwd])                                         # (2n+2, out)
    words = softmax.ids(sent)
    targets = torch.cat([words, torch.tensor([softmax.eos, softmax.bos]), words])
    # word i: forward row i, backward row (n+1) + (i+1)
    pairs = (0, n + 2, n)                       # word i: forward row i, backward row n+2+i
    # a few more than asked for, so that the substitutes left once <UNK>, the markers and
    # punctuation are taken out still number top_k
    k_scan = top_k if all_substitutes else top_k + SUBSTITUTE_MARGIN
    res = scan(softmax, h, targets, k=k_scan, pairs=pairs, state=state)
    logp = res.log_prob                                               # (2n+2,)

    def record(row: int, word: str) -> TokenPrediction:
        top_p = torch.exp(res.top_logits[row].double() - res.log_z[row])
        return TokenPrediction(
            word=word, in_vocabulary=word in softmax.index, prob=float(math.exp(logp[row])),
            rank=int(res.rank[row]), surprisal=float(-logp[row] / LN2),
            entropy=float(res.entropy[row] / LN2),
            top=tuple(Candidate(softmax.tokens[int(i)], float(p))
                      for i, p in zip(res.top_ids[row][:top_k], top_p[:top_k])))

    forward = tuple(record(i, w) for i, w in enumerate(sent))
    backward = tuple(record(n + 2 + i, w) for i, w in enumerate(sent))
    subs = []
    assert res.pair_log_z is not None and res.pair_top_scores is not None \
        and res.pair_top_ids is not None                 # asked for with the pairs above
    for q in range(n):
        p = torch.exp(res.pair_top_scores[q].double() - res.pair_log_z[q])
        subs.append(tuple(Candidate(softmax.tokens[int(i)], float(v))
                          for i, v in zip(res.pair_top_ids[q], p)
                          if all_substitutes or is_substitute(softmax.tokens[int(i)]))[:top_k])
    ppl_f = math.exp(float(-logp[:n + 1].mean()))
    ppl_b = math.exp(float(-logp[n + 1:].mean()))
    return SentencePredictions(tokens=sent, forward=forward, backward=backward,
                               forward_end=record(n, EOS), backward_start=record(n + 1, BOS),
                               substitutes=tuple(subs), perplexity=(ppl_f, ppl_b))
