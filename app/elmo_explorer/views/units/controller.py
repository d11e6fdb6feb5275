"""The Units view: inside the LSTM of the loaded model (issue 40, docs/guide/units.md).

The selected sentence (the first one with tokens when nothing is selected) as rows of the units
that vary most over its words, for the chosen layer, direction and state kind (cell, gates,
candidate, outputs), beside the mean forget and input gates per word; "Rank units" ranks the
cells and outputs of every layer and direction for the demo POS task's tags or a labelled file of
the user's, with the top-k against random-k curve. The last ranking and intervention are saved
with a workspace (with the model's checksum) and shown again when it is reopened.
Every computation is a job of the view's group on the long lane
(progress, Cancel / Esc); the states come from the engine's step path
(:mod:`elmo_engine.model.lstm_inspect`), per call: the model is shared with the other views.

Model, view, controller: :class:`~.model.UnitsModel`, :class:`~.view.UnitsView` and
:class:`UnitsPanel` (the :class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.errors import InputError
from elmo_explorer.state.worker import Lane
from elmo_explorer.views.protocol import PanelDefaults, SettlesWithJobs
from elmo_explorer.views.units import export
from elmo_explorer.views.units.intervention import (bundled_minimal_pairs, number_showcase, showcase_ks,
                                                    remeasure, showcase_note, showcase_rows)
from elmo_explorer.views.units.model import (PATTERN_DEFAULT, CorpusFile, RANK_TOKENS, RankSource,
                                             UnitsModel, pattern_search, rank_labels,
                                             sentence_rows)
from elmo_explorer.views.units.unit_contexts import (PREFETCH_UNITS, ContextsKey, UnitChoice,
                                                     finding_status, found_status,
                                                     units_contexts, units_to_find)
from elmo_explorer.views.units.softmax_cache import MissingSoftmaxError, SoftmaxCache
from elmo_explorer.views.units.view import UnitsView

log = logging.getLogger(__name__)

#: the status lines that ask for what is missing (replaced once it is there)
LOAD_PROMPT = "Load a model to look inside its LSTM."
TYPE_PROMPT = "Type or open a sentence to see its units."


class UnitsPanel(PanelDefaults, SettlesWithJobs, QWidget):
    """Signals: ``ready()`` (no job of the view runs and it shows what it can)."""

    title = "Units"
    ready = Signal()

    def __init__(self, workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.ws = workspace
        self.model = UnitsModel()
        self.view = UnitsView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.jobs = workspace.worker.group("units", self.title)
        self.jobs.on_cancelled = lambda: self.view.show_status("Cancelled.")
        self._ready = False
        self.view.apply_settings(self.model.settings)
        self.view.settings_changed.connect(self._on_settings)
        v = self.view
        v.ranking_page.rank_requested.connect(self.rank)
        v.ranking_page.file_requested.connect(self._choose_file)
        v.ranking_page.row_selected.connect(self._on_ranking_row)
        v.cancel_button.clicked.connect(self.cancel)
        v.intervene_page.intervene_requested.connect(self.intervene)
        v.showcase_page.showcase_requested.connect(self.run_showcase)
        v.unit_page.contexts_requested.connect(self.contexts)
        v.unit_page.choice_changed.connect(self._show_kept_contexts)
        v.pattern_page.pattern_requested.connect(self.pattern)
        for which, chooser in (("contexts", v.unit_page.corpus),
                               ("pattern", v.pattern_page.corpus)):
            chooser.choose_requested.connect(lambda w=which: self._choose_corpus(w))
            chooser.changed.connect(lambda choice, w=which: self.set_corpus(w, choice))
            chooser.choose_index_requested.connect(lambda w=which: self._choose_index(w))
        self.softmax = SoftmaxCache()        # the loaded checkpoint's, read by the first job
        self._pending: Optional[Any] = None  # saved results waiting for their model
        workspace.model_changed.connect(self._on_model)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        workspace.tokens_changed.connect(self.refresh)
        workspace.sentences_changed.connect(self.refresh)
        workspace.selection_changed.connect(lambda _ref: self.refresh())
        if workspace.embedder is None:
            self.view.show_status(LOAD_PROMPT, prompt=True)
        else:
            self._on_model()

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def export_actions(self) -> List[QAction]:
        out = []
        for text, kind in export.ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _=False, k=kind: self._ask_export(k))
            a.setEnabled(export.has(self.model, kind))
            out.append(a)
        return out

    def _ask_export(self, kind: str) -> None:
        from elmo_explorer.common.figure_export import panel_figure_options
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

        figure = kind in export.FIGURES
        path = ask_save_path(self, f"Export {kind}", IMAGE_FILTERS if figure else "TSV (*.tsv)")
        if path is None:
            return
        try:
            if figure:
                export.write_figure(self.model, path, panel_figure_options(self), kind)
            else:
                export.write_tsv(self.model, kind, path)
            self.view.show_status(f"Saved {path}")
        except Exception as e:  # shown, never a crash
            log.exception("units export failed")
            self.view.show_status(f"Export failed: {e}", error=True)

    def view_state(self) -> Dict[str, Any]:
        self.model.settings = self.view.current_settings()
        self.model.panel = self.view.panel_fields()
        try:
            self.model.source = self.view.ranking_page.rank_source()
        except InputError:                # a file chosen but not named: keep the last one
            pass
        emb = self.ws.embedder
        return self.model.view_state(emb.checksum if emb is not None else None)

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        saved = self.model.restore(state)
        self.view.apply_settings(self.model.settings)
        self.view.apply_panel_fields(self.model.panel)
        self.view.ranking_page.set_source(self.model.source)
        self.view.unit_page.corpus.set_choice(self.model.contexts_corpus, announce=False)
        self.view.pattern_page.corpus.set_choice(self.model.pattern_corpus, announce=False)
        self._pending = saved
        self._show_saved()
        self.refresh()

    def _show_saved(self) -> None:
        """Show the saved results once the model that made them is loaded (another model's
        are dropped, and the status says so)."""
        saved, emb = self._pending, self.ws.embedder
        if saved is None or emb is None:
            return
        self._pending = None
        if saved.model != emb.checksum:
            self.view.show_status("The workspace's saved units results were made by another "
                                  "model: not shown.")
            return
        self.model.apply_saved(saved)
        self._show_results()

    def _show_results(self) -> None:
        """Draw the model's results (the tables empty where there are none)."""
        m, v = self.model, self.view
        v.ranking_page.show_ranking(m.rankings)
        v.intervene_page.show_remeasure(m.remeasure)
        v.showcase_page.show_showcase(m.showcase, m.showcase_note)
        v.unit_page.show_contexts(m.contexts)
        v.pattern_page.show_pattern(m.pattern, m.pattern_where or PATTERN_DEFAULT)

    # ---- jobs ---------------------------------------------------------------------------------
    def _on_model(self) -> None:
        self.jobs.cancel_all()            # asked for during the load: of the model before
        emb = self.ws.embedder
        if emb is not None:
            self.view.set_layers(emb.opts.n_layers)
        self.model.clear_results()
        self.softmax.clear()
        self._show_results()
        self._show_saved()
        self.refresh()

    def _on_settings(self) -> None:
        self.model.settings = self.view.current_settings()
        self.refresh()

    def _sentence(self) -> Optional[List[str]]:
        toks = self.ws.tokens
        sel = self.ws.selection
        if sel is not None and sel.sentence < len(toks) and toks[sel.sentence]:
            return list(toks[sel.sentence])
        return next((list(t) for t in toks if t), None)

    def refresh(self) -> None:
        """Draw the selected sentence's units (a job: the model runs on the worker)."""
        emb = self.ws.embedder
        tokens = self._sentence()
        if emb is None or tokens is None:
            if emb is not None:
                self.view.show_status(TYPE_PROMPT, prompt=True)
            self._set_ready()
            return
        settings = self.view.current_settings()
        model = emb.model

        def job(state):
            return sentence_rows(model, tokens, settings)

        self._ready = False
        self.jobs.submit("Units of the sentence", job, lane=Lane.LONG, kind="sentence",
                         on_done=self._on_sentence, on_failed=self._on_error,
                         on_finished=self._on_finished)

    def _on_sentence(self, rows) -> None:
        self.model.sentence = rows
        self.view.show_sentence(rows)
        if self.model.ranking is None and self.view.shows_prompt():
            self.view.show_status("Rank units ranks every layer's cells and outputs for the "
                                  f"labels of the Ranking tab ({RANK_TOKENS:,} tokens).")

    def rank(self) -> None:
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return
        try:
            source = self.view.ranking_page.rank_source()
        except InputError as exc:
            self.view.show_status(str(exc), error=True)
            return
        model, vectors = emb.model, emb.token_vectors

        def job(state):
            return rank_labels(model, source, vectors, state)

        def done(doc) -> None:
            self.model.ranking, self.model.source = doc, source
            self.view.ranking_page.show_ranking(self.model.rankings)
            self.view.tabs.setCurrentWidget(self.view.ranking_page)
            self.view.show_status(
                f"Units ranked for {doc['source']} ({doc['tokens']:,} words, "
                f"{len(doc['classes'])} classes): held-out accuracy on all units, the top units "
                "of each method, and a probe on the top k units against k random ones (mean ± "
                "sd of 3 seeds; the selected row's curve on the right).")

        self.view.set_busy(True)
        self.view.show_status(f"Ranking units for {source.describe()}…")
        self.jobs.submit("Ranking units", job, lane=Lane.LONG, kind="rank",
                         on_done=done, on_failed=self._on_error,
                         on_progress=self._on_progress, on_finished=self._on_finished)

    def _choose_file(self) -> None:
        from elmo_explorer.common.save_dialog import open_file_name

        name = open_file_name(self, "Labelled words", "CoNLL-U or TSV (*.conllu *.conllu.gz "
                                                      "*.tsv *.txt *.gz);;All files (*)")
        if name:
            label = self.view.ranking_page.label.currentText().strip() or "upos"
            self.view.ranking_page.set_source(RankSource(name, label))

    def cancel(self) -> None:
        if any([self.jobs.cancel(k) for k in ("rank", "intervene", "showcase", "contexts",
                                                  "pattern")]):
            self.view.show_status("Cancelled.")

    # ---- interventions ------------------------------------------------------------------------
    def _on_ranking_row(self, row: int) -> None:
        rankings = self.model.rankings
        if 0 <= row < len(rankings):
            r = rankings[row]
            top = r["top_units"].get("mean-diff") or next(iter(r["top_units"].values()))
            self.view.intervene_page.set_units(r["layer"], r["direction"], r["state"], top[:5])
            self.view.unit_page.set_unit_choice(UnitChoice(r["layer"], r["direction"],
                                                           r["state"], top[0]))
            self.contexts(also=top[:PREFETCH_UNITS])

    def pattern(self) -> None:
        """Pattern search (LSTMVis) for a span of the selected sentence."""
        emb = self.ws.embedder
        tokens = self._sentence()
        if emb is None or tokens is None:
            self.view.show_status("Load a model and type a sentence first.", error=True)
            return
        q = self.view.pattern_page.query()
        model, vectors = emb.model, emb.token_vectors
        corpus = self.model.pattern_corpus
        self.jobs.invalidate("pattern")

        def job(state):
            return pattern_search(model, tokens, q, vectors, state, corpus)

        def done(found) -> None:
            where, res = found
            self.model.pattern, self.model.pattern_where = res, where
            self.view.pattern_page.show_pattern(res, where)
            self.view.tabs.setCurrentWidget(self.view.pattern_page)
            self.view.show_status(f"Pattern search in {where}: the spans whose units are on "
                                  "as over the chosen span (Jaccard of the on-sets).")

        self.view.set_busy(True)
        self.view.show_status("Searching for the pattern…")
        self.jobs.submit("Units pattern", job, lane=Lane.LONG, kind="pattern", on_done=done,
                         on_failed=self._on_error, on_progress=self._on_progress,
                         on_finished=self._on_finished)

    def _contexts_key(self, choice: UnitChoice) -> ContextsKey:
        return ContextsKey.of(choice, self.model.contexts_corpus, self.model.shown_labels)

    def _show_contexts(self, res, found=(), kept: bool = False) -> None:
        labels = self.model.shown_labels
        self.model.contexts = res
        self.view.unit_page.show_contexts(res, labels.describe() if labels else "")
        self.view.tabs.setCurrentWidget(self.view.unit_page)
        self.view.show_status(found_status(res, found, kept))

    def _show_kept_contexts(self) -> bool:
        """Show the chosen unit's contexts if they were found before over the same corpus and
        labels (the Unit tab's fields changed, or Top contexts): True if they were."""
        if self.ws.embedder is None:
            return False
        choice = self.view.unit_page.unit_choice()
        res = self.model.contexts_cache.get(self._contexts_key(choice))
        if res is not None and self.model.contexts is not res:
            self._show_contexts(res, kept=True)
        return res is not None

    def contexts(self, also: Sequence[int] = ()) -> None:
        """The chosen unit's top contexts (and its histogram per tag with a ranking shown):
        kept ones at once; else a job that also finds those of the units ``also`` (of the same
        layer, direction and state) not found yet, in the same run of the model."""
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return
        if self._show_kept_contexts() and not also:
            return
        choice = self.view.unit_page.unit_choice()
        key = self._contexts_key(choice)
        cache = self.model.contexts_cache
        units = units_to_find(cache, key, also)
        if not units:
            return
        model, vectors = emb.model, emb.token_vectors
        labels, corpus = self.model.shown_labels, self.model.contexts_corpus
        self.jobs.invalidate("contexts")

        def job(state):
            return units_contexts(model, choice, units, labels, vectors, state, corpus)

        def done(found) -> None:
            for res in found:
                cache.put(key.for_unit(res.choice.unit), res)
            # the tab's fields may have moved on while the job ran: show what they name now
            now = self._contexts_key(self.view.unit_page.unit_choice())
            fresh = next((r for r in found if key.for_unit(r.choice.unit) == now), None)
            if fresh is None:
                self._show_kept_contexts()
            else:
                self._show_contexts(fresh, found)

        self.view.set_busy(True)
        self.view.show_status(finding_status(choice, units))
        self.jobs.submit("Unit contexts", job, lane=Lane.LONG, kind="contexts", on_done=done,
                         on_failed=self._on_error, on_progress=self._on_progress,
                         on_finished=self._on_finished)

    def set_corpus(self, which: str, choice: CorpusFile) -> None:
        """The corpus of the top contexts (``which`` "contexts") or of the pattern search
        ("pattern"): a sentence file or CoNLL-U (its path "" for the default) and whether it is
        pretokenized; read when a search runs (a bad file is then one line in the status)."""
        setattr(self.model, f"{which}_corpus", choice)
        page = self.view.unit_page if which == "contexts" else self.view.pattern_page
        page.corpus.set_choice(choice, announce=False)

    def _choose_corpus(self, which: str) -> None:
        from elmo_explorer.common.save_dialog import open_file_name

        name = open_file_name(self, "Corpus", "Sentences or CoNLL-U (*.txt *.gz *.conllu "
                                              "*.conllu.gz);;All files (*)")
        if name:
            page = self.view.unit_page if which == "contexts" else self.view.pattern_page
            page.corpus.set_path(name)               # the switch as it was; announced

    def _choose_index(self, which: str) -> None:
        """A corpus index's folder for the contexts (``which`` "contexts") or the pattern
        search ("pattern"), starting in the Corpus view's folder of indexes."""
        from PySide6.QtWidgets import QFileDialog

        from elmo_explorer.state.settings import AppSettings
        from elmo_explorer.views.corpus_index import indexes_folder

        settings = getattr(self.window(), "settings", None) or AppSettings()
        start = indexes_folder(settings.data_dir())
        name = QFileDialog.getExistingDirectory(self, "Corpus index",
                                                str(start) if start.is_dir() else "")
        if name:
            page = self.view.unit_page if which == "contexts" else self.view.pattern_page
            page.corpus.set_index(name)

    def _softmax_getter(self):
        """(folder, get): the loaded checkpoint's softmax for a job (:class:`SoftmaxCache`)."""
        return self.softmax.getter(self.ws)

    def _keep_softmax(self, folder, softmax) -> None:
        self.softmax.keep(folder, softmax, self._softmax_getter()[0])

    def _word(self) -> str:
        """The word whose similarity is re-measured: typed, else the selected token's."""
        typed = self.view.intervene_page.iv_word.text().strip()
        if typed:
            return typed
        sel, toks = self.ws.selection, self.ws.tokens
        if (sel is not None and sel.sentence < len(toks)
                and 0 <= sel.token < len(toks[sel.sentence])):
            return str(toks[sel.sentence][sel.token])
        return ""

    def intervene(self) -> None:
        emb = self.ws.embedder
        tokens = self._sentence()
        if emb is None or tokens is None:
            self.view.show_status("Load a model and type a sentence first.", error=True)
            return
        try:
            spec = self.view.intervene_page.spec()
        except InputError as exc:
            self.view.show_status(str(exc), error=True)
            return
        try:
            labels: Optional[RankSource] = self.view.ranking_page.rank_source()
        except InputError:
            labels = None                 # a file chosen but not named: no probe
        word = self._word()
        model, vectors = emb.model, emb.token_vectors
        folder, get_softmax = self._softmax_getter()

        def job(state):
            try:
                softmax, missing = get_softmax(state), ""
            except MissingSoftmaxError as e:                       # the probe and similarity go on
                softmax, missing = None, str(e)
            return softmax, remeasure(model, softmax, tokens, spec, bundled_minimal_pairs(),
                                      vectors, state, labels=labels, word=word,
                                      no_softmax=missing)

        def done(out) -> None:
            if out[0] is not None:
                self._keep_softmax(folder, out[0])
            self.model.remeasure = out[1]
            self.view.intervene_page.show_remeasure(out[1])
            self.view.tabs.setCurrentWidget(self.view.intervene_page)
            self.view.show_status(
                "Before → after: both LMs on the selected sentence, the bundled minimal pairs "
                "per set, a probe of the top layer and the word's similarity across contexts."
                if out[1].scored_lms else "Before → after: a probe of the top layer and the "
                "word's similarity across contexts (no softmax: the LMs were not scored).")

        self.view.set_busy(True)
        self.view.show_status("Re-measuring…")
        self.jobs.submit("Units intervention", job, lane=Lane.LONG, kind="intervene",
                         on_done=done, on_failed=self._on_error,
                         on_progress=self._on_progress, on_finished=self._on_finished)

    def run_showcase(self) -> None:
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return
        model, vectors = emb.model, emb.token_vectors
        folder, get_softmax = self._softmax_getter()

        ks = showcase_ks(emb.opts)                  # what the job runs, and the status says

        def job(state):
            softmax = get_softmax(state)
            src, res = number_showcase(model, softmax, vectors, state, ks=ks or None)
            return softmax, src, res

        def done(out) -> None:
            softmax, src, res = out
            self._keep_softmax(folder, softmax)
            self.model.showcase = showcase_rows(src, res)
            self.model.showcase_note = note = showcase_note(src, res)
            self.view.showcase_page.show_showcase(self.model.showcase, note)
            self.view.tabs.setCurrentWidget(self.view.showcase_page)
            self.view.show_status("Number units: done.")

        self.view.set_busy(True)
        self.view.show_status(f"Number units: ranking and ablating (k = "
                              f"{', '.join(map(str, ks))})…")
        self.jobs.submit("Number units", job, lane=Lane.LONG, kind="showcase",
                         on_done=done, on_failed=self._on_error,
                         on_progress=self._on_progress, on_finished=self._on_finished)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(f"{message} ({done}/{total})" if total else message)

    def _on_finished(self) -> None:
        if self.jobs.is_idle():
            self.view.set_busy(False)
            self._set_ready()

    def _on_error(self, message: str) -> None:
        self.view.show_status(f"Units: {message}", error=True)
