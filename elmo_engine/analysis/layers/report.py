"""The Layers view's hubness in a report (:mod:`elmo_engine.analysis.report` adds it beside
the contextuality tables): per layer the skewness of the k-occurrence N_k, the share of
anti-hubs and the top hubs with an example context (Radovanović et al. 2010), as a table and
the :func:`~elmo_engine.io.figures.layers.hubness_figure`; from the ``hubness`` object of a
``layers --json`` document (a document without one adds nothing)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.report import ReportPart, ReportTable, saved_figures, table_number

#: the hubs per layer the report's table lists
REPORT_HUBS = 5


def valid_hubness(h: Any) -> bool:
    """Whether ``h`` has the parts the table and the figure read."""
    try:
        return (isinstance(h, dict) and isinstance(h["k"], int) and isinstance(h["n"], int)
                and bool(h["layers"]) and all(
                    isinstance(e["layer"], int) and isinstance(e["skewness"], (int, float))
                    and isinstance(e["distribution"], list) and isinstance(e["hubs"], list)
                    and all(isinstance(x["token"], str) and isinstance(x["count"], int)
                            for x in e["hubs"]) for e in h["layers"]))
    except (KeyError, TypeError):
        return False


def hubness_part(doc: dict, figure_dir: Optional[Path], style: FigureStyle,
                 where: str) -> ReportPart:
    """The hubness table (and figure, with a figure folder) of a ``layers --json`` ``doc``;
    ``where``: the model and the corpus, for the captions."""
    from elmo_engine.io.figures.layers import hubness_figure

    part = ReportPart()
    h = doc.get("hubness")
    if not isinstance(h, dict) or not valid_hubness(h):
        return part
    rows = [{"layer": e["layer"], "rank": r, "token": x["token"], "N_k": x["count"],
             "context": x.get("context", ""), "skewness": table_number(e["skewness"]),
             "anti-hubs": table_number(e.get("anti_hubs"))}
            for e in h["layers"] for r, x in enumerate(e["hubs"][:REPORT_HUBS], 1)]
    how = (f"k={h['k']}, {h['n']:,} token occurrences ({where}), exact "
           f"{h.get('metric', 'cosine')} neighbours")
    part.tables.append(ReportTable(
        "layers_hubness", "Hubs per layer", rows,
        ["layer", "skewness", "anti-hubs", "rank", "token", "N_k", "context"],
        caption=f"Hubness (Radovanović et al. 2010; {how}): N_k counts the tokens that have "
                "this one among their k nearest neighbours; its skewness is 0 when every "
                "token is as often a neighbour as any other, and large when a few hubs are "
                "everyone's neighbour (anisotropic vectors, Ethayarajh 2019, make them "
                "likelier); anti-hubs: the share with N_k = 0."))
    if figure_dir is not None:
        skew = ", ".join(f"layer {e['layer']} {e['skewness']:.2f}" for e in h["layers"])
        part.figures += saved_figures(
            hubness_figure(h), figure_dir, "layers_hubness",
            f"Hubness per layer ({how}): the skewness of N_k ({skew}) and how many tokens "
            "have each N_k (log scale).", style)
    return part


__all__ = ["REPORT_HUBS", "hubness_part", "valid_hubness"]
