"""Whether a checkpoint folder has a softmax, in one line for the views that need one (plain
Python; the Language model and Units views share it, and a view package imports no other)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from elmo_engine.model.softmax import OWN_SOFTMAX, PUBLISHED_PATTERN, missing_softmax_message


#: what the Language model view does without a softmax
LANGUAGE_MODEL_WITHOUT = "Reach works without."
#: what the Units view does without one
UNITS_WITHOUT = ("Ranking, a unit's contexts and patterns work without; Intervene re-measures "
                 "only a probe and a word's similarity; Number units scores the language "
                 "models, which need it.")


def missing_softmax_line(folder: Path, works_without: str = LANGUAGE_MODEL_WITHOUT
                         ) -> Optional[str]:
    """One line naming the softmax file missing beside a checkpoint folder and where to get it,
    and what the asking view does without it (``works_without``), or None when one is there
    (the engine reads and checks it)."""
    folder = Path(folder)
    if (folder / OWN_SOFTMAX).is_file() or any(f.is_file() for f in folder.glob(PUBLISHED_PATTERN)):
        return None
    # the engine's words: a model train-lm wrote is told what it wrote, a published one where
    # to get its softmax
    return f"No predictions: {folder.name or folder}: {missing_softmax_message(folder)}. " \
        f"{works_without}"
