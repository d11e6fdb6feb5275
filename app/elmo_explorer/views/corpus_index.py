"""What the Corpus and Characters views share about a corpus index (plain Python): where the app
keeps a model's index (the Corpus view builds and opens it there, the Characters view looks for
it there), its one-line summary, whether a folder holds a model's complete index and what a
stopped build left. What two views share lives in ``views/``; a view package imports no
other."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:                     # the index (numpy, torch) is imported by the jobs that open one
    from elmo_engine.index.search import CorpusIndex

log = logging.getLogger(__name__)


def indexes_folder(data_dir: Path) -> Path:
    """The folder of the indexes the app builds (:func:`default_index_folder`)."""
    return Path(data_dir) / "corpus-index"


def default_index_folder(data_dir: Path, checksum: str, precision: str = "fp32",
                         stem: str = "reference") -> Path:
    """Where the app builds an index of ``stem`` for the model of ``checksum`` embedded in
    ``precision`` (an fp32 index's name has no precision): the Corpus view's default folder,
    where the Characters view looks for it too."""
    tail = "" if precision == "fp32" else f"-{precision}"
    return indexes_folder(data_dir) / f"{stem}-{checksum[:12]}{tail}"


def summary(index: "CorpusIndex") -> str:
    m = index.manifest
    return (f"{Path(index.folder).name}: {m.n_sentences:,} sentences, {m.n_tokens:,} tokens, "
            f"layers {','.join(map(str, m.layers))}")


def complete_for(folder: Path, checksum: str) -> bool:
    """Whether ``folder`` holds a complete index of the model of ``checksum``."""
    from elmo_engine.errors import ElmoError
    from elmo_engine.index.store import read_manifest

    try:
        m = read_manifest(folder)
    except ElmoError:
        return False
    return m.complete and m.checksum == checksum


def stopped_build_note(folder: Optional[Path]) -> Optional[str]:
    """One line about a stopped build in ``folder`` (its shards embedded), or None."""
    if folder is None or not (folder / "index.json").is_file():
        return None
    from elmo_engine.index.build import missing_shards
    from elmo_engine.index.store import read_manifest

    try:
        m = read_manifest(folder)
        left = len(missing_shards(folder, m))
    except Exception:                                     # broad on purpose: the hint stays
        log.debug("unreadable interrupted build", exc_info=True)
        return None
    return (f"The build of {folder.name} stopped with {m.n_shards - left} of {m.n_shards} "
            "shards embedded; building it again resumes it.")
