"""The report's "Usefulness beside identity" section (issue 42): the table of the probe runs
made with cumulative scoring (Tenney et al. 2019, "BERT Rediscovers the Classical NLP Pipeline"),
their figure, and each task's two expected layers and disagreement flag as notes; computed from
the runs' values and added with :meth:`~elmo_engine.io.report.ReportSpec.add`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.report import ReportPart, ReportTable, saved_figures


def usefulness_part(results: Sequence, figure_dir: Optional[Path], style: FigureStyle,
                    model: str) -> ReportPart:
    """The section for the runs (:class:`~.experiment.ProbeResult`) that carry a usefulness
    table; an empty part when none does. Figures only with a ``figure_dir``."""
    from elmo_engine.analysis.probes.usefulness import COLUMNS, summary_lines, table_rows

    part = ReportPart()
    tables = [r.usefulness for r in results if getattr(r, "usefulness", None) is not None]
    if not tables:
        return part
    part.tables.append(ReportTable(
        "probe_usefulness", "Usefulness beside identity",
        [dict(zip(COLUMNS, row)) for row in table_rows(tables)], list(COLUMNS),
        caption="Per layer: the per-layer probe's score, selectivity (task − control task, "
                "Hewitt & Liang 2019), the online MDL codelength of the training labels and its "
                "compression (Voita & Titov 2020), the scalar-mix weight, the cumulative score "
                "of a mix probe on layers 0..ℓ and the gain Δℓ of adding layer ℓ (Tenney et al. "
                "2019); mean ± sd over seeds."))
    part.notes += [line for t in tables for line in summary_lines(t)]
    if figure_dir is None:
        return part
    from elmo_engine.io.figures.usefulness import usefulness_results_figure

    part.figures += saved_figures(
        usefulness_results_figure(results), figure_dir, "probe_usefulness",
        f"Usefulness beside identity on {model}: scalar-mix weights and the gain Δℓ of adding "
        "layer ℓ (bars, ± sd), per-layer and cumulative scores (lines), the expected layer from "
        "the weights (E_s, solid) and from the Δs (E_Δ, dotted); ⚠ in a title: they differ by "
        "0.5 layer or more (Tenney et al. 2019).", style)
    return part


__all__ = ["usefulness_part"]
