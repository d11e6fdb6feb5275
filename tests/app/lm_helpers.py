"""What the language-model view's tests share: a tiny random checkpoint with a test-written
softmax in the published layout (``*_softmax_weights.hdf5`` + ``vocab-*.txt``)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from elmo_engine.model.softmax import save_published_softmax

#: the softmax vocabulary besides <S>, </S> and <UNK>
WORDS = ["the", "a", "cat", "cats", "dog", "sat", "sits", "on", "mat", "."]


def checkpoint_with_softmax(tiny_checkpoint: Path, folder: Path, seed: int) -> Path:
    """A copy of ``tiny_checkpoint`` in ``folder`` with a random softmax over :data:`WORDS`."""
    shutil.copytree(tiny_checkpoint, folder)
    tokens = ["</S>", "<S>", "<UNK>"] + WORDS
    rng = np.random.default_rng(seed)
    save_published_softmax(folder / "tiny_softmax_weights.hdf5",
                           rng.normal(0, 1, (len(tokens), 16)).astype(np.float32),
                           rng.normal(0, 0.5, len(tokens)).astype(np.float32), tokens,
                           folder / "vocab-tiny.txt")
    return folder
