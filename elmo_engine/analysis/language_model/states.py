"""The biLM's layers at every framed position, boundaries included, in one batch.

:meth:`Embedder.embed <elmo_engine.embed.embedder.Embedder.embed>` returns the word positions
only; the language model also needs the forward output at ``<S>`` (it predicts the first word)
and the backward output at ``</S>`` (it predicts the last word). Both are computed with
``boundaries=False`` (which skips only the forward step at ``</S>`` and the backward step at
``<S>``, that no prediction of a word needs), so this is the embedder's own computation, with
its cached token vectors, on rows padded to the longest sentence.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN


def framed_layers(embedder, sentences: Sequence[Sequence[str]]) -> Tensor:
    """(L+1, B, T, 2·out) float32 layers of ``<S> w1 … wn </S>`` per sentence, one batch.

    Row ``r``'s positions ``0 … n_r+1`` are meaningful except layer ≥ 1's forward half at
    ``</S>`` and backward half at ``<S>``; positions past ``n_r+2`` are zero."""
    framed = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    steps = max(len(f) for f in framed)
    p = embedder.opts.projection_dim
    types = sorted({t for f in framed for t in f})
    vec = torch.from_numpy(embedder.token_vectors(types))             # (U, P)
    where = {t: i for i, t in enumerate(types)}
    tok = torch.zeros(len(framed), steps, p)                          # (B, T, P)
    for r, f in enumerate(framed):
        tok[r, :len(f)] = vec[[where[t] for t in f]]
    lengths = torch.tensor([len(f) for f in framed])
    layers, _ = embedder.contextual(tok, lengths, None, boundaries=False)
    return layers.float().cpu()


def lm_rows(layers: Tensor, row: int, n: int, out_dim: int):
    """The top layer's prediction rows of sentence ``row`` (n words):

    * forward (n+1, out): framed positions 0 … n, predicting ``w1 … wn, </S>``;
    * backward (n+1, out): framed positions 1 … n+1, predicting ``<S>, w1 … wn``.

    So word *i* (0-based) is predicted by forward row *i* (from its left context) and backward
    row *i+1* (from its right context)."""
    top = layers[-1, row]                                             # (T, 2·out)
    fwd = top[0:n + 1, :out_dim]
    bwd = top[1:n + 2, out_dim:]
    return fwd, bwd
