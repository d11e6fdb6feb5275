"""Record the bundled demo model's activations for a few fixed sentences.

Run from the repository root after (re)training the demo model::

    python tests/engine/data/make_demo_expected.py

It writes ``tests/engine/data/demo_model_expected.npz``: the sentences, the sha256 of the weights
and options files, and for each sentence the (L+1, n, 2P) float32 activations of its tokens,
computed with ``BiLM.forward`` (each sentence alone, zero initial state).
``tests/engine/test_demo_model.py`` checks the bundled files against it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

SENTENCES = [
    "The bank raised its interest rates on loans .",
    "They walked along the bank of the river .",
    "The children play a game after school .",
    "Psychology studies how people think , feel , and behave .",
    "In 1776 , the colonies declared independence from Britain .",
]
OUT = Path(__file__).resolve().parent / "demo_model_expected.npz"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def activations(model, sentences):
    """Per sentence, the (L+1, n, 2P) activations of its tokens (no <S>, </S>)."""
    from elmo_engine.model.chars import batch_to_ids

    out = []
    with torch.no_grad():
        for s in sentences:
            toks = s.split()
            ids = torch.from_numpy(batch_to_ids([toks]))
            layers, _, _ = model(ids)                     # (L+1, 1, n+2, 2P)
            out.append(layers[:, 0, 1:-1].numpy().astype(np.float32))
    return out


def main() -> None:
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.resources import demo_checkpoint_path

    torch.set_num_threads(1)
    folder = demo_checkpoint_path()
    model = load_checkpoint(folder)
    acts = activations(model, SENTENCES)
    arrays = {f"act_{i}": a for i, a in enumerate(acts)}
    np.savez_compressed(OUT, sentences=np.array(SENTENCES),
                        weights_sha256=np.array(sha256(folder / "lm_weights.hdf5")),
                        options_sha256=np.array(sha256(folder / "options.json")), **arrays)
    print(f"wrote {OUT} ({len(acts)} sentences, layers {acts[0].shape[0]}, width {acts[0].shape[2]})")


if __name__ == "__main__":
    main()
