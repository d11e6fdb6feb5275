"""Everything the trainer needs from the corpus: vocabulary, framed sentences, character ids."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Union

import numpy as np
import torch

from elmo_engine.errors import CheckpointError
from elmo_engine.train.data import TypeTable, frame
from elmo_engine.train.names import STATE_DIR, VOCAB_FILE
from elmo_engine.io.datasets.corpus_text import read_documents
from elmo_engine.train.vocab import Vocabulary, count_tokens



@dataclass
class LMData:
    """Corpus prepared for training.

    Attributes
    ----------
    vocab : the softmax vocabulary
    train_framed, dev_framed : framed sentences as type-id arrays (every corpus, every dev file)
    train_doc_starts : index in ``train_framed`` of each training document's first sentence
    dev_sets : (name, framed sentences) of each dev file, evaluated separately
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
    train_doc_starts: Optional[np.ndarray] = None
    dev_sets: Optional[List[tuple]] = None
    train_paths: Optional[List[Path]] = None
    dev_paths: Optional[List[Path]] = None

    def fingerprint(self) -> dict:
        """What identifies the data (checked when a run is resumed)."""
        h = hashlib.sha256()
        for arr in self.train_framed[:1000]:
            h.update(arr.tobytes())
        paths = self.train_paths or [self.train_path]
        devs = self.dev_paths or [self.dev_path]
        return {"corpus": " ".join(str(p) for p in paths), "dev": " ".join(str(p) for p in devs),
                "train_sentences": len(self.train_framed), "train_tokens": self.n_train_tokens,
                "dev_sentences": len(self.dev_framed), "dev_tokens": self.n_dev_tokens,
                "vocab_size": len(self.vocab), "vocab_coverage": round(self.coverage, 5),
                "head_sha256": h.hexdigest()[:16]}

    def summary(self) -> str:
        docs = "" if self.train_doc_starts is None else f" in {len(self.train_doc_starts)} documents"
        return (f"train: {len(self.train_framed)} sentences{docs}, {self.n_train_tokens} tokens; dev: "
                f"{len(self.dev_framed)} sentences, {self.n_dev_tokens} tokens; vocabulary "
                f"{len(self.vocab)} ({self.coverage:.1%} of train tokens); "
                f"{self.type_chars.shape[0]} distinct token strings")


def _paths(value) -> List[Path]:
    return [Path(p) for p in ([value] if isinstance(value, (str, Path)) else value)]


def dev_set_name(path: Path) -> str:
    """A short name for a dev file: its folder and file name (``pd_fiction/valid.txt``)."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def prepare_data(corpus: Union[str, Path, Sequence], dev: Union[str, Path, Sequence], out: Path,
                 cfg, device: torch.device, resumed: Optional[dict] = None,
                 write: bool = True) -> LMData:
    """Read and tokenize the corpora and dev files, build or reload the vocabulary, and index
    every token.

    ``corpus`` and ``dev`` are a path or a list of paths. The training documents of every
    corpus are kept (the trainer shuffles them together, by document); every dev file is
    evaluated on its own. The vocabulary is written to ``OUT/checkpoint/vocab.txt`` on a fresh
    start and read from there on resume (``write=False``: every process but the first builds it
    without writing); a resumed run checks that the corpus still gives the same data.
    """
    corpora, devs = _paths(corpus), _paths(dev)
    train_docs = [d for p in corpora for d in read_documents(
        p, cfg.tokenizer, cfg.skip_headers, cfg.split_sentences, "corpus")]
    train = [s for d in train_docs for s in d]
    starts = np.cumsum([0] + [len(d) for d in train_docs[:-1]]).astype(np.int64)
    held_sets = [(p, [s for d in read_documents(p, cfg.tokenizer, cfg.skip_headers,
                                                cfg.split_sentences, "dev file") for s in d])
                 for p in devs]
    counts = count_tokens(train)
    vpath = Path(out) / STATE_DIR / VOCAB_FILE
    if resumed is not None:
        vocab = Vocabulary.load(vpath)
    else:
        vocab = Vocabulary.build(counts, cfg.vocab_size, cfg.min_count, source=corpora[0])
        if write:
            vocab.save(vpath)
    table = TypeTable(cfg.bilm_options().max_characters_per_token)
    table.ids(vocab.tokens)             # softmax words first: stable, readable type ids
    train_framed = frame(table, train)
    dev_sets = [(dev_set_name(p), frame(table, held)) for p, held in held_sets]
    dev_framed = [s for _, framed in dev_sets for s in framed]
    data = LMData(
        vocab=vocab, train_framed=train_framed, dev_framed=dev_framed,
        type_chars=torch.from_numpy(table.char_ids()).to(device),
        type2vocab=torch.from_numpy(table.vocab_ids(vocab)).to(device),
        train_path=corpora[0], dev_path=devs[0],
        n_train_tokens=sum(len(s) for s in train),
        n_dev_tokens=sum(len(s) for _, held in held_sets for s in held),
        coverage=vocab.coverage(counts), train_doc_starts=starts, dev_sets=dev_sets,
        train_paths=corpora, dev_paths=devs)
    if resumed is not None:
        was, now = resumed.get("data", {}), data.fingerprint()
        for key in ("train_sentences", "train_tokens", "vocab_size", "head_sha256"):
            if was.get(key) != now[key]:
                raise CheckpointError(Path(out) / "checkpoint", "the corpus differs from the one "
                                      "this training state was made with", dataset=key,
                                      expected=was.get(key), found=now[key])
    return data
