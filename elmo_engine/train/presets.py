"""Named training presets: an architecture plus the training hyperparameters.

``demo`` is the bundled demo model (sized for a few hours on a 2-core CPU and ≤ 25 MB on
disk); ``small`` and ``original`` are the published architectures with bilm-tf's training
settings (format doc §12); ``tiny`` is for tests and smoke runs.
"""
from __future__ import annotations

import copy
from typing import Dict

SMALL_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]

_BASE = {
    "vocab_size": 30000, "min_count": 3, "batch_size": 128, "unroll": 20, "n_negative": 8192,
    "optimizer": "adagrad", "lr": 0.2, "clip_norm": 10.0, "dropout": 0.1, "epochs": 10,
}


def _lstm(dim: int, proj: int, layers: int = 2) -> dict:
    return {"dim": dim, "projection_dim": proj, "n_layers": layers, "cell_clip": 3.0,
            "proj_clip": 3.0, "use_skip_connections": True}


def _cnn(filters, n_highway: int, dim: int = 16) -> dict:
    return {"activation": "relu", "embedding": {"dim": dim}, "filters": filters,
            "max_characters_per_token": 50, "n_characters": 262, "n_highway": n_highway}


_DEMO_CNN = _cnn([[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]], 1)
_DEMO: dict = dict(_BASE, vocab_size=25000, min_count=3, batch_size=64, unroll=20,
             n_negative=2048, optimizer="adam", lr=2e-3, clip_norm=5.0, dropout=0.0,
             epochs=3, checkpoint_every=500, checkpoint_minutes=10.0, log_every=50,
             eval_minutes=30.0, eval_tokens=100_000,
             options={"char_cnn": _DEMO_CNN, "lstm": _lstm(512, 256)})

PRESETS: Dict[str, dict] = {
    "tiny": dict(_BASE, vocab_size=2000, min_count=1, batch_size=4, unroll=5, n_negative=64,
                 optimizer="adam", lr=0.01, dropout=0.0, epochs=1,
                 options={"char_cnn": _cnn([[1, 8], [2, 8], [3, 16]], 1, 8),
                          "lstm": _lstm(32, 16)}),
    # the bundled demo model: chosen by 8-minute runs on both shipped corpora
    # (docs/guide/training.md); about 2,000 tokens/s with the fused trainer on 2 cores
    "demo": _DEMO,
    # the demo's data, vocabulary and char CNN with an LSTM twice as wide, for one GPU: a batch
    # of 512 rows keeps the per-step GEMMs large enough to pay there (benchmarks/gpu_train_demo.sh;
    # lr 4e-3 diverged there, 2e-3 did not: docs/guide/training.md)
    "demo-wide": dict(_DEMO, batch_size=512, n_negative=4096, epochs=10,
                      checkpoint_every=100_000, checkpoint_minutes=60.0, log_every=100,
                      eval_minutes=60.0,
                      options={"char_cnn": _DEMO_CNN, "lstm": _lstm(1024, 256)}),
    "small": dict(_BASE, options={"char_cnn": _cnn(SMALL_FILTERS, 1), "lstm": _lstm(1024, 128)}),
    "medium": dict(_BASE, options={"char_cnn": _cnn(SMALL_FILTERS, 1), "lstm": _lstm(2048, 256)}),
    "original": dict(_BASE, vocab_size=800000, min_count=1,
                     options={"char_cnn": _cnn(SMALL_FILTERS, 2), "lstm": _lstm(4096, 512)}),
}


def preset(name: str) -> dict:
    """A deep copy of the named preset; :class:`~elmo_engine.errors.InputError` if unknown."""
    from elmo_engine.errors import InputError

    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name])
