"""Nonce words in context: how the context gives a made-up word a meaning.

"He sat on the blorft of the river": at layer 0 the nonce word is only its spelling (its nearest
known words share its letters); the two language models, reading the sentence up to the word
from either side, say which words fit its slot. :func:`in_context` returns both for one
position: the layer-0 neighbours (:class:`~.word_lab.Vocabulary`), the forward and backward
LMs' top predictions at the word, the words both agree on, and where the word itself ranks
(a nonce word is outside the softmax's vocabulary: rank and probability are then ``None``).
The corpus index's nearest occurrences per layer are added by the command line
(``chars nonce --index DIR``) and the Characters view's In context tab, with the index's own
search (:func:`~elmo_engine.index.search.query_vectors`,
:meth:`~elmo_engine.index.search.CorpusIndex.search`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from elmo_engine.analysis.characters.word_lab import Vocabulary
from elmo_engine.analysis.language_model.predictions import predict
from elmo_engine.errors import InputError


@dataclass(frozen=True)
class InContext:
    """One word in its sentence: layer 0 against the two LMs."""

    tokens: Tuple[str, ...]
    position: int
    layer0: Tuple[Tuple[str, float], ...]          # nearest known words at layer 0 (cosine)
    forward: Tuple[Tuple[str, float], ...]         # the forward LM's top words (probability)
    backward: Tuple[Tuple[str, float], ...]
    both: Tuple[Tuple[str, float], ...]            # the words both LMs agree on
    in_vocabulary: bool
    forward_rank: Optional[int]
    backward_rank: Optional[int]

    @property
    def word(self) -> str:
        return self.tokens[self.position]

    def to_dict(self) -> dict:
        def pairs(p):
            return [[w, round(float(v), 6)] for w, v in p]

        return {"sentence": " ".join(self.tokens), "word": self.word, "position": self.position,
                "in_vocabulary": self.in_vocabulary, "forward_rank": self.forward_rank,
                "backward_rank": self.backward_rank, "layer0_neighbours": pairs(self.layer0),
                "forward_predictions": pairs(self.forward),
                "backward_predictions": pairs(self.backward), "both_agree": pairs(self.both)}


def in_context(embedder, softmax, tokens: Sequence[str], position: int,
               vocabulary: Optional[Vocabulary] = None, top_k: int = 10) -> InContext:
    """The word at ``position`` of ``tokens``: its layer-0 neighbours in ``vocabulary`` and the
    two LMs' predictions at its place (``softmax``: the model's, e.g. the bundled model's)."""
    tokens = tuple(tokens)
    if not 0 <= position < len(tokens):
        raise InputError(f"position {position} is outside the sentence ({len(tokens)} tokens)")
    pred = predict(embedder, softmax, [tokens], top_k=top_k)[0]
    fwd, bwd = pred.forward[position], pred.backward[position]
    near: Tuple[Tuple[str, float], ...] = ()
    if vocabulary is not None:
        vec = embedder.token_vectors([tokens[position]])[0]
        near = tuple(vocabulary.nearest(vec, top_k, exclude=tokens[position]))
    inv = fwd.in_vocabulary
    return InContext(tokens, position, near,
                     tuple((c.word, c.prob) for c in fwd.top),
                     tuple((c.word, c.prob) for c in bwd.top),
                     tuple((c.word, c.prob) for c in pred.substitutes[position]),
                     inv, fwd.rank if inv else None, bwd.rank if inv else None)
