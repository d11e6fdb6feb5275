"""ELMo Explorer's engine: load, run, train and probe ELMo biLMs. Never imports Qt.

The public surface most callers need (docs/guide/python-api.md, a doctest)::

    import elmo_engine as ee
    emb = ee.load()                                  # the demo model; or a folder / a name
    a, b = emb.embed([ee.tokenize("He sat on the bank of the river ."),
                      ee.tokenize("She went to the bank .")])      # [(3, n, 2P) float32]
    ee.cosine(a[2][4], b[2][4])                      # "bank", top layer, across the two
    ee.mix(a, [0.2, 0.3, 0.5])                       # (n, 2P): the scalar mix

``load_checkpoint`` and ``Embedder`` are the classes underneath (``load`` is the two in one).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Union

from elmo_engine.errors import (
                                CancelledError,
                                CheckpointError,
                                ElmoError,
                                InputError,
                                )

if TYPE_CHECKING:                     # for the annotations only: importing must not load torch
    from pathlib import Path

    import numpy as np

    from elmo_engine.embed.embedder import Embedder

__all__ = [
    "CancelledError",
    "CheckpointError",
    "ElmoError",
    "InputError",
    "load_checkpoint",
    "Embedder",
    "load",
    "tokenize",
    "mix",
    "cosine",
]


def load(checkpoint: "Union[str, Path, None]" = None, device: Optional[str] = "cpu",
         precision: str = "fp32") -> "Embedder":
    """An :class:`~elmo_engine.embed.embedder.Embedder` over a checkpoint: a folder or file, a
    published model's name (``small``, once downloaded: docs/guide/models.md) or None for the
    bundled demo model — what ``--checkpoint`` accepts on the command line. ``device`` "cpu"
    (the default), "cuda" or None (CUDA when available); ``precision`` as the Embedder's."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    if checkpoint is None:
        from elmo_engine.resources import demo_checkpoint_path

        path = demo_checkpoint_path()
    else:
        from elmo_engine.io.model_store import resolve_checkpoint_argument

        path = resolve_checkpoint_argument(checkpoint)
    emb = Embedder(load_checkpoint(path, device=device), device=device, precision=precision)
    return emb


def tokenize(text: str) -> List[str]:
    """Typed text → tokens, as the app and the command line tokenize it."""
    from elmo_engine.model.tokenize import tokenize as _tokenize

    return _tokenize(text)


def mix(layers: "np.ndarray", weights: Optional[Sequence[float]] = None) -> "np.ndarray":
    """The scalar mix ``Σ_k w_k · layers[k]`` of ``(L+1, n, 2P)`` → ``(n, 2P)``, the weights
    normalised to sum 1 (None: uniform) — the app's mix without its per-layer normalisation
    (:func:`elmo_engine.analysis.contexts.compare.mix_layers`)."""
    from elmo_engine.analysis.contexts.compare import mix_layers, normalise_weights

    return mix_layers(layers, normalise_weights(weights, len(layers)))


def cosine(u: "np.ndarray", v: "np.ndarray") -> float:
    """The cosine similarity of two vectors, as the app's similarity matrices compute it
    (:func:`elmo_engine.analysis.contexts.compare.cosine_matrix`)."""
    import numpy as np

    from elmo_engine.analysis.contexts.compare import cosine_matrix

    return float(cosine_matrix(np.stack([u, v]))[0, 1])


def __getattr__(name):  # lazy: importing the package must not import torch
    if name == "load_checkpoint":
        from elmo_engine.model.checkpoint import load_checkpoint

        return load_checkpoint
    if name == "Embedder":
        from elmo_engine.embed.embedder import Embedder

        return Embedder
    raise AttributeError(name)
