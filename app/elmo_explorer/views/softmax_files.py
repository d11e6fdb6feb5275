"""Whether a checkpoint folder has a softmax, in one line for the views that need one (plain
Python; the Language model and Units views share it, and a view package imports no other)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from elmo_engine.model.softmax import OWN_SOFTMAX, OWN_VOCAB, PUBLISHED_PATTERN


def missing_softmax_line(folder: Path) -> Optional[str]:
    """One line naming the softmax file missing beside a checkpoint folder and where to get it,
    or None when one is there (the engine reads and checks it)."""
    folder = Path(folder)
    if (folder / OWN_SOFTMAX).is_file() or any(f.is_file() for f in folder.glob(PUBLISHED_PATTERN)):
        return None
    return (f"No predictions: {folder.name or folder} has no softmax ({PUBLISHED_PATTERN} + "
            f"vocab*.txt, or {OWN_SOFTMAX} + {OWN_VOCAB}); get it with File → Get a published "
            "model… or `elmo-explorer models get original --with-softmax`. Reach works without.")
