"""Linked interaction of the projection view: search, hover, click, selection, legend, data sets.

:class:`ProjectionInteraction` is the part of the projection controller
(:class:`elmo_explorer.views.projection.controller.ProjectionPanel`) that does this, from the panel's model
(the drawn tokens and layers) and view (plots, legend, info line, controls).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtWidgets import QFileDialog

from elmo_engine.analysis.projection import TokenSet, labelled_tokens, load_labelled
from elmo_explorer.state.workspace import TokenRef

if TYPE_CHECKING:
    from elmo_explorer.views.projection.controller import ProjectionPanel


class ProjectionInteraction:
    """Search, hover, click, box/legend selection and the labelled data set of the panel."""

    def __init__(self, panel: "ProjectionPanel"):
        self.panel = panel
        self.model, self.view = panel.model, panel.view

    def search(self, text: str) -> np.ndarray:
        """Mark every point whose token is ``text`` (case-insensitive) in all plots."""
        text = text.strip()
        tokens = self.model.tokens
        hits = tokens.find(text) if (tokens is not None and text) else np.zeros(0, int)
        self.view.plots.set_highlight(hits)
        if text and tokens is not None:
            self.view.info.setText(f"'{text}': {len(hits):,} of {len(tokens):,} tokens")
        return hits

    def describe(self, i: int, k: int = -1) -> str:
        t, layers = self.model.tokens, self.model.layers
        where = f"{layers[k].name} · " if 0 <= k < len(layers) else ""
        label = f" · {t.label_of(i)}" if t.label_of(i) else ""
        return (f"{where}'{t.words[i]}'{label} · sentence {int(t.sentence[i]) + 1}: "
                f"{t.context(i, 12)}")

    def on_hover(self, k: int, i: int) -> None:
        if k >= 0:
            self.model.current_plot = k
        if i >= 0 and self.model.tokens is not None:
            self.view.info.setText(self.describe(i, k))

    def on_click(self, k: int, i: int) -> None:
        tokens = self.model.tokens
        if i < 0 or tokens is None:
            return
        self.view.info.setText(self.describe(i, k))
        if self._from_loaded():
            self.panel.ws.select(TokenRef(int(tokens.sentence[i]), int(tokens.position[i])))

    def on_selection(self, idx: np.ndarray) -> None:
        if self.model.tokens is None:
            return
        words = sorted({self.model.tokens.words[i] for i in idx.tolist()})
        more = "…" if len(words) > 12 else ""
        self.view.info.setText(f"{len(idx):,} tokens selected: {', '.join(words[:12])}{more}")

    def on_legend(self, row: int) -> None:
        codes = self.model.legend_codes
        if codes is None:
            return
        idx = np.flatnonzero(codes == row)
        self.view.plots.set_selection(idx)
        self.on_selection(idx)

    def _from_loaded(self) -> bool:
        tokens = self.model.tokens
        return (tokens is not None and self.view.controls.source_key() != "dataset"
                and len(tokens.sentences) == len(self.panel.ws.tokens))

    def on_ws_selection(self, ref) -> None:
        if ref is None or not self._from_loaded() or self.view.controls.search.text().strip():
            return
        t = self.model.tokens
        hit = np.flatnonzero((t.sentence == ref.sentence) & (t.position == ref.token))
        self.view.plots.set_highlight(hit)
        if len(hit):
            self.view.info.setText(self.describe(int(hit[0])))

    # ---- data set -------------------------------------------------------------------------------
    def ask_open_dataset(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.panel, "Open a labelled data set", "",
            "Labelled data (*.conllu *.conllu.gz *.xml *.tsv *.txt *.gz);;All files (*)")
        if path:
            self.open_dataset(path)

    def open_dataset(self, path, colour: str = "label", run: bool = True) -> int:
        """Read a labelled data set on the worker, then (``run``) project its labelled tokens
        coloured by ``colour``."""
        path = Path(path)

        def job(state):
            state.report(0, 1, f"reading {path.name}")
            return labelled_tokens(load_labelled(path), source=path.name)

        def done(tokens: TokenSet) -> None:
            c = self.view.controls
            self.model.dataset, self.model.dataset_path = tokens, path
            c.dataset_label.setText(f"{path.name}: {len(tokens):,} labelled tokens")
            if run:
                c.set_colour_by(colour)
                c.set_source("dataset")
                self.panel.run(auto=False)

        return self.panel.ws.worker.submit(
            f"Reading {path.name}", job, on_done=done,
            on_failed=lambda m: self.view.message(f"Cannot open: {m}"), kind="projection-data")
