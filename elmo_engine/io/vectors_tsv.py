"""Vectors for the TensorBoard embedding projector: ``vectors.tsv`` + ``metadata.tsv``, in the one
projector format (:mod:`elmo_engine.io.projector_tsv`).

Two targets (:func:`tsv_files` names the files):

* a **folder** (a name without an extension): ``FOLDER/vectors.tsv`` (``each``: one
  ``vectors_layer<k>.tsv`` per layer) and ``FOLDER/metadata.tsv``;
* a **file** ``NAME.tsv``: the vectors in ``NAME.tsv`` itself (``each``: ``NAME.layer<k>.tsv``)
  and the metadata in ``NAME.metadata.tsv`` beside it.

Everything is written into a fresh staging folder beside the target first and moved into place
only when complete (the folder as a whole, with its marker ``.elmo-output.json`` of kind
``projector``: ``--force`` replaces only an empty folder or an earlier projector folder, never a
folder of the user's, :func:`elmo_engine.io.writing.replace_folder_problem`; the files one rename
each). Folders and files get
the permissions the umask gives (not ``mkdtemp``'s private 0700).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List, Optional

from elmo_engine.atomic import ordinary_mode
from elmo_engine.io.projector_tsv import clean_cell, metadata_lines, row_format
from elmo_engine.io.vectors import LayerChoice, _rows
from elmo_engine.io.writing import (TargetExistsError, check_replaceable, staging_folder,
                                    swap_in_folder)

#: the kind of folder a projector export is (its marker)
PROJECTOR_KIND = "projector"


def is_file_target(path: Path) -> bool:
    return Path(path).suffix.lower() == ".tsv"


def check_tsv_target(path: Path, overwrite: bool) -> None:
    """Before any work: a folder target that exists is replaced only with ``overwrite`` and
    only when empty or an earlier projector export (one line naming it otherwise)."""
    if not is_file_target(path):
        check_replaceable(path, PROJECTOR_KIND, overwrite)


def _names(path: Path, layers: LayerChoice, n_out: Optional[int]):
    """``(vector file names, metadata file name)`` relative to the folder they go into."""
    if is_file_target(path):
        stem = path.name[:-len(path.suffix)]
        meta = f"{stem}.metadata.tsv"
        if layers.mode != "each":
            return [path.name], meta
        return [f"{stem}.layer{k}.tsv" for k in range(n_out or 0)], meta
    if layers.mode != "each":
        return ["vectors.tsv"], "metadata.tsv"
    return [f"vectors_layer{k}.tsv" for k in range(n_out or 0)], "metadata.tsv"


def tsv_files(path, layers: LayerChoice, n_layers: Optional[int] = None) -> List[Path]:
    """The paths an export to ``path`` writes. A folder target is one path (the folder); for
    ``each`` into ``NAME.tsv`` without ``n_layers``, the ``NAME.layer<k>.tsv`` already there."""
    path = Path(path)
    if not is_file_target(path):
        return [path]
    vec, meta = _names(path, layers, n_layers)
    if layers.mode == "each" and n_layers is None:
        stem = path.name[:-len(path.suffix)]
        vec = sorted(p.name for p in path.parent.glob(f"{stem}.layer*.tsv"))
    return [path.parent / n for n in vec] + [path.parent / meta]


def _fill(folder: Path, names, meta_name, items, layers) -> None:
    """Write the vector files and the metadata file row by row (nothing is held)."""
    row = row_format(items.dim)
    vec_files = [open(folder / n, "w", encoding="utf-8", newline="") for n in names]
    try:
        with open(folder / meta_name, "w", encoding="utf-8", newline="") as meta:
            meta.writelines(metadata_lines(["word", "sentence", "token", "context"], []))
            for s, t, toks, vec in _rows(items, layers):
                rows = vec if layers.mode == "each" else vec[None]
                for fh, v in zip(vec_files, rows.tolist()):
                    fh.write(row % tuple(v) + "\n")
                word = toks[t]
                ctx = " ".join(list(toks[max(0, t - 3):t]) + [f"[{word}]"]
                               + list(toks[t + 1:t + 4]))
                meta.write(f"{clean_cell(word)}\t{s}\t{t}\t{clean_cell(ctx)}\n")
    finally:
        for fh in vec_files:
            fh.close()


def write_tsv(path, items, layers: LayerChoice, overwrite: bool) -> List[Path]:
    """Write the projector files for ``path`` (a folder or ``NAME.tsv``) from ``items`` (the
    checked stream of :func:`elmo_engine.io.vectors.export_stream`, with ``n_layers`` and
    ``dim``); return their paths."""
    path = Path(path)
    n_out = items.n_layers if layers.mode == "each" else 1
    names, meta = _names(path, layers, n_out)
    staging = staging_folder(path)
    try:
        _fill(staging, names, meta, items, layers)
        for f in staging.iterdir():
            os.chmod(f, ordinary_mode())
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        if is_file_target(path):
            return _move_files(staging, path.parent, names + [meta], overwrite)
        written = sorted(p.name for p in staging.iterdir())
        swap_in_folder(staging, path, overwrite, PROJECTOR_KIND)
        return [path / n for n in written]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_files(staging: Path, folder: Path, names: List[str], overwrite: bool) -> List[Path]:
    targets = [folder / n for n in names]
    if not overwrite:
        for t in targets:
            if t.exists() or t.is_symlink():
                raise TargetExistsError(t)
    for n, t in zip(names, targets):
        os.replace(staging / n, t)
    return targets


__all__ = ["is_file_target", "tsv_files", "write_tsv"]
