"""Exports of the Layers view, as functions of values: the curves, the CKA heatmap and the MDL
codelengths as PNG, SVG or PDF — drawn by the one figure module, :mod:`elmo_engine.io.figures`
(matplotlib, Agg) — and the results as JSON. The panel
(:class:`~elmo_explorer.views.layers.controller.LayersPanel`) builds the File → Export entries
and asks for the paths.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

from elmo_engine.atomic import atomic_write_text
from elmo_engine.io import figures
from elmo_engine.io.figures import layers as layer_figures
from elmo_explorer.views.layers.model import LayersModel

#: the view's figures (also its report figures, as ``layers_<kind>.<ext>``)
FIGURES = ("contextuality", "cka", "mdl", "hubness")
#: the hubs per layer as TSV (not a figure)
HUBS_TSV = "hubs-tsv"
#: File → Export entries of the figures (and the hubs' TSV): (menu text, kind)
ENTRIES = (("Layer curves (PNG/SVG/PDF)…", "contextuality"),
           ("CKA heatmap (PNG/SVG/PDF)…", "cka"),
           ("MDL codelengths (PNG/SVG/PDF)…", "mdl"),
           ("Hubness per layer (PNG/SVG/PDF)…", "hubness"),
           ("Hubs per layer (TSV)…", HUBS_TSV))


def has(m: LayersModel, kind: str) -> bool:
    """Whether there is a figure (or TSV) of ``kind`` to export."""
    if kind in ("hubness", HUBS_TSV):
        return m.hubness() is not None
    return bool(m.mdl) if kind == "mdl" else m.result is not None


def figure(m: LayersModel, kind: str, cka_title: str):
    """The export figure (matplotlib, :mod:`elmo_engine.io.figures`) of ``kind``
    ("contextuality", "cka", "mdl", "hubness"), or None when there is nothing to draw."""
    if kind == "mdl":
        return layer_figures.mdl_figure(list(m.mdl.values()), "MDL probes") if m.mdl else None
    if m.result is None:
        return None
    if kind == "hubness":
        h = m.hubness()
        return None if h is None else layer_figures.hubness_figure(h)
    title = m.summary().split(" — ")[0]
    if kind == "contextuality":
        return layer_figures.contextuality_figure(m.result["contextuality"], m.settings.adjusted,
                                                  title)
    compared = m.compare is not None
    return layer_figures.cka_figure(m.cka_shown(), cka_title, "model B" if compared else "layer",
                                    "model A" if compared else "layer")


def write_figure(m: LayersModel, kind: str, cka_title: str, path, options=None) -> List[Path]:
    """Write one figure as PNG, SVG or PDF (by extension), at the export options' width and
    dpi exactly (default: 6.5 in at 300 dpi)."""
    fig = figure(m, kind, cka_title)
    if fig is None:
        raise LookupError("nothing to export yet: run the analysis first")
    return figures.save(fig, path, style=options.style() if options is not None else None)


def write_hubs(m: LayersModel, path) -> Path:
    """Every layer's top hubs as TSV (:func:`elmo_engine.analysis.layers.tables.hubness_tsv`)."""
    from elmo_engine.analysis.layers.tables import hubness_tsv

    h = m.hubness()
    if h is None:
        raise LookupError("no hubness yet: run the analysis first")
    atomic_write_text(path, hubness_tsv(h))
    return Path(path)


def write_json(m: LayersModel, path) -> None:
    """The shown results (``view_state``'s result, comparison and MDL runs) as JSON."""
    atomic_write_text(path, json.dumps(m.view_state(), indent=2, ensure_ascii=False) + "\n")
