"""Small helpers the subcommands share: option values and the default checkpoint."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from elmo_engine.errors import InputError


def parse_floats(text: Optional[str], option: str) -> Optional[List[float]]:
    """``"0,1,1"`` → ``[0.0, 1.0, 1.0]`` for a comma-separated option; ``None`` stays ``None``."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"{option} must be comma-separated numbers, got {text!r}") from None


def checkpoint_or_demo(path: Optional[Path]) -> Path:
    """``--checkpoint`` when given, else the bundled demo model's folder."""
    if path is not None:
        return path
    from elmo_engine.resources import demo_checkpoint_path

    return demo_checkpoint_path()
