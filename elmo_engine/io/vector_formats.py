"""The names of the vector exports' formats, layer modes and types (:mod:`elmo_engine.io.vectors`
writes them): here, apart, so that the command line's parser offers them as choices without
loading numpy, h5py or scipy (``elmo-explorer export --help`` answers at once)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

from elmo_engine.errors import InputError

FORMATS: Tuple[str, ...] = ("npz", "hdf5", "tsv", "csv")
LAYER_MODES: Tuple[str, ...] = ("each", "top", "average", "mix")
DTYPES: Tuple[str, ...] = ("float32", "float16")
FORMAT_BY_SUFFIX: Dict[str, str] = {".npz": "npz", ".hdf5": "hdf5", ".h5": "hdf5", ".csv": "csv",
                                    ".tsv": "tsv"}


def format_for(path, fmt: Optional[str] = None) -> str:
    """The format named, else guessed from the extension (a path without one → TSV folder)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(f"unknown export format '{fmt}' (use {', '.join(FORMATS)})")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix in FORMAT_BY_SUFFIX:
        return FORMAT_BY_SUFFIX[suffix]
    if not suffix:
        return "tsv"
    raise InputError(f"cannot tell the format from '{suffix}': use .npz, .hdf5, .csv or a "
                     "folder (TSV), or name the format", path=path)
