"""Exports of the Corpus view, as functions of values: the concordance lines and the map's box
selection as TSV (atomic writes), the map and the senses as PNG, SVG or PDF — drawn by the one
figure module (:mod:`elmo_engine.io.figures.corpus` on :mod:`elmo_engine.io.figures`). The map
figure carries the on-screen marks as values (:class:`~elmo_engine.io.figures.corpus.MapMarks`):
the query's ring in its star's colour, the box selection's rectangle and its points. Each takes
the view model (:class:`~.model.CorpusModel`) and the map shown (:class:`~.atlas.MapData`, None
before one is computed) and returns what it wrote; the panel
(:class:`~elmo_explorer.views.corpus.controller.CorpusPanel`) builds the File → Export entries,
asks for the paths and says what was written.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np

from elmo_engine.atomic import atomic_write_text
from elmo_engine.errors import InputError
from elmo_engine.io.figures import corpus as corpus_figures
from elmo_explorer.common.figure_export import FigureOptions, save_figure
from elmo_explorer.views.corpus.atlas import MapData
from elmo_explorer.views.corpus.model import CorpusModel
from elmo_explorer.views.palette import FOUND_COLOUR, SELECTED_PEN

#: the view's figures (also its report figures, as ``corpus_<kind>.<ext>``)
FIGURES = ("map", "senses")
#: File → Export entries of the figures: (menu text, kind)
FIGURE_ENTRIES = (("Corpus map (PNG/SVG/PDF)…", "map"),
                  ("Corpus senses (PNG/SVG/PDF)…", "senses"))
TSV_ENTRY = "Corpus concordance (TSV)…"
SELECTION_ENTRY = "Corpus map selection (TSV)…"


def write_tsv(m: CorpusModel, path) -> Path:
    """The concordance lines (every layer) as tab-separated text."""
    atomic_write_text(Path(path), m.concordance_tsv())
    return Path(path)


def write_selection_tsv(m: CorpusModel, path) -> Path:
    """The map selection's listed occurrences as tab-separated text (nothing selected: an
    error)."""
    if m.selection is None:
        raise InputError("nothing is selected on the map (Shift+drag a box)")
    atomic_write_text(Path(path), m.selection.tsv())
    return Path(path)


def figure(m: CorpusModel, data: Optional[MapData], kind: str):
    """The matplotlib figure of ``kind`` ("map" or "senses"), None when there is none."""
    if kind == "map" and data is not None:
        sel = m.selection
        panels = []
        for layer in data.layers:
            lines = m.lines.get(layer)
            box = sel.rect if sel is not None and sel.layer == layer else None
            panels.append(corpus_figures.MapPanel(
                f"layer {layer}", data.coords[layer], data.codes,
                query=data.index_of_row(lines[0].row) if lines else None, box=box))
        return corpus_figures.corpus_map_figure(
            panels, data.colours(), data.legend[:12],
            title=f"Occurrences of “{data.title}” (2-D PCA per layer)",
            marks=map_marks(m, data))
    if kind == "senses" and m.senses is not None:
        from elmo_engine.index.report import senses_figure_of

        return senses_figure_of(m.senses)          # the report's figure (the same palette)
    return None


def map_marks(m: CorpusModel, data: MapData) -> corpus_figures.MapMarks:
    """The map's marks in the on-screen colours (:mod:`~elmo_explorer.views.palette`): the
    query's ring in the colour of its star, the box selection's points (indices into ``data``)
    in the rings' colour."""
    sel = m.selection
    selected = None
    if sel is not None and sel.n:
        selected = np.flatnonzero(np.isin(data.rows, sel.rows))          # ascending
    return corpus_figures.MapMarks(query_colour=FOUND_COLOUR, selected=selected,
                                   selection_colour=SELECTED_PEN[0])


def write_figure(m: CorpusModel, data: Optional[MapData], kind: str, path,
                 options: FigureOptions) -> List[Path]:
    """Write the figure of ``kind`` (by the extension of ``path``, else ``options.formats``);
    nothing (``[]``) when there is none."""
    fig = figure(m, data, kind)
    return [] if fig is None else save_figure(fig, path, options)


