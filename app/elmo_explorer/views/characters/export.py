"""Exports of the Characters view, as functions of values: the filter atlas as TSV (the engine's
format, ``chars filters --tsv``), the map of the filters by category and the perturbation chart
as PNG, SVG or PDF, drawn by :mod:`elmo_engine.io.figures.characters`."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from elmo_engine.atomic import atomic_write_text
from elmo_engine.io import figures
from elmo_engine.io.figures import characters as char_figures
from elmo_explorer.views.characters.model import CharactersModel

#: File → Export entries of the figures: (menu text, kind)
ENTRIES = (("Filter map (PNG/SVG/PDF)…", "filters"),
           ("Perturbation chart (PNG/SVG/PDF)…", "perturb"))


def has(m: CharactersModel, kind: str) -> bool:
    return bool(m.atlas) if kind in ("filters", "tsv") else bool(m.sweep)


def figure(m: CharactersModel, kind: str):
    """The figure of ``kind`` ("filters", "perturb"), or None when there is nothing to draw."""
    if kind == "filters":
        if not m.atlas:
            return None
        return char_figures.filter_map_figure(m.category_counts(),
                                              f"{len(m.atlas)} filters over {m.atlas_words:,} "
                                              f"words")
    if not m.sweep:
        return None
    return char_figures.perturbation_figure(
        m.sweep["mean_per_type"], f"'{m.sweep['word']}' perturbed in context")


def write_figure(m: CharactersModel, kind: str, path, options=None) -> List[Path]:
    fig = figure(m, kind)
    if fig is None:
        raise LookupError("nothing to export yet")
    return figures.save(fig, path, style=options.style() if options is not None else None)


def write_tsv(tsv: Optional[str], path) -> None:
    """The atlas's TSV (built by the engine's :meth:`Atlas.to_tsv`)."""
    if not tsv:
        raise LookupError("the atlas is not built yet")
    atomic_write_text(path, tsv)
