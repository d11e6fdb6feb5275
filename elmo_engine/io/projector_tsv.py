"""The one TensorBoard-projector TSV format (projector.tensorflow.org, "Load data") that every
export of vectors as TSV writes: the contexts view's occurrence vectors
(:mod:`elmo_engine.analysis.contexts.compare`), the projection's points
(:mod:`elmo_engine.analysis.projection.export`) and the ``embed``/``Export vectors`` TSV target
(:mod:`elmo_engine.io.vectors_tsv`).

* vectors: one point a line, its ``D`` values as ``%.7g`` separated by tabs, ``\\n`` line ends,
  no header;
* metadata: one line per point, in the same order, the cells separated by tabs; a header line
  first when there is more than one column (the projector reads a single column without one);
  every run of whitespace in a cell (tabs, line breaks) becomes one space.
"""
from __future__ import annotations

from pathlib import Path
from typing import IO, Iterable, Optional, Sequence

import numpy as np

from elmo_engine.atomic import atomic_path
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

FLOAT_FORMAT = "%.7g"
ROWS_PER_CHUNK = 2000          # rows written between progress reports / cancel checks


def clean_cell(text: object) -> str:
    """A metadata cell: every run of whitespace (tabs, line breaks) as one space."""
    return " ".join(str(text).split())


def row_format(dim: int) -> str:
    """The ``%``-format of one vector line of ``dim`` values."""
    return "\t".join([FLOAT_FORMAT] * dim)


def vector_lines(vectors: np.ndarray) -> Iterable[str]:
    """The lines (with ``\\n``) of ``vectors`` ``(n, D)``."""
    fmt = row_format(vectors.shape[1])
    for row in vectors.tolist():
        yield fmt % tuple(row) + "\n"


def metadata_lines(header: Sequence[str], rows: Iterable[Sequence[object]]) -> Iterable[str]:
    """The metadata lines (with ``\\n``): the header when there is more than one column."""
    if len(header) > 1:
        yield "\t".join(clean_cell(h) for h in header) + "\n"
    for row in rows:
        yield "\t".join(clean_cell(c) for c in row) + "\n"


def write_vectors(path, vectors: np.ndarray, state: Optional[TaskState] = None) -> Path:
    """Write ``vectors`` ``(n, D)`` to ``path`` atomically (progress and cancel every
    :data:`ROWS_PER_CHUNK` rows)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise InputError(f"expected vectors of shape (n, dim), got {vectors.shape}")
    path, n = Path(path), vectors.shape[0]
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            _write_chunks(fh, vectors, state)
    report(state, n, n, "written")
    return path


def _write_chunks(fh: IO[str], vectors: np.ndarray, state: Optional[TaskState]) -> None:
    n = vectors.shape[0]
    for start in range(0, n, ROWS_PER_CHUNK):
        check(state)
        report(state, start, n, f"writing vectors ({start:,}/{n:,})")
        fh.writelines(vector_lines(vectors[start:start + ROWS_PER_CHUNK]))


def write_metadata(path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """Write the metadata of the points to ``path`` atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text("".join(metadata_lines(header, rows)), encoding="utf-8")
    return path


__all__ = ["FLOAT_FORMAT", "clean_cell", "metadata_lines", "row_format", "vector_lines",
           "write_metadata", "write_vectors"]
