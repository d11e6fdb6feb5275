"""Workspace and report hooks of the contexts panel: view state, report figures and tables.

:class:`ContextsReport` is mixed into :class:`elmo_explorer.panels.contexts.ContextsPanel`; it gives
:mod:`elmo_explorer.workspace_actions` the optional panel methods it looks for:

* ``view_state() -> dict`` / ``restore_view_state(dict)``: word, ignore-case, groups, mix weights,
  direction, anisotropy correction, selected occurrence, k and the reference text file;
* ``report_figures(folder) -> list[Path]``: one publication figure per heatmap (layer 0 … L and
  the mix), PNG + SVG (+ PDF when asked), at the report dialog's size and DPI;
* ``report_tables() -> list[ReportTable]``: the summary, groups, matrices and neighbours exactly
  as the panel shows them.

Figures are drawn on the GUI thread (Qt painting); nothing here touches torch.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

from PySide6.QtCore import QTimer

from elmo_explorer.figure_export import FigureOptions, panel_figure_options, write_figures
from elmo_explorer.panels.heatmap import HeatmapFigure
from elmo_engine.analysis import compare as cmp
from elmo_engine.io.report import ReportTable

#: the version of the dict written by ``view_state`` (restore accepts older/partial ones)
STATE_VERSION = 1


def _num(v: float) -> Optional[float]:
    """A table cell: the value rounded, NaN (undefined) as an empty cell."""
    return None if v is None or math.isnan(v) else round(float(v), 6)


def _safe(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")
    return keep[:40] or "word"


class ContextsReport:
    """The workspace/report methods of the contexts panel."""

    def figure_options(self) -> FigureOptions:
        """The report dialog's size/DPI (File → Export report), else the defaults."""
        return panel_figure_options(self)

    # ---- figures --------------------------------------------------------------------------
    def heatmap_figure(self, view: int) -> HeatmapFigure:
        """The publication figure of one view (0 … L, L+1 = mix) of the current comparison."""
        comp = self.comparison
        if comp is None:
            raise LookupError("nothing to draw yet: pick a word that occurs in the sentences")
        name = comp.names[view]
        if name == "layer 0":
            what = "layer 0 (character CNN)"
        elif name == "mix":
            what = "scalar mix (" + ", ".join(f"{w:.2f}" for w in comp.weights) + ")"
        else:
            what = f"{name} (biLSTM)"
        half = f", {comp.direction} half" if name != "layer 0" and comp.direction != "both" else ""
        n = len(comp.occurrences)
        titles = [f"'{comp.word}' in {n} contexts: {what}{half}", f"'{comp.word}': {what}{half}",
                  f"'{comp.word}': {name}{half}", f"{name}{half}"]
        bars = (["cosine similarity, anisotropy-corrected", "cosine (corrected)"]
                if comp.corrected else ["cosine similarity", "cosine"])
        return HeatmapFigure(comp.matrices[view], comp.labels, titles, self.heatmaps.levels, bars)

    def report_figures(self, folder, options: Optional[FigureOptions] = None) -> List[Path]:
        """Write every heatmap (layer 0 … L, mix) into ``folder`` in the figure formats
        (PNG and SVG by default, PDF on request); return the files in order. Nothing is written
        (an empty list) when no word is compared."""
        comp = self.comparison
        if comp is None:
            return []
        return write_figures(
            [(f"heatmap_{_safe(comp.word)}_{name.replace(' ', '_')}",
              lambda view=view: self.heatmap_figure(view)) for view, name in enumerate(comp.names)],
            folder, options or self.figure_options())

    # ---- tables ---------------------------------------------------------------------------
    def report_tables(self) -> List[ReportTable]:
        """The panel's results as shown: summary, groups, matrices (CSV only), neighbours."""
        comp, tables = self.comparison, []
        if comp is not None:
            setting = (f"{comp.direction} halves, "
                       + ("anisotropy-corrected" if comp.corrected else "raw cosine")
                       + ", mix weights " + " ".join(f"{w:.3f}" for w in comp.weights))
            tables.append(ReportTable(
                "contexts_view_summary", f"Contexts view: '{comp.word}' per layer",
                [{"view": name, **{row: _num(vals[k]) for row, vals in comp.summary_rows()}}
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
        if self.table is not None and self.index is not None:
            tables.append(self._neighbour_table())
        return tables

    def _neighbour_table(self) -> ReportTable:
        table, index = self.table, self.index
        n_loaded = len(self.ws.tokens)
        ref = self.reference_path.name if self.reference_path else "reference text"
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
        where = (f"the occurrence in sentence {self.query[0] + 1}" if self.query is not None
                 and self.comparison is not None else "the word on its own")
        return ReportTable(
            "contexts_neighbours", f"Nearest neighbours of '{table.query}'", rows,
            caption=f"k = {self.k_box.value()} nearest tokens per layer to {where} "
                    f"({self.direction_box.currentText()} halves) in a corpus of "
                    f"{index.n_tokens:,} tokens; layer 0: nearest known words (character CNN).")

    # ---- probe runs (none in this view) -------------------------------------------------------
    def probe_runs(self) -> List[dict]:
        return []

    def restore_probe_runs(self, runs: List[dict]) -> None:
        """This view shows no probe runs."""

    # ---- view state ------------------------------------------------------------------------
    def view_state(self) -> Dict[str, Any]:
        """The view's parameters as JSON values (see docs/guide/contexts.md)."""
        groups = {w: [{"sentence": s, "token": t, "group": g}
                      for (s, t), g in sorted(labels.items())]
                  for w, labels in self._groups.items() if labels}
        return {"version": STATE_VERSION, "word": self.word,
                "ignore_case": self.case_box.isChecked(),
                "weights": [float(w) for w in self.mix.weights()],
                "direction": self.direction_box.currentText(),
                "corrected": self.correct_box.isChecked(),
                "groups": groups,
                "selected": (None if self.query is None else
                             {"sentence": int(self.query[0]), "token": int(self.query[1])}),
                "k": self.k_box.value(),
                "reference_file": str(self.reference_path) if self.reference_path else None}

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict; missing, unknown or invalid keys are ignored."""
        if not isinstance(state, dict):
            return
        boxes = (self.case_box, self.correct_box, self.direction_box, self.k_box, self.mix)
        for box in boxes:
            box.blockSignals(True)
        try:
            if isinstance(state.get("ignore_case"), bool):
                self.case_box.setChecked(state["ignore_case"])
            if isinstance(state.get("corrected"), bool):
                self.correct_box.setChecked(state["corrected"])
            if state.get("direction") in cmp.DIRECTIONS:
                self.direction_box.setCurrentText(state["direction"])
            k = state.get("k")
            if isinstance(k, int) and not isinstance(k, bool):
                self.k_box.setValue(k)                       # clamped to the box's range
            w = state.get("weights")
            if (isinstance(w, list) and len(w) == len(self.mix.boxes) and
                    all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0
                        for x in w)):
                self.mix.set_weights(w)
        finally:
            for box in boxes:
                box.blockSignals(False)
        self._restore_groups(state.get("groups"))
        sel = state.get("selected")
        if isinstance(sel, dict) and self._valid_ref(sel.get("sentence"), sel.get("token")):
            self.query = (sel["sentence"], sel["token"])
        word = state.get("word")
        if isinstance(word, str) and word.strip():
            self._keep_word = word.strip()       # the workspace's selection follows in this call
            QTimer.singleShot(0, self, lambda: setattr(self, "_keep_word", None))
            self.word = ""                       # recompute even when it is the same word
            self.set_word(word)
        else:
            self._recompute_all()
        ref = state.get("reference_file")
        if isinstance(ref, str) and ref and Path(ref).is_file() and (
                self.reference_path is None or Path(ref) != self.reference_path):
            self.set_reference_file(ref)

    def _valid_ref(self, s, t) -> bool:
        tokens = self.ws.tokens
        return (isinstance(s, int) and isinstance(t, int) and not isinstance(s, bool)
                and not isinstance(t, bool) and 0 <= s < len(tokens) and 0 <= t < len(tokens[s]))

    def _restore_groups(self, groups) -> None:
        if not isinstance(groups, dict):
            return
        out: Dict[str, Dict[tuple, str]] = {}
        for word, items in groups.items():
            if not isinstance(word, str) or not isinstance(items, list):
                continue
            labels = {}
            for it in items:
                if not isinstance(it, dict) or not isinstance(it.get("group"), str):
                    continue
                s, t = it.get("sentence"), it.get("token")
                if (self._valid_ref(s, t) and it["group"].strip()
                        and self.ws.tokens[s][t].casefold() == word.casefold()):
                    labels[(s, t)] = it["group"].strip()
            if labels:
                out[word] = labels
        self._groups = out
