"""A training run's settings (:class:`TrainConfig`) and what it produced (:class:`TrainResult`)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Optional

from elmo_engine.errors import InputError
from elmo_engine.model.options import BiLMOptions
from elmo_engine.model.tokenize import Tokenization

# settings that may change when a run is resumed; every other one must match the checkpoint
RUN_CONTROL = ("epochs", "max_steps", "max_minutes", "checkpoint_every", "checkpoint_minutes",
               "log_every", "eval_minutes", "patience", "eval_tokens", "fused", "cooldown_minutes",
               "precision")

# the cooldown ends at this fraction of the learning rate (not 0: the last steps still learn)
COOLDOWN_FLOOR = 0.05


@dataclass
class TrainConfig:
    """Everything that defines a training run (architecture in published ``options`` form)."""

    options: dict
    vocab_size: int = 30000
    min_count: int = 3
    batch_size: int = 64
    unroll: int = 20
    n_negative: int = 4096
    optimizer: str = "adam"
    lr: float = 1e-3
    clip_norm: float = 10.0
    dropout: float = 0.1
    epochs: int = 1
    seed: int = 0
    # a Tokenization name: "tokenize" (typed text) or "whitespace"; "regex" in runs saved before
    tokenizer: str = "tokenize"
    skip_headers: bool = True
    split_sentences: bool = True
    max_steps: Optional[int] = None
    max_minutes: Optional[float] = None
    checkpoint_every: int = 500
    checkpoint_minutes: float = 10.0
    log_every: int = 50
    # every eval_minutes of training: dev perplexity on every dev file and a snapshot of the
    # model in OUT/snapshots/; the export at the end is the snapshot with the best dev
    # perplexity; patience: stop after this many evaluations without a better one
    eval_minutes: Optional[float] = None
    patience: Optional[int] = None
    # the periodic evaluations read the first eval_tokens tokens of each dev file (None: all);
    # the evaluation at the end of the run reads every dev file whole
    eval_tokens: Optional[int] = None
    # the LSTM layers through train.fused_lstm (False: the biLM's autograd path)
    fused: bool = True
    # sentence order per epoch: "documents" (shuffled by document, each in order) or "sentences"
    shuffle: str = "documents"
    # learning-rate cooldown: over the last cooldown_minutes of the max_minutes budget the
    # learning rate falls linearly from lr to lr * COOLDOWN_FLOOR (None: constant lr)
    cooldown_minutes: Optional[float] = None
    # "fp32", or "bf16": forward and backward under torch.autocast(bf16) — the GEMMs take bf16
    # operands — with float32 master weights, optimizer state, LSTM cell state and loss; on the
    # CPU only where it has bf16 units (elmo_engine.runtime.cpu_bf16)
    precision: str = "fp32"

    def lr_at(self, elapsed_seconds: float) -> float:
        """The learning rate after ``elapsed_seconds`` of training (the cooldown applied)."""
        if self.cooldown_minutes is None or self.max_minutes is None:
            return self.lr
        left = self.max_minutes * 60 - elapsed_seconds
        frac = min(1.0, max(0.0, left / (self.cooldown_minutes * 60)))
        return self.lr * (COOLDOWN_FLOOR + (1.0 - COOLDOWN_FLOOR) * frac)

    def bilm_options(self) -> BiLMOptions:
        return BiLMOptions.from_json_dict(self.options, "training options")

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def __post_init__(self) -> None:
        # one name, whatever was given: "regex" (runs saved before) → "tokenize", a member →
        # its plain value (the config is written as JSON); check() names a bad one
        with contextlib.suppress(ValueError):
            self.tokenizer = Tokenization.parse(self.tokenizer).value

    def check(self) -> None:
        self.bilm_options()
        for name in ("vocab_size", "batch_size", "unroll", "n_negative", "epochs"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.optimizer not in ("adam", "adagrad"):
            raise InputError(f"optimizer must be adam or adagrad (got {self.optimizer!r})")
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"dropout must be in [0, 1) (got {self.dropout})")
        if not self.lr > 0 or not self.clip_norm > 0:
            raise InputError("lr and clip_norm must be positive")
        if self.precision not in ("fp32", "bf16"):
            raise InputError(f"precision must be fp32 or bf16 (got {self.precision!r})")
        try:
            Tokenization.parse(self.tokenizer)
        except ValueError as e:
            raise InputError(str(e)) from None
        if self.shuffle not in ("documents", "sentences"):
            raise InputError(f"shuffle must be documents or sentences (got {self.shuffle!r})")
        if self.eval_minutes is not None and not self.eval_minutes > 0:
            raise InputError(f"eval_minutes must be positive (got {self.eval_minutes})")
        if self.cooldown_minutes is not None:
            if not self.cooldown_minutes > 0:
                raise InputError(f"cooldown_minutes must be positive (got {self.cooldown_minutes})")
            if self.max_minutes is None:
                raise InputError("a cooldown needs a time budget: give --max-minutes with "
                                 "--cooldown-minutes")
        if self.patience is not None and int(self.patience) < 1:
            raise InputError(f"patience must be at least 1 (got {self.patience})")


@dataclass
class TrainResult:
    out: Path
    steps: int
    tokens: int
    stopped: str     # finished | max_steps | time_budget | early_stopped | interrupted
    train_seconds: float
    dev: Optional[dict] = None
    history: dict = field(default_factory=dict)
