"""The Corpus view's controller: :class:`CorpusPanel` wires the model, the widgets, the workspace
(its model and its token selection) and the worker.

Jobs, each through the view's job group (``worker.group("corpus")``) with a request kind (a
newer one of the kind supersedes the older): building or resuming an index (long lane,
``build``, cancellable), opening one (``open``), searching a query per layer (interactive lane,
``search``), inducing a word's senses and then mapping its occurrences (long lane, ``senses``,
``map``), listing a box selection on the map (interactive lane, ``selection``). The view is busy
while its group is not idle.
File → Export: the panel (its :class:`~.exporting.PanelExports` part) asks for the path and calls
:mod:`.export`'s functions of values.
"""
from __future__ import annotations

import os
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_explorer.common.save_dialog import existing_folder
from elmo_explorer.common.selection import normalized
from elmo_explorer.state.settings import stored_settings
from elmo_explorer.state.worker import JobHandle, Lane
from elmo_explorer.views import corpus_index
from elmo_explorer.views.corpus import jobs
from elmo_explorer.views.corpus.atlas import MapData
from elmo_explorer.views.corpus.exporting import PanelExports
from elmo_explorer.views.corpus.model import (CorpusModel, CorpusOptions, MapScope, MapSelection,
                                              Query)
from elmo_explorer.views.corpus.view import CorpusView, HINT
from elmo_explorer.views.protocol import PanelDefaults
from elmo_explorer.views.reading import CorpusReading
from elmo_explorer.views.reading_dialog import window_qsettings

log = logging.getLogger(__name__)
SETTINGS_KEY = "corpus/last_index"
OPTIONS_KEY = "corpus/options"          # the options, remembered across launches (JSON)
#: the jobs that read the open index: closing it makes them stale
INDEX_JOBS = ("search", "selection", "map", "senses")


