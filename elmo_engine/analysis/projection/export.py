"""Exports of a projection: coordinates as CSV, vectors as a TensorBoard projector pair (in the
one projector format, :mod:`elmo_engine.io.projector_tsv`).

Every file is written atomically (a temporary file beside the target, then a rename).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path
from elmo_engine.errors import InputError
from elmo_engine.io import projector_tsv
from elmo_engine.progress import TaskState
from elmo_engine.analysis.projection.compute import Projection
from elmo_engine.analysis.projection.tokens import TokenSet


def coordinates_table(tokens: TokenSet, projections: Sequence[Projection]
                      ) -> Tuple[List[str], List[list]]:
    """Header and rows: one row per point, ``x``/``y`` columns per projection."""
    for p in projections:
        if p.coords.shape != (len(tokens), 2):
            raise InputError(f"{p.layer.name} {p.method} has {p.coords.shape[0]} points, the "
                             f"token set {len(tokens)}")
    header = ["index", "token", "sentence", "position", "label"]
    for p in projections:
        header += [f"{p.layer.key}_{p.method}_x", f"{p.layer.key}_{p.method}_y"]
    header.append("sentence_text")
    rows = []
    for i in range(len(tokens)):
        row: list = [i, tokens.words[i], int(tokens.sentence[i]), int(tokens.position[i]),
                     tokens.label_of(i)]
        for p in projections:
            row += [f"{float(p.coords[i, 0]):.6g}", f"{float(p.coords[i, 1]):.6g}"]
        row.append(tokens.sentence_text(i))
        rows.append(row)
    return header, rows


def write_coordinates_csv(path, tokens: TokenSet, projections: Sequence[Projection]) -> Path:
    """Write ``index, token, sentence, position, label, <layer>_<method>_x/_y…, sentence_text``.

    ``sentence`` and ``position`` are 0-based indices into the token set's sentences.
    """
    header, rows = coordinates_table(tokens, projections)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")
    return path


def _clean(text: str) -> str:
    """TensorBoard metadata cells cannot hold tabs or line breaks (the one rule:
    :func:`elmo_engine.io.projector_tsv.clean_cell`)."""
    return projector_tsv.clean_cell(text)


def metadata_columns(tokens: TokenSet) -> Tuple[List[str], List[List[str]]]:
    """The metadata columns of a token set: token, label (if any), sentence, position, context."""
    names = ["token"] + (["label"] if tokens.labels is not None else []) + \
        ["sentence", "position", "context"]
    rows = []
    for i in range(len(tokens)):
        r = [tokens.words[i]] + ([tokens.label_of(i) or "_"] if tokens.labels is not None else [])
        r += [str(int(tokens.sentence[i])), str(int(tokens.position[i])), tokens.context(i, 6)]
        rows.append([_clean(c) for c in r])
    return names, rows


def write_tensorboard(folder, vectors: np.ndarray, tokens: TokenSet,
                      columns: Optional[Sequence[str]] = None, prefix: str = "",
                      state: Optional[TaskState] = None) -> Tuple[Path, Path]:
    """Write ``<prefix>vectors.tsv`` and ``<prefix>metadata.tsv`` for projector.tensorflow.org.

    Parameters
    ----------
    folder : where to write (created if missing)
    vectors : ``(N, D)``, one row per point of ``tokens``
    columns : metadata columns to keep (default: all of :func:`metadata_columns`); with a single
        column the metadata file has no header row, as the projector expects
    prefix : file name prefix, e.g. ``"layer1_"``

    Returns
    -------
    (vectors path, metadata path)
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(tokens):
        raise InputError(f"vectors of shape {vectors.shape} for {len(tokens)} tokens")
    names, rows = metadata_columns(tokens)
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing or not columns:
            raise InputError(f"unknown metadata columns {missing}; available: {names}")
        keep = [names.index(c) for c in columns]
        names, rows = [names[k] for k in keep], [[r[k] for k in keep] for r in rows]
    folder = Path(folder)
    vec_path = projector_tsv.write_vectors(folder / f"{prefix}vectors.tsv", vectors, state)
    meta_path = projector_tsv.write_metadata(folder / f"{prefix}metadata.tsv", names, rows)
    return vec_path, meta_path
