"""Linked interaction of the projection view: search, hover, click, selection, legend, data sets.

A mixin for :class:`elmo_explorer.panels.projection.ProjectionPanel`; it uses the panel's ``tokens``,
``layers``, ``plots``, ``legend``, ``info``, ``controls`` and ``ws``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtWidgets import QFileDialog

from elmo_engine.analysis.projection import TokenSet, labelled_tokens, load_labelled


class ProjectionInteraction:
    """Search, hover, click, box/legend selection and the labelled data set of the panel."""

    def search(self, text: str) -> np.ndarray:
        """Mark every point whose token is ``text`` (case-insensitive) in all plots."""
        text = text.strip()
        hits = self.tokens.find(text) if (self.tokens is not None and text) else np.zeros(0, int)
        self.plots.set_highlight(hits)
        if text and self.tokens is not None:
            self.info.setText(f"'{text}': {len(hits):,} of {len(self.tokens):,} tokens")
        return hits

    def describe(self, i: int, k: int = -1) -> str:
        t = self.tokens
        where = f"{self.layers[k].name} · " if 0 <= k < len(self.layers) else ""
        label = f" · {t.label_of(i)}" if t.label_of(i) else ""
        return (f"{where}'{t.words[i]}'{label} · sentence {int(t.sentence[i]) + 1}: "
                f"{t.context(i, 12)}")

    def _on_hover(self, k: int, i: int) -> None:
        if k >= 0:
            self._current_plot = k
        if i >= 0 and self.tokens is not None:
            self.info.setText(self.describe(i, k))

    def _on_click(self, k: int, i: int) -> None:
        if i < 0 or self.tokens is None:
            return
        self.info.setText(self.describe(i, k))
        if self._from_loaded():
            from elmo_explorer.workspace import TokenRef
            self.ws.select(TokenRef(int(self.tokens.sentence[i]), int(self.tokens.position[i])))

    def _on_selection(self, idx: np.ndarray) -> None:
        if self.tokens is None:
            return
        words = sorted({self.tokens.words[i] for i in idx.tolist()})
        more = "…" if len(words) > 12 else ""
        self.info.setText(f"{len(idx):,} tokens selected: {', '.join(words[:12])}{more}")

    def _on_legend(self, row: int) -> None:
        codes = self._legend_codes
        if codes is None:
            return
        idx = np.flatnonzero(codes == row)
        self.plots.set_selection(idx)
        self._on_selection(idx)

    def _from_loaded(self) -> bool:
        return (self.tokens is not None and self.controls.source_key() != "dataset"
                and len(self.tokens.sentences) == len(self.ws.tokens))

    def _on_ws_selection(self, ref) -> None:
        if ref is None or not self._from_loaded() or self.controls.search.text().strip():
            return
        t = self.tokens
        hit = np.flatnonzero((t.sentence == ref.sentence) & (t.position == ref.token))
        self.plots.set_highlight(hit)
        if len(hit):
            self.info.setText(self.describe(int(hit[0])))

    # ---- data set -------------------------------------------------------------------------------
    def ask_open_dataset(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a labelled data set", "",
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
            self.dataset, self.dataset_path = tokens, path
            self.controls.dataset_label.setText(f"{path.name}: {len(tokens):,} labelled tokens")
            if run:
                self.controls.set_colour_by(colour)
                self.controls.set_source("dataset")
                self.run(auto=False)

        return self.ws.worker.submit(f"Reading {path.name}", job, on_result=done,
                                     on_error=lambda m: self._message(f"Cannot open: {m}"),
                                     group="projection-data")
