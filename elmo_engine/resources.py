"""Where the bundled demo model lives.

The repository's top-level ``resources/`` folder is installed as the ``resources`` package
(``pyproject.toml`` package-data), so an installed copy finds the model through
:func:`importlib.resources.files`; a source checkout falls back to ``<repo>/resources``.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

DEMO_DIR = "demo_model"
DEMO_FILES = ("options.json", "lm_weights.hdf5")


def _candidates() -> List[Path]:
    out: List[Path] = []
    try:
        from importlib.resources import files

        out.append(Path(str(files("resources"))) / DEMO_DIR)
    except Exception:  # no such package, or a namespace package in an odd place
        pass
    repo = Path(__file__).resolve().parents[1] / "resources" / DEMO_DIR
    if repo not in out:
        out.append(repo)
    return out


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in DEMO_FILES)


def demo_checkpoint_path() -> Path:
    """The folder of the bundled demo biLM (``options.json`` + ``lm_weights.hdf5``).

    The first candidate that holds both files; when none does (a broken installation), the
    first candidate, so that loading it gives a clear "no such file" error naming the place.
    """
    cands = _candidates()
    for folder in cands:
        if _complete(folder):
            return folder
    return cands[0]


def demo_checkpoint_available() -> bool:
    """True when the demo model's files are installed."""
    return _complete(demo_checkpoint_path())
