"""Exports of the contexts view, as functions of values: heatmaps (PNG/SVG/PDF), matrices and
neighbours (CSV), and the vectors of selected occurrences (npz, projector TSV).

The panel (:class:`~elmo_explorer.views.contexts.controller.ContextsPanel`) asks for the path
and hands these functions what they need; each ``*_writer`` returns ``write(path)``, which the
panel runs on the worker (atomically, by the engine's writers). Pictures are drawn by the
engine's one figure path (:mod:`elmo_engine.io.figures.contexts`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from PySide6.QtWidgets import QInputDialog, QWidget

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.contexts.neighbours import write_neighbours_csv
from elmo_engine.atomic import check_name_fits
from elmo_engine.io import projector_tsv
from elmo_explorer.views.contexts.model import ContextsModel

IMAGE_FILTERS = "PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)"
#: File → Export's save dialog per entry: (title, file filters)
SAVE_DIALOGS = {"heatmap": ("Export heatmap", IMAGE_FILTERS),
                "matrices": ("Export similarity matrices", "CSV (*.csv)"),
                "neighbours": ("Export nearest neighbours", "CSV (*.csv)"),
                "npz": ("Export occurrence vectors", "NumPy archive (*.npz)"),
                "tsv": ("Export occurrence vectors (TSV)", "TSV (*.tsv)")}
NOTHING_YET = "nothing to export yet: pick a word that occurs in the sentences"
META_COLUMNS = ["sentence", "token", "word", "group", "text"]
#: File → Export entries: (key, menu text); the panel connects each to its ``ask_export``
ENTRIES = [("heatmap", "Heatmap (PNG/SVG/PDF)…"), ("matrices", "Similarity matrices (CSV)…"),
           ("neighbours", "Nearest neighbours (CSV)…"), ("npz", "Occurrence vectors (npz)…"),
           ("tsv", "Occurrence vectors (TSV)…")]
Writer = Callable[[Path], None]


def neighbour_rows(m: ContextsModel) -> List[list]:
    """The shown neighbour table as CSV rows (empty when none is shown)."""
    return [] if m.table is None or m.index is None else m.table.csv_rows(m.index)


def selected(comp: Optional[cmp.Comparison], selected_rows: Sequence[int],
             tokens: List[List[str]]) -> Tuple[List[int], list, list]:
    """Rows to export — the selected ones when several are selected, else all — with their
    occurrences and metadata rows (:data:`META_COLUMNS`)."""
    if comp is None:
        raise LookupError(NOTHING_YET)
    rows = [r for r in selected_rows if r < len(comp.occurrences)]
    if len(rows) < 2:
        rows = list(range(len(comp.occurrences)))
    occ = [comp.occurrences[r] for r in rows]
    meta = [[s, t, tokens[s][t], comp.groups[r], " ".join(tokens[s])]
            for r, (s, t) in zip(rows, occ)]
    return rows, occ, meta


def matrices_writer(comp: Optional[cmp.Comparison]) -> Writer:
    if comp is None:
        raise LookupError(NOTHING_YET)
    return lambda p: cmp.write_matrices_csv(p, comp)


def neighbours_writer(rows: List[list]) -> Writer:
    return lambda p: write_neighbours_csv(p, rows)


def vectors_npz_writer(vectors: np.ndarray, rows: List[int], occ: list, meta: list) -> Writer:
    """Vectors (all layers, both halves) of ``rows``: ``vectors`` is ``(L+1, n, 2P)``."""
    vec = vectors[:, rows]
    return lambda p: cmp.write_vectors_npz(p, vec, occ, [m[2] for m in meta],
                                           [m[4] for m in meta], [m[3] for m in meta])


def vectors_tsv_writer(comp: cmp.Comparison, vectors: np.ndarray, rows: List[int], meta: list,
                       view: int, path) -> Writer:
    """One view's vectors (0 … L, L+1 = the mix; the comparison's direction) as projector TSV,
    with ``<name>.metadata.tsv`` beside it."""
    n_layers = vectors.shape[0]
    view = view % (n_layers + 1)
    sel = vectors[:, rows]                                           # (L+1, n, 2P)
    data = sel[view] if view < n_layers else cmp.mix_layers(sel, comp.weights)
    data = cmp.half(data, comp.direction)
    p = str(path)
    meta_path = (p[:-4] if p.endswith(".tsv") else p) + ".metadata.tsv"

    def write(target) -> None:
        check_name_fits(meta_path, of=target)            # before the first file is written
        projector_tsv.write_vectors(target, data)
        projector_tsv.write_metadata(meta_path, META_COLUMNS, meta)

    return write


def ask_view(parent: QWidget, comp: cmp.Comparison, allow_all: bool) -> Optional[int]:
    """Which view to export (-1: all side by side); None when cancelled."""
    names = list(comp.names) + (["all side by side"] if allow_all else [])
    item, ok = QInputDialog.getItem(parent, "Which view?", "View:", names, len(names) - 1, False)
    if not ok:
        return None
    return -1 if item == "all side by side" else names.index(item)
