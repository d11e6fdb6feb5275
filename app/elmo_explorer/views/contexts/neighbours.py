"""Where the contexts view's nearest neighbours come from: the vocabulary of known words.

The neighbour corpus is the loaded sentences (first, so that their indices match the
workspace's) plus an optional text file; its index (``elmo_engine.analysis.contexts.neighbours``) is
built by the panel on the worker and cached by checkpoint checksum + corpus tokens + vocabulary.
Layer 0 answers with known words: the corpus's types plus a ``vocab.txt`` beside the checkpoint
or the demo model's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from elmo_engine.analysis.contexts.neighbour_corpus import vocabulary_file as engine_vocabulary_file


def vocabulary_file(info) -> Optional[Path]:
    """A ``vocab.txt`` beside the checkpoint, else the demo model's, else None (the engine's
    rule, shared with ``elmo-explorer contexts --neighbours``)."""
    return engine_vocabulary_file(None if info is None else info.options_path)
