"""The contexts view's report parts, as functions of values: publication figures of its
heatmaps and its tables (the panel's ``report_figures`` and ``report_tables`` call them):

* the heatmaps of every view side by side, ordered by group, and the per-view summary with the
  permutation p-values (:mod:`elmo_engine.io.figures.contexts`), PNG + SVG (+ PDF when
  asked) at the report dialog's size and DPI;
* the summary, groups, matrices and neighbours exactly as the view shows them.

Figures are matplotlib figures drawn by the engine (the one figure path); nothing here paints
widgets or touches torch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.contexts.report import safe_name
from elmo_engine.io.report import ReportTable, table_number
from elmo_explorer.common.figure_export import FigureOptions, write_figures
from elmo_explorer.views.contexts.model import ContextsModel


def heatmap_figure(comp: Optional[cmp.Comparison], view: Optional[int] = None):
    """The matplotlib figure of one view (0 … L, L+1 = mix) of the current comparison, or
    of all views side by side (None), drawn by the engine's one figure path."""
    from elmo_engine.io.figures.contexts import contexts_heatmaps

    if comp is None:
        raise LookupError("nothing to draw yet: pick a word that occurs in the sentences")
    return contexts_heatmaps(comp, None if view is None else [view])


def report_figures(comp: Optional[cmp.Comparison], folder,
                   options: FigureOptions) -> List[Path]:
    """Write the heatmaps (all views side by side) and the per-view summary (self-, within-
    and between-group similarity, p-values) into ``folder`` in the figure formats (PNG and
    SVG by default, PDF on request); return the files in order. Nothing is written (an
    empty list) when no word is compared."""
    from elmo_engine.io.figures.contexts import contexts_heatmaps, contexts_summary

    if comp is None:
        return []
    word = safe_name(comp.word)
    return write_figures([(f"contexts_{word}_heatmaps", lambda: contexts_heatmaps(comp)),
                          (f"contexts_{word}_summary", lambda: contexts_summary(comp))],
                         folder, options)


def report_tables(m: ContextsModel, n_loaded: int, k: int, direction: str) -> List[ReportTable]:
    """The view's results as shown: summary, groups, matrices (CSV only), neighbours
    (``n_loaded`` sentences loaded; ``k`` neighbours, ``direction`` halves shown)."""
    comp, tables = m.comparison, []
    if comp is not None:
        setting = (f"{comp.direction} halves, "
                   + ("anisotropy-corrected" if comp.corrected else "raw cosine")
                   + ", mix weights " + " ".join(f"{w:.3f}" for w in comp.weights))
        tables.append(ReportTable(
            "contexts_view_summary", f"Contexts view: '{comp.word}' per layer",
            [{"view": name, **{row: table_number(vals[k]) for row, vals in comp.summary_rows()}}
             for k, name in enumerate(comp.names)],
            caption=f"As shown in the contexts view ({len(comp.occurrences)} occurrences; "
                    f"{setting}). Within/between: mean cosine of pairs in the same / in "
                    "different groups; empty without group labels."))
        if any(comp.groups):
            tables.append(ReportTable(
                "contexts_view_groups", f"Groups of the occurrences of '{comp.word}'",
                [{"#": i + 1, "sentence": s + 1, "token": t + 1, "group": g,
                  "context": comp.labels[i]}
                 for i, ((s, t), g) in enumerate(zip(comp.occurrences, comp.groups))]))
        heads = [str(j + 1) for j in range(len(comp.occurrences))]
        tables.append(ReportTable(
            "contexts_view_similarity", f"Cosine matrices of '{comp.word}', every view",
            [{"view": name, "occurrence": f"{i + 1}: {comp.labels[i]}",
              **{h: round(float(comp.matrices[k, i, j]), 6) for j, h in enumerate(heads)}}
             for k, name in enumerate(comp.names) for i in range(len(heads))],
            ["view", "occurrence", *heads], caption="The matrices of the figures, one block "
            "per view.", show=False))
    if m.table is not None and m.index is not None:
        tables.append(_neighbour_table(m, n_loaded, k, direction))
    return tables


def _neighbour_table(m: ContextsModel, n_loaded: int, k: int, direction: str) -> ReportTable:
    table, index = m.table, m.index
    ref = m.reference_path.name if m.reference_path else "reference text"
    rows: List[Dict[str, Any]] = [
        {"view": "layer 0", "rank": r, "cosine": round(float(s), 4), "neighbour": w,
         "source": "known words", "sentence": None, "context": ""}
        for r, (w, s) in enumerate(table.words, start=1)]
    for name, nbs in table.layers:
        for r, nb in enumerate(nbs, start=1):
            toks = index.tokens[nb.sentence]
            loaded = nb.sentence < n_loaded
            rows.append({"view": name, "rank": r, "cosine": round(float(nb.score), 4),
                         "neighbour": toks[nb.token],
                         "source": "loaded sentences" if loaded else ref,
                         "sentence": nb.sentence + 1 if loaded else nb.sentence - n_loaded + 1,
                         "context": cmp.snippet(toks, nb.token, 6, 90)})
    where = (f"the occurrence in sentence {m.query[0] + 1}" if m.query is not None
             and m.comparison is not None else "the word on its own")
    return ReportTable(
        "contexts_neighbours", f"Nearest neighbours of '{table.query}'", rows,
        caption=f"k = {k} nearest tokens per layer to {where} "
                f"({direction} halves) in a corpus of "
                f"{index.n_tokens:,} tokens; layer 0: nearest known words (character CNN).")
