"""Shared helpers for the train-lm tests: a small written corpus and a tiny configuration."""
from __future__ import annotations

import random
from pathlib import Path

from elmo_engine.train.presets import preset
from elmo_engine.train.trainer import TrainConfig

NOUNS = ["bank", "river", "money", "loan", "water", "boat", "teacher", "student", "play", "game"]
VERBS = ["saw", "liked", "crossed", "paid", "watched", "found"]
ADJ = ["old", "green", "large", "quiet"]


def write_corpus(path: Path, n: int, seed: int) -> Path:
    """``n`` short sentences from a toy grammar, one per line (deterministic for a seed)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        s = ["The", rng.choice(ADJ), rng.choice(NOUNS), rng.choice(VERBS), "the",
             rng.choice(NOUNS), "."]
        lines.append(" ".join(s))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_config(batch_size: int = 4, **kw) -> TrainConfig:
    """The "tiny" preset, unrolled 5 steps, logging every step; ``kw`` overrides any field."""
    cfg = TrainConfig.from_dict(preset("tiny"))
    cfg.batch_size, cfg.unroll, cfg.log_every, cfg.checkpoint_every = batch_size, 5, 1, 1000
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def quiet(_msg: str) -> None:
    """A log sink that drops messages."""
