"""What the Corpus and Characters views share about a corpus index (plain Python): where the app
keeps a model's index (the Corpus view builds and opens it there, the Characters view looks for
it there) and its one-line summary. What two views share lives in ``views/``; a view package
imports no other."""
from __future__ import annotations

from pathlib import Path

from elmo_engine.index.search import CorpusIndex


def default_index_folder(data_dir: Path, checksum: str, precision: str = "fp32",
                         stem: str = "reference") -> Path:
    """Where the app builds an index of ``stem`` for the model of ``checksum`` embedded in
    ``precision`` (an fp32 index's name has no precision): the Corpus view's default folder,
    where the Characters view looks for it too."""
    tail = "" if precision == "fp32" else f"-{precision}"
    return Path(data_dir) / "corpus-index" / f"{stem}-{checksum[:12]}{tail}"


def summary(index: CorpusIndex) -> str:
    m = index.manifest
    return (f"{Path(index.folder).name}: {m.n_sentences:,} sentences, {m.n_tokens:,} tokens, "
            f"layers {','.join(map(str, m.layers))}")