class CorpusPanel(PanelExports, PanelDefaults, QWidget):
    """A corpus index searched by example, per layer.

    Signals: ``ready()`` (no job of this view is running), ``results_changed()`` (new
    concordance lines, senses or map), ``index_changed(str)`` (an index was opened; "" closed),
    ``exported(str)`` (a file was written).
    """

    title = "Corpus"
    ready = Signal()
    results_changed = Signal()
    index_changed = Signal(str)
    exported = Signal(str)

    def __init__(self, workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.ws = workspace
        self.model = CorpusModel()
        self.view = CorpusView(self)
        self.index = None                                    # an open CorpusIndex
        self.map: Optional[MapData] = None
        self.jobs = workspace.worker.group("corpus", self.title)
        self._pending_path: Optional[str] = None             # restored before the model came
        self._senses_word: Optional[str] = None              # the word senses were asked for
        self._waiting = None                                 # a selection not embedded yet
        self._build_folder: Optional[Path] = None            # the last build asked for
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.view.show_index(None)
        self.view.apply_options(self.model.options)
        v = self.view
        v.build_requested.connect(self.build_reference)
        v.build_files_requested.connect(self._ask_build)
        v.open_requested.connect(self._ask_open)
        v.cancel_requested.connect(self.cancel)
        v.word_requested.connect(self.query_word)
        v.options_changed.connect(self._on_options)
        v.line_activated.connect(self._on_line)
        v.map_point_clicked.connect(self._on_map_point)
        v.map_selection.connect(self.select_on_map)
        workspace.selection_changed.connect(self._on_selection)
        workspace.model_changed.connect(self._on_model)
        workspace.activations_changed.connect(self._on_activations)

    # ---- protocol -----------------------------------------------------------------------------
    def is_ready(self) -> bool:
        return self._waiting is None and self.jobs.is_idle()

    def view_state(self) -> dict:
        return self.model.view_state()

    def restore_view_state(self, state: dict) -> None:
        path = self.model.restore_view_state(state)
        self.view.apply_options(self.model.options)
        if self.model.restore_note:
            log.warning("Corpus: %s", self.model.restore_note)
            self.view.set_busy(False, self.model.restore_note)
        if path and self.ws.embedder is not None:
            self.open_index(path, restore_query=True)
        else:
            self._pending_path = path

    # ---- jobs ---------------------------------------------------------------------------------
    def _submit(self, kind: str, name: str, fn, on_done, lane: Lane = Lane.LONG,
                on_progress=None, on_event=None) -> JobHandle:
        def failed(message: str, k=kind) -> None:
            self.report_error(message, dialog=k in ("open", "build"))

        return self.jobs.submit(name, fn, lane=lane, kind=kind, on_done=on_done,
                                on_failed=failed, on_progress=on_progress,
                                on_event=on_event, on_finished=self._job_finished)

    def _job_finished(self) -> None:
        if self.index is None and self.ws.embedder is not None:
            self._show_hint()                                # says how far a stopped build got
        if self.is_ready():
            # (isHidden, not isVisible: a build that ends while another tab is shown left its
            # progress line in the status for good)
            self.view.set_busy(False, self.view.status.text()
                               if self.view.progress.isHidden() else "")
            self.ready.emit()

    def report_error(self, message: str, dialog: bool = False) -> None:
        """A failed job: one red line in the bar; a dialog too for what the user asked for
        (opening, building) when the window offers one."""
        log.warning("Corpus: %s", message)
        self.view.set_busy(False, "")
        self.view.show_error(message)
        show = getattr(self.window(), "show_error", None)
        if dialog and callable(show):
            show("Corpus", message)

    def cancel(self) -> None:
        self.jobs.cancel_all()
        self.view.set_busy(False, "cancelled")

    # ---- opening and building -----------------------------------------------------------------
    def _data_dir(self) -> Path:
        settings = getattr(self.window(), "settings", None)
        if settings is None:
            from elmo_explorer.state.settings import AppSettings

            settings = AppSettings()
        return settings.data_dir()

    def _qsettings(self):
        return window_qsettings(self)

    def default_folder(self, stem: str = "reference") -> Optional[Path]:
        """Where the app builds an index of ``stem`` for the loaded model and its precision
        (None: no model); an fp32 index's name has no precision."""
        emb = self.ws.embedder
        if emb is None:
            return None
        return corpus_index.default_index_folder(self._data_dir(), emb.checksum, emb.precision, stem)

    def _on_model(self) -> None:
        # an open asked for under the model before (a build's end, a click during the load)
        # checks the index against that model: stale (and _opened checks the model again)
        for kind in ("open", "build"):     # a build of the model before is stopped (resumable)
            self.jobs.invalidate(kind)
        emb = self.ws.embedder
        if self.index is not None and self.index.manifest.checksum != emb.checksum:
            self._close()
        if self.index is not None:
            return
        qs = self._qsettings()
        last = qs.value(SETTINGS_KEY, "", type=str) if qs is not None else ""
        if qs is not None and self.model.options == CorpusOptions():
            self.model.options = stored_settings(qs, OPTIONS_KEY, CorpusOptions.from_dict)
            self.view.apply_options(self.model.options)
        for path in (self._pending_path, last, self.default_folder()):
            if path and os.path.isfile(os.path.join(path, "index.json")):  # never raises
                if self._complete_for_model(Path(path)):
                    self.open_index(str(path), restore_query=path == self._pending_path)
                    self._pending_path = None
                    return
        self._show_hint()
        self.ready.emit()

    def _complete_for_model(self, folder: Path) -> bool:
        return corpus_index.complete_for(folder, self.ws.embedder.checksum)

    def _show_hint(self) -> None:
        note = corpus_index.stopped_build_note(self._build_folder or self.default_folder())
        self.view.hint.setText(note or HINT)
        self.view.show_index(None)

    def _ask_open(self) -> None:
        folder = existing_folder(self, "Open a corpus index folder")
        if folder:
            self.open_index(folder)

    def _ask_build(self) -> None:
        """Index corpus files of the user's into the data folder, read as the user says (a
        stopped build of the same files, read the same way, resumes)."""
        from elmo_explorer.views.corpus.build_dialog import ask_build

        choice = ask_build(self, self._qsettings(), self.default_folder)
        if choice is not None:
            self.build(list(choice.files), choice.folder, reading=choice.reading)

    def open_index(self, path: str, restore_query: bool = False) -> JobHandle:
        checksum = self.ws.embedder.checksum if self.ws.embedder is not None else None
        folder = Path(path)
        return self._submit("open", "opening the corpus index",
                            lambda state: jobs.open_index(folder, checksum),
                            lambda index: self._opened(index, restore_query))

    def _opened(self, index, restore_query: bool) -> None:
        emb = self.ws.embedder
        if emb is None or index.manifest.checksum != emb.checksum:    # opened for another
            index.close()
            if self.index is None and emb is not None:
                self._show_hint()
            return
        q = self.model.query if restore_query else None      # closing clears the results
        if not restore_query:
            self.model.pending_box = None                    # a saved box: the saved query's
        self._close()
        self.index = index
        self.model.index_path = str(index.folder)
        self.model.index_summary = corpus_index.summary(index)
        self.view.show_index(self.model.index_summary, index.layers)
        qs = self._qsettings()
        if qs is not None:
            qs.setValue(SETTINGS_KEY, str(index.folder))
        self.index_changed.emit(str(index.folder))
        if q is not None:
            self.query_occurrence(q, None)
        elif self.ws.selection is not None:
            self._on_selection(self.ws.selection)
        else:
            self._start_query()
        if self.model.options.map_scope == MapScope.ALL:
            self._request_map(None)

    def _close(self) -> None:
        if self.index is not None:
            for kind in INDEX_JOBS:             # stale now; each stops at its next check
                self.jobs.invalidate(kind)
            self.index.close()                  # safe under a job's running query
        self.index, self.map = None, None
        self.model.index_path = None
        self.model.clear_results()
        self._senses_word = None
        for m in self.view.maps.values():
            m.clear_data()
        self.view.show_lines({})
        self.view.show_clusters([])
        self.view.show_selection(None)
        self.index_changed.emit("")

    def build_reference(self) -> Optional[JobHandle]:
        """Build (or resume) the index of the bundled reference set for the loaded model: its
        general sentences and the demo words' contexts (``reference_set_files``), so that
        "bank" has the same few hundred occurrences here as in the Projection view."""
        from elmo_engine.resources import reference_set_files

        return self.build(list(reference_set_files()), self.default_folder())

    def build(self, corpus: List[Path], folder: Optional[Path],
              shard_size: int = jobs.SHARD_SIZE,
              reading: CorpusReading = CorpusReading()) -> Optional[JobHandle]:
        """Build (or resume) the index of ``corpus`` read as ``reading`` in ``folder``."""
        emb, spec = self.ws.embedder, self.ws.model_spec
        if emb is None or folder is None:
            self.report_error("load a model first: the index holds its vectors")
            return None
        req = jobs.BuildRequest(tuple(Path(p) for p in corpus), Path(folder),
                                spec.path if spec is not None else "", shard_size=shard_size,
                                reading=reading)
        self.view.set_busy(True, "building the corpus index")
        self._build_folder = req.folder

        def job(state):
            return jobs.build_index(req, emb, state, on_stage=lambda s: state.post(s))

        return self._submit("build", "building the corpus index", job,
                            lambda m: self.open_index(str(req.folder)),
                            on_progress=self.view.set_progress,
                            on_event=lambda stage: self.view.set_progress(0, 0, str(stage)))

    # ---- queries ------------------------------------------------------------------------------
    def _on_selection(self, ref) -> None:
        if ref is None or self.index is None:
            return
        ws = self.ws
        try:
            word = ws.word_at(ref)
            vectors = {L: ws.vector(ref, L).copy() for L in self.index.layers if L < ws.n_layers}
        except (IndexError, KeyError):
            self._waiting = ref                               # not embedded yet: on arrival
            return
        self._waiting = None
        self.query_occurrence(Query(word, tuple(ws.tokens[ref.sentence]), ref.token), vectors)

    def _on_activations(self) -> None:
        if self._waiting is not None and self.index is not None:
            self._on_selection(self._waiting)

    def _start_query(self) -> None:
        """The workspace's selected token (at first launch the default word's first occurrence,
        as in every view); with nothing selected: in the first loaded sentence, the word
        (alphabetic, 4 letters or more) commonest in the index, so that the view opens on
        something."""
        ws = self.ws
        if ws.selection is not None:
            self._on_selection(ws.selection)
            return
        for i, toks in enumerate(ws.tokens[:1]):
            words = {t.casefold() for t in toks if t.isalpha() and len(t) >= 4}
            if not words:
                continue
            counts = {w: len(self.index.rows_of(w)) for w in words}
            best = max(sorted(counts), key=lambda w: counts[w])
            if counts[best] == 0:
                continue
            j = next(j for j, t in enumerate(toks) if t.casefold() == best)
            from elmo_explorer.state.workspace import TokenRef

            self._on_selection(TokenRef(i, j))

    def query_occurrence(self, q: Query, vectors: Optional[Dict[int, object]]) -> None:
        """Search ``q`` in every layer (its vectors; None: the model embeds its sentence)."""
        index, o = self.index, self.model.options
        if index is None:
            return
        self.model.query = q
        self.view.show_query(q)
        emb = self.ws.embedder

        def job(state):
            from elmo_engine.index.search import query_vectors

            vecs = vectors if vectors is not None else query_vectors(
                emb, q.tokens, q.position, index.layers)
            return jobs.search_occurrence(index, vecs, q.word, o.k, o.same_word, state)

        self._submit("search", f"searching the corpus for '{q.word}'", job, self._hits,
                     lane=Lane.INTERACTIVE)
        if self._senses_word != q.word.casefold():
            self._request_senses(q.word)

    def query_word(self, word: str) -> None:
        """A typed word: its first occurrence in the corpus is the query; its senses and map."""
        if self.index is None:
            return
        rows = self.index.rows_of(word)
        if len(rows) == 0:                 # as `search` says it: the index, a did-you-mean
            self.view.set_busy(False, str(self.index.absent(word)))
            return
        self._query_row(int(rows[0]))

    def _query_row(self, row: int) -> None:
        (_, _sid, pos, word, text), = self.index.tokens_at([row])
        self.query_occurrence(Query(word, tuple(text.split(" ")), int(pos), "corpus"),
                              jobs.vectors_of_row(self.index, row))

    def _hits(self, hits) -> None:
        self.model.set_hits(hits)
        self.view.show_lines(self.model.lines)
        self._mark_selected()
        self.results_changed.emit()

    def _request_senses(self, word: str) -> None:
        index = self.index
        self.model.senses = None
        self._senses_word = word.casefold()
        self.view.show_clusters([])
        self._submit("senses", f"senses of '{word}' per layer",
                     lambda state: jobs.induce(index, word, state), self._senses)

    def _senses(self, senses) -> None:
        self.model.senses = senses
        self.view.show_clusters(self.model.cluster_rows(), self.model.senses_note())
        self.results_changed.emit()
        if self.model.options.map_scope == MapScope.WORD:
            self._request_map(senses.word)

    def _request_map(self, word: Optional[str]) -> None:
        if word is None and self.map is not None and self.map.title == "all tokens":
            return                                           # every token: computed once
        index, senses = self.index, self.model.senses
        limit = self.model.options.map_max_points
        self._submit("map", f"mapping '{word or 'every token'}'",
                     lambda state: jobs.map_word(index, word, senses, limit, state),
                     self.show_map)

    def show_map(self, data: MapData) -> None:
        """Draw ``data`` in the per-layer plots (PCA axes; density image or points)."""
        self.map = data
        self.model.map_word = None if data.title == "all tokens" else data.title
        self.model.selection = None
        self.view.show_selection(None)
        colours = data.colours()
        for layer, plot in self.view.maps.items():
            if layer in data.coords:
                ex = data.explained.get(layer)
                plot.set_title(f"layer {layer}" + (f" · PCA {ex:.0%}" if ex else ""))
                plot.set_data(data.coords[layer], data.codes, colours)
            else:
                plot.clear_data()
        self._restore_box(data)
        shown = len(data.rows)
        self.view.map_note.setText(
            f"{data.title}: {shown:,} occurrences"
            + (f" (an even sample of {data.n_total:,})" if data.n_total > shown else "")
            + " · 2-D PCA per layer (fitted on at most 20,000) · a density image when zoomed "
            "out, points when zoomed in · Shift+drag selects · colours: "
            + ", ".join(f"“{n}” ({c:,})" for n, _col, c in data.legend[:6]))
        self._mark_selected()
        self.results_changed.emit()

    def _restore_box(self, data: MapData) -> None:
        """Select a restored workspace's box again when this is the map it was drawn on (the
        first map after a restore takes it or drops it)."""
        box, self.model.pending_box = self.model.pending_box, None
        if box is None:
            return
        word = None if data.title == "all tokens" else data.title
        if not box.fits(word) or box.layer not in data.coords \
                or box.layer not in self.view.maps:
            log.info("Corpus: the saved box (layer %d, map of %s) is not for this map",
                     box.layer, box.map_word or "every token")
            return
        self.view.maps[box.layer].select_in_rect(box.rect)   # → select_on_map

    def _mark_selected(self) -> None:
        """Ring the nearest occurrence of the query (itself, when it is in the corpus)."""
        if self.map is None:
            return
        for layer, plot in self.view.maps.items():
            lines = self.model.lines.get(layer)
            plot.set_selected(self.map.index_of_row(lines[0].row) if lines else None)

    # ---- user actions -------------------------------------------------------------------------
    def _on_options(self) -> None:
        k, same, scope = self.view.options()
        old = self.model.options
        self.model.options = CorpusOptions(k, same, scope, old.map_max_points)
        qs = self._qsettings()
        if qs is not None:
            qs.setValue(OPTIONS_KEY, json.dumps(asdict(self.model.options)))
        if self.index is None:
            return
        if (k, same) != (old.k, old.same_word) and self.model.query is not None:
            self.query_occurrence(self.model.query, None)
        if scope != old.map_scope:
            if scope == MapScope.ALL:
                self._request_map(None)
            elif self.model.senses is not None:
                self._request_map(self.model.senses.word)

    def select_on_map(self, layer: int, idx, rect=None) -> None:
        """A box ``rect`` drawn on ``layer``'s map (``idx``: the points inside): the same
        occurrences ringed in every layer's map and listed, in corpus order, in the Selection
        tab; the box is saved with a workspace and drawn in the exported map."""
        if self.map is None:
            return
        self.model.pending_box = None
        for plot in self.view.maps.values():
            plot.set_selection(idx)
        box = None if rect is None else normalized(rect)
        sel = MapSelection(layer, self.map.rows[np.asarray(idx, np.int64)], rect=box)
        self.model.selection = sel
        self.view.show_selection(sel)
        self.results_changed.emit()
        index = self.index
        if index is None or not sel.n:
            return
        self._submit("selection", f"listing {sel.n:,} selected occurrences",
                     lambda state: jobs.selection_lines(index, sel, state),
                     self._selection_listed, lane=Lane.INTERACTIVE)

    def _selection_listed(self, sel: MapSelection) -> None:
        if self.model.selection is None or self.model.selection.rows is not sel.rows:
            return                                           # a newer box, or a new map
        self.model.selection = sel
        self.view.show_selection(sel)
        self.results_changed.emit()

    def _on_line(self, layer: int, r: int) -> None:
        sel = self.model.selection
        lines = (sel.lines if sel is not None else ()) if layer < 0 else \
            self.model.lines.get(layer, [])
        if 0 <= r < len(lines) and self.index is not None:
            self._query_row(lines[r].row)

    def _on_map_point(self, _layer: int, i: int) -> None:
        if self.map is not None and self.index is not None:
            self._query_row(int(self.map.rows[i]))
