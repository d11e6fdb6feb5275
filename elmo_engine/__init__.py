"""ELMo Explorer's engine: load, run, train and probe ELMo biLMs. Never imports Qt.

The public surface most callers need::

    from elmo_engine import load_checkpoint, Embedder
    model = load_checkpoint("path/to/checkpoint_dir")
    emb = Embedder(model)
    arrays = emb.embed([["The", "bank", "of", "the", "river"]])   # [(3, 5, 2P) float32]
"""
from elmo_engine.errors import (
                                CancelledError,
                                CheckpointError,
                                ElmoError,
                                InputError,
                                )

__all__ = [
    "CancelledError",
    "CheckpointError",
    "ElmoError",
    "InputError",
    "load_checkpoint",
    "Embedder",
]


def __getattr__(name):  # lazy: importing the package must not import torch
    if name == "load_checkpoint":
        from elmo_engine.model.checkpoint import load_checkpoint

        return load_checkpoint
    if name == "Embedder":
        from elmo_engine.embed.embedder import Embedder

        return Embedder
    raise AttributeError(name)
