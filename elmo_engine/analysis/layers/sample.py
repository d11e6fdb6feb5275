"""The sentences the layer analyses run over, read alike by ``elmo-explorer layers`` and the app's
Layers view: a corpus file (one sentence per line, typed text tokenized as the app tokenizes it
or ``pretokenized``; plain or gzip; a grouped ``group<TAB>sentence`` file gives its sentences;
blank lines skipped and counted) read as a stream: a pass tells the grouped form (without
tokenizing), the next counts the sentences and their lengths, the last keeps the sample, in file
order; cancel is checked as they go.

The sample: ``max_sentences`` of them (a seeded subset, :func:`~.run.subset`), then, while they
hold more than ``max_tokens`` tokens, whole sentences in a seeded random order up to that many
(:func:`~.run.sentences_within`). Memory grows with the sample, not with the file (at most
:data:`MAX_INPUT_BYTES` decompressed are read); the analysis keeps every token's activations,
so ``max_tokens`` is at most :data:`~elmo_engine.analysis.layers.MAX_LAYERS_TOKENS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

from elmo_engine.analysis.layers import MAX_LAYERS_TOKENS
from elmo_engine.progress import TaskState, check, report

#: the largest corpus read (decompressed); it is read as a stream, never held
MAX_INPUT_BYTES = 1 << 30
#: sentences between two checks of cancel (and two progress reports)
CHECK_EVERY = 2000


@dataclass(frozen=True)
class CorpusSample:
    """The sentences kept from ``path`` and what the file holds.

    Attributes
    ----------
    tokens : the kept sentences' words, in file order
    sentences_in_file, tokens_in_file : the whole file's counts (after tokenization)
    blank_note : the blank lines skipped, said as every command says them ("" for none)
    """

    path: Path
    tokens: List[List[str]]
    sentences_in_file: int
    tokens_in_file: int
    blank_note: str = ""

    @property
    def n_tokens(self) -> int:
        return sum(len(s) for s in self.tokens)

    @property
    def sampled(self) -> bool:
        """Whether fewer sentences are kept than the file holds."""
        return len(self.tokens) < self.sentences_in_file

    def sample_note(self) -> str:
        """``"a seeded sample of 24 of 96 sentences (310 of 1,240 tokens)"``, or ``""``."""
        if not self.sampled:
            return ""
        return (f"a seeded sample of {len(self.tokens):,} of {self.sentences_in_file:,} "
                f"sentences ({self.n_tokens:,} of {self.tokens_in_file:,} tokens)")

    def check_enough(self, unbiased: bool = True) -> None:
        """Refuse, naming the file, a sample of fewer tokens than CKA is defined on (before
        anything is embedded; the command and the Layers view alike)."""
        from elmo_engine.analysis.layers.cka import min_tokens
        from elmo_engine.errors import InputError

        need = min_tokens(unbiased)
        if self.n_tokens < need:
            raise InputError(f"{self.n_tokens} token(s) to analyse; CKA between layers needs "
                             f"at least {need}", path=self.path)


def read_sample(path, pretokenized: bool = False, max_sentences: Optional[int] = None,
                max_tokens: int = MAX_LAYERS_TOKENS, seed: int = 0,
                max_bytes: int = MAX_INPUT_BYTES, state: Optional[TaskState] = None
                ) -> CorpusSample:
    """The sample of the corpus at ``path`` (see the module docstring); ``state``: progress (the
    sentences read) and cancel, checked every :data:`CHECK_EVERY` sentences.

    Raises InputError for a missing, unreadable or malformed file (naming it and the line), one
    without a sentence, or ``max_tokens`` over :data:`MAX_LAYERS_TOKENS`."""
    import numpy as np

    from elmo_engine.analysis.layers.run import sentences_within, subset
    from elmo_engine.errors import InputError
    from elmo_engine.io.datasets.text_input import (blank_lines_note, grouped_prefix,
                                                    iter_text_input)

    if not 1 <= max_tokens <= MAX_LAYERS_TOKENS:
        raise InputError(f"the layer analyses take 1 to {MAX_LAYERS_TOKENS:,} tokens (every "
                         f"token's activations are kept), got {max_tokens:,}")
    path = Path(path)
    grouped = grouped_prefix(path, None, max_bytes)        # a pass without tokenizing
    blank: List[int] = []

    def sentences(what: str, on_blank=None) -> Iterator[List[str]]:
        for i, (_, toks) in enumerate(iter_text_input(path, pretokenized, grouped, None,
                                                      max_bytes, on_blank=on_blank)):
            if i % CHECK_EVERY == 0:
                check(state)
                report(state, 0, 0, f"{what} {path.name}: {i:,} sentences")
            yield toks

    lengths = np.fromiter((len(t) for t in sentences("reading", blank.append)), np.int64)
    if not len(lengths):
        raise InputError("no sentences in the file", path=path)
    chosen = subset(len(lengths), max_sentences, seed)
    if lengths[chosen].sum() > max_tokens:
        chosen = chosen[sentences_within(lengths[chosen], max_tokens, seed)]
    keep = np.zeros(len(lengths), bool)
    keep[chosen] = True
    tokens = [t for i, t in enumerate(sentences("sampling")) if keep[i]]
    return CorpusSample(path, tokens, len(lengths), int(lengths.sum()),
                        blank_lines_note(path, blank[:10], len(blank)))


__all__ = ["MAX_INPUT_BYTES", "CorpusSample", "read_sample"]
