"""Everything the trainer needs from the corpus: vocabulary, framed sentences, character ids."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch

from elmo_engine.errors import CheckpointError
from elmo_engine.lm_train.data import TypeTable, frame, read_sentences
from elmo_engine.lm_train.vocab import Vocabulary, count_tokens

VOCAB_FILE = "vocab.txt"


@dataclass
class LMData:
    """Corpus prepared for training.

    Attributes
    ----------
    vocab : the softmax vocabulary
    train_framed, dev_framed : framed sentences as type-id arrays
    type_chars : (n_types, M) int64 char ids of every type, on the training device
    type2vocab : (n_types,) int64 softmax id of every type, on the training device
    """

    vocab: Vocabulary
    train_framed: List[np.ndarray]
    dev_framed: List[np.ndarray]
    type_chars: torch.Tensor
    type2vocab: torch.Tensor
    train_path: Path
    dev_path: Path
    n_train_tokens: int
    n_dev_tokens: int
    coverage: float

    def fingerprint(self) -> dict:
        """What identifies the data (checked when a run is resumed)."""
        h = hashlib.sha256()
        for arr in self.train_framed[:1000]:
            h.update(arr.tobytes())
        return {"corpus": str(self.train_path), "dev": str(self.dev_path),
                "train_sentences": len(self.train_framed), "train_tokens": self.n_train_tokens,
                "dev_sentences": len(self.dev_framed), "dev_tokens": self.n_dev_tokens,
                "vocab_size": len(self.vocab), "vocab_coverage": round(self.coverage, 5),
                "head_sha256": h.hexdigest()[:16]}

    def summary(self) -> str:
        return (f"train: {len(self.train_framed)} sentences, {self.n_train_tokens} tokens; dev: "
                f"{len(self.dev_framed)} sentences, {self.n_dev_tokens} tokens; vocabulary "
                f"{len(self.vocab)} ({self.coverage:.1%} of train tokens); "
                f"{self.type_chars.shape[0]} distinct token strings")


def prepare_data(corpus, dev, out: Path, cfg, device: torch.device,
                 resumed: Optional[dict] = None, write: bool = True) -> LMData:
    """Read and tokenize both files, build or reload the vocabulary, and index every token.

    The vocabulary is written to ``OUT/checkpoint/vocab.txt`` on a fresh start and read from
    there on resume (``write=False``: every process but the first builds it without writing);
    a resumed run checks that the corpus still gives the same data.
    """
    train = read_sentences(corpus, cfg.tokenizer, cfg.skip_headers, cfg.split_sentences, "corpus")
    held = read_sentences(dev, cfg.tokenizer, cfg.skip_headers, cfg.split_sentences, "dev file")
    counts = count_tokens(train)
    vpath = Path(out) / "checkpoint" / VOCAB_FILE
    if resumed is not None:
        vocab = Vocabulary.load(vpath)
    else:
        vocab = Vocabulary.build(counts, cfg.vocab_size, cfg.min_count, source=corpus)
        if write:
            vocab.save(vpath)
    table = TypeTable(cfg.bilm_options().max_characters_per_token)
    table.ids(vocab.tokens)             # softmax words first: stable, readable type ids
    train_framed = frame(table, train)
    dev_framed = frame(table, held)
    data = LMData(
        vocab=vocab, train_framed=train_framed, dev_framed=dev_framed,
        type_chars=torch.from_numpy(table.char_ids()).to(device),
        type2vocab=torch.from_numpy(table.vocab_ids(vocab)).to(device),
        train_path=Path(corpus), dev_path=Path(dev),
        n_train_tokens=sum(len(s) for s in train), n_dev_tokens=sum(len(s) for s in held),
        coverage=vocab.coverage(counts))
    if resumed is not None:
        was, now = resumed.get("data", {}), data.fingerprint()
        for key in ("train_sentences", "train_tokens", "vocab_size", "head_sha256"):
            if was.get(key) != now[key]:
                raise CheckpointError(Path(out) / "checkpoint", "the corpus differs from the one "
                                      "this training state was made with", dataset=key,
                                      expected=was.get(key), found=now[key])
    return data
