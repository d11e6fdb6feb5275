"""Nearest neighbours in the contexts view: the reference corpus, its index, the table.

:class:`ContextsNeighbours` is the part of the contexts controller
(:class:`elmo_explorer.views.contexts.controller.ContextsPanel`) that does this. The corpus is the loaded
sentences (first, so their indices match the workspace's) plus an optional text file; the index
(``elmo_engine.analysis.neighbours``) is built on the worker with progress and cancel, and
cached by checkpoint checksum + corpus tokens + vocabulary. Layer 0 answers with known words
(the corpus's types plus a ``vocab.txt`` beside the checkpoint or the demo model's).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from PySide6.QtWidgets import QFileDialog

from elmo_engine.analysis.neighbour_corpus import read_corpus, read_vocabulary
from elmo_engine.analysis.neighbour_corpus import vocabulary_file as engine_vocabulary_file
from elmo_engine.analysis.neighbours import NeighbourTable, neighbour_table
from elmo_explorer.state.worker import Lane
from elmo_explorer.views.contexts.widgets import neighbours_html

#: the request kinds of the view's jobs (a newer request of a kind supersedes older ones)
COMPARE, INDEX, NEIGHBOURS = "contexts-compare", "contexts-index", "contexts-neighbours"

if TYPE_CHECKING:
    from elmo_explorer.views.contexts.controller import ContextsPanel


def vocabulary_file(info) -> Optional[Path]:
    """A ``vocab.txt`` beside the checkpoint, else the demo model's, else None (the engine's
    rule, shared with ``elmo-explorer contexts --neighbours``)."""
    return engine_vocabulary_file(None if info is None else info.options_path)


class ContextsNeighbours:
    """Reference corpus, neighbour index and neighbour table of the contexts panel."""

    def __init__(self, panel: "ContextsPanel"):
        self.panel = panel

    def set_reference_file(self, path) -> None:
        """Add a text file's sentences to the neighbour corpus (read on the worker)."""
        path = Path(path)

        def job(state):
            return read_corpus(path)

        def done(tokens):
            m.reference_path, m.reference_tokens = path, tokens
            self.panel.view.ref_label.setText(f"{path.name}: {len(tokens):,} sentences")
            self.request_index()

        m = self.panel.model
        self.panel.ws.worker.submit(f"Reading {path.name}", job, on_done=done,
                                    on_failed=self.panel.show_error, kind="contexts-reference")

    def ask_reference(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self.panel,
                                              "Reference text (one sentence per line)", "",
                                              "Text (*.txt *.txt.gz);;All files (*)")
        if name:
            self.set_reference_file(name)

    def request_index(self) -> None:
        ws, m = self.panel.ws, self.panel.model
        if ws.embedder is None or not ws.all_embedded():
            return
        corpus = m.corpus(ws.tokens)
        sig = (ws.model_info.checksum if ws.model_info else "", tuple(map(tuple, corpus)))
        if sig == m.index_sig:
            return
        m.index_sig = sig
        emb, cache, vocab = ws.embedder, self.panel.index_cache, vocabulary_file(ws.model_info)

        def job(state):
            words = read_vocabulary(vocab) if vocab is not None else []
            return cache.get_or_build(emb, corpus, words, state)

        def done(index):                         # (a changed model or corpus superseded older ones)
            m.index = index
            if self.panel.view.correct_box.isChecked():
                self.panel.request_compare()     # the corpus mean is the better reference
            self.request_neighbours()

        def failed(message: str):
            m.index_sig = None
            self.panel.show_error(message)
            self.panel.done("neighbours")

        ws.worker.submit("Indexing the neighbour corpus", job, lane=Lane.LONG, kind=INDEX,
                         on_done=done, on_failed=failed)

    def request_neighbours(self) -> None:
        ws, m, v = self.panel.ws, self.panel.model, self.panel.view
        index = m.index
        if index is None or not m.word:
            return                                   # the index job asks again when it is done
        vec, exclude = None, []
        if m.comparison is not None and m.query in m.comparison.occurrences:
            s, t = m.query
            act = ws.activations[s] if s < len(ws.activations) else None
            if act is None:
                return
            vec = act[:, t].copy()                                  # (L+1, 2P)
            exclude = [m.query]
        emb, word, k = ws.embedder, m.word, v.k_box.value()
        direction = v.direction_box.currentText()
        query = m.query if vec is not None else None

        def job(state):
            if vec is None:                   # not in the sentences: the word on its own
                alone = emb.embed([[word]])[0][:, 0]                # (L+1, 2P)
                return neighbour_table(index, alone, word, k, direction)
            return neighbour_table(index, vec, word, k, direction, exclude)

        ws.worker.submit(f"Nearest neighbours of '{word}'", job, lane=Lane.INTERACTIVE,
                         kind=NEIGHBOURS, on_done=lambda t: self._on_neighbours(t, query, index),
                         on_failed=self._on_neighbours_failed)

    def _on_neighbours(self, table: NeighbourTable, query, index) -> None:
        """The neighbours of the current request (the worker drops superseded ones)."""
        panel, m, v = self.panel, self.panel.model, self.panel.view
        m.table = table
        where = ""
        if query is not None:
            where = (f" (the occurrence in sentence {query[0] + 1}; "
                     f"{v.direction_box.currentText()} halves)")
        v.neigh_title.setText(f"Nearest neighbours of '{table.query}'{where}")
        layers = [(name, [(nb.score, index.tokens[nb.sentence], nb.token) for nb in nbs])
                  for name, nbs in table.layers]
        note = "" if query is not None else (
            "not in the loaded sentences: the word on its own (no context); add a sentence "
            "with it to see its neighbours in context")
        v.neighbours.setHtml(neighbours_html(f"corpus: {index.n_tokens:,} tokens, "
                                                f"{len(index.words or [])} known words",
                                                table.words, layers, note))
        panel.export_actions()[2].setEnabled(True)
        panel.neighbours_drawn.emit()
        panel.done("neighbours")

    def _on_neighbours_failed(self, message: str) -> None:
        self.panel.show_error(message)
        self.panel.done("neighbours")
