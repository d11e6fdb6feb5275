"""What the layer analyses share: direction halves of a layer and chunked embedding.

A sentence's activations are one ``(L+1, n_tokens, 2P)`` float32 array (the
:class:`~elmo_engine.embed.embedder.Embedder`'s output): layer 0 is the context-free token vector
repeated (``[tok, tok]``), layer *l* ≥ 1 is ``[forward_l, backward_l]``. The analyses take these
arrays, never the model, so that they run on whatever the activation cache already holds.
"""
from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis import DIRECTIONS
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

#: the whole 2P vector, its first half (forward LSTM) and its second half (backward LSTM)

#: sentences handed to the embedder at once by :func:`iter_embedded`
EMBED_CHUNK = 256


def direction_slice(direction: str, dim: int) -> slice:
    """The columns of a ``dim``-wide layer vector that belong to ``direction``."""
    if direction == "both":
        return slice(0, dim)
    if dim % 2:
        raise InputError(f"a {dim}-wide vector has no forward and backward halves")
    if direction == "forward":
        return slice(0, dim // 2)
    if direction == "backward":
        return slice(dim // 2, dim)
    raise InputError(f"unknown direction {direction!r}; choose one of {', '.join(DIRECTIONS)}")


def layer_directions(layer: int) -> Tuple[str, ...]:
    """The directions reported for a layer: layer 0 (``[tok, tok]``) has no split, so only
    ``"both"`` (its halves would give exactly the same values)."""
    return ("both",) if layer == 0 else DIRECTIONS


def check_arrays(activations: Sequence[np.ndarray], tokens: Optional[Sequence[Sequence[str]]] = None
                 ) -> Tuple[int, int]:
    """Check that per-sentence arrays agree with each other (and with the tokens); return
    ``(n_layers, dim)``."""
    if len(activations) == 0:
        raise InputError("no sentences to analyse")
    if tokens is not None and len(tokens) != len(activations):
        raise InputError(f"{len(tokens)} token lists for {len(activations)} activation arrays")
    k: Optional[int] = None
    dim: Optional[int] = None
    for i, arr in enumerate(activations):
        if arr.ndim != 3:
            raise InputError(f"sentence {i}: activations must be (layers, tokens, dim), "
                             f"got shape {arr.shape}")
        if k is None:
            k, dim = arr.shape[0], arr.shape[2]
        elif arr.shape[0] != k or arr.shape[2] != dim:
            raise InputError(f"sentence {i}: shape {arr.shape} does not match ({k}, n, {dim})")
        if tokens is not None and arr.shape[1] != len(tokens[i]):
            raise InputError(f"sentence {i}: {len(tokens[i])} tokens but {arr.shape[1]} vectors")
    assert k is not None and dim is not None         # at least one array (checked above)
    return k, dim


def stack_tokens(activations: Sequence[np.ndarray]) -> np.ndarray:
    """Concatenate per-sentence ``(K, n_i, D)`` arrays along the token axis → ``(K, Σn_i, D)``."""
    check_arrays(activations)
    return np.concatenate(list(activations), axis=1)


def iter_embedded(embedder, sentences: Sequence[Sequence[str]], state: Optional[TaskState] = None,
                  what: str = "corpus", chunk: int = EMBED_CHUNK
                  ) -> Iterator[Tuple[int, List[np.ndarray]]]:
    """Embed sentences a chunk at a time; yield ``(index of the chunk's first sentence, arrays)``.

    ``embedder`` is anything with ``embed(list of token lists) -> list of arrays`` (an
    :class:`~elmo_engine.embed.embedder.Embedder`). Progress is reported in sentences, and cancel is
    checked before every chunk, so a caller that keeps only summaries never holds the corpus.
    """
    total = len(sentences)
    report(state, 0, total, f"embedding {what}")
    for start in range(0, total, chunk):
        check(state)
        part = [list(s) for s in sentences[start:start + chunk]]
        arrays = embedder.embed(part)
        yield start, arrays
        done = min(start + chunk, total)
        report(state, done, total, f"embedding {what} ({done}/{total} sentences)")


__all__ = ["DIRECTIONS", "EMBED_CHUNK", "check_arrays", "direction_slice", "iter_embedded",
           "layer_directions", "stack_tokens"]
