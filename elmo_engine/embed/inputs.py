"""What :class:`~elmo_engine.embed.embedder.Embedder` accepts and gives back, checked: a
sentence's tokens, the activation bytes a call may hold at once, and vectors that must be
finite. Values in, one :class:`~elmo_engine.errors.InputError` line out; the commands call the
same checks before they embed, naming their file."""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS

#: the most activation bytes one :meth:`Embedder.embed` call returns (every sentence's
#: ``(L+1, n, 2P)`` float32 array is held at once): 512 MiB, about 87,000 tokens of the demo
#: model (6 kB a token) or 43,000 of the published Original model. Commands that read a whole
#: corpus embed it a chunk at a time (``analysis.activations.iter_embedded``).
MAX_EMBED_BYTES = 512 << 20


def check_finite_vectors(arr: np.ndarray, sentence: Sequence[str]) -> None:
    """Refuse vectors holding NaN or infinity (``(L+1, n, 2P)``), naming the first such layer
    and the sentence's start, so that they never reach an output or a result file."""
    if np.isfinite(arr).all():
        return
    bad = next(k for k in range(arr.shape[0]) if not np.isfinite(arr[k]).all())
    start = " ".join(sentence[:8]) + (" …" if len(sentence) > 8 else "")
    raise InputError(f"the model's vectors are not finite (NaN or infinite) from layer {bad} "
                     f"on the sentence '{start}'; nothing is written (are the weights sound?)")


def check_held_activations(n_tokens: int, opts, limit: int = MAX_EMBED_BYTES,
                           what: str = "sentences", path=None) -> None:
    """Refuse holding the activations of ``n_tokens`` tokens at once when they exceed
    ``limit`` bytes (``(L+1) · 2P · 4`` bytes a token): one line saying how many tokens fit.

    Commands call it with ``path`` (the file the tokens came from) and ``what`` (which of
    their inputs it is) before they embed, so that the line names the file; :meth:`Embedder.embed`
    checks again, naming nothing, for every other caller."""
    per_token = int(opts.n_output_layers) * 2 * int(opts.output_dim) * 4
    if n_tokens * per_token > limit:
        raise InputError(f"the {what} have {n_tokens:,} tokens; their activations would take "
                         f"{n_tokens * per_token / 2**20:,.0f} MiB, over the limit of "
                         f"{limit / 2**20:,.0f} MiB held at once ({limit // per_token:,} tokens "
                         "for this model): use a smaller file", path=path)


def validate_sentence(sentence, index: int) -> Tuple[str, ...]:
    """``sentence`` (the ``index``-th given) as a tuple of tokens, refused in one line when it is
    a string, holds a token that is not a non-empty string without whitespace, or is longer
    than :data:`~elmo_engine.model.tokenize.MAX_SENTENCE_TOKENS`."""
    if isinstance(sentence, str):
        raise InputError(f"sentence {index} is a string; pass a list of tokens (tokenize first)")
    toks = tuple(sentence)
    for j, t in enumerate(toks):
        if not isinstance(t, str):
            raise InputError(f"sentence {index}, token {j} is not a string: {t!r}")
        if not t or any(c.isspace() for c in t):
            raise InputError(f"sentence {index}, token {j} is empty or contains whitespace: {t!r}")
    if len(toks) > MAX_SENTENCE_TOKENS:
        raise InputError(f"sentence {index} has {len(toks)} tokens; the limit is "
                         f"{MAX_SENTENCE_TOKENS} (split it into sentences)")
    return toks
