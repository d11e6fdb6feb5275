"""The Layers view: how contextual is each layer, how alike are layers and models, and how many
bits a probe's labels cost given each layer.

Per layer and direction: self-similarity, intra-sentence similarity and maximum explainable
variance with their anisotropy baselines (Ethayarajh 2019) over a corpus (the shipped reference
corpus by default, a seeded sample of N sentences or all of it); linear CKA between the layers,
or between the layers of this model and a second checkpoint (File → Compare with checkpoint…);
online-code MDL probes on the demo POS and word-sense tasks beside the Probes tab's accuracy.
Every computation runs on the workspace's worker (progress, Cancel / Esc) through the engine's
:mod:`elmo_engine.analysis.layers.run`; results are cached per checkpoint and corpus. Nothing
long starts by itself: at first launch the view shows the recorded result shipped in
``resources/`` when it was made with the loaded model.

Model, view, controller: :class:`~.layers_model.LayersModel`, :class:`~.layers_view.LayersView`
and :class:`LayersPanel` (the :class:`~.protocol.AnalysisPanel` protocol).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.progress import progress_text
from elmo_engine.analysis.layers import reference_corpus_path
from elmo_engine.analysis.layers.sample import read_sample
from elmo_engine.io.figures import layers as layer_figures
from elmo_explorer.views.layers.model import (MDL_TASKS, RECORDED_FILE, LayersModel,
                                               LayersSettings, read_recorded, result_dict)
from elmo_explorer.common.figure_export import panel_figure_options
from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path, open_file_name
from elmo_explorer.state.settings import stored_settings
from elmo_explorer.views.layers import export
from elmo_explorer.views.layers.view import LayersView
from elmo_explorer.state.worker import JobHandle, Lane
from elmo_explorer.views.protocol import PanelDefaults, SettlesWithJobs

log = logging.getLogger(__name__)

SETTINGS_KEY = "layers/settings"
SEED = 0
CORPUS_FILTER = "Text files (*.txt *.txt.gz *.gz);;All files (*)"


def _model_info(emb, path: str) -> dict:
    info = getattr(emb.model, "info", None)
    return {"checkpoint": str(path), "name": getattr(info, "name", ""),
            "checksum": emb.checksum, "layers": int(emb.opts.n_output_layers),
            "dim": int(2 * emb.opts.output_dim)}


class LayersPanel(PanelDefaults, SettlesWithJobs, QWidget):
    """Contextuality curves, the CKA heatmap and MDL probes of the loaded model.

    Signals
    -------
    ready() : no job of this view is running and it shows what it can
    results_changed() : a new result, comparison or MDL run is shown
    exported(str) : a file was written
    """

    title = "Layers"
    ready = Signal()
    results_changed = Signal()
    exported = Signal(str)

    def __init__(self, workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.ws = workspace
        self.model = LayersModel()
        self.view = LayersView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self._ready = False
        self.jobs = workspace.worker.group("layers", self.title)
        self.jobs.on_cancelled = lambda: self.view.show_status("Cancelled; the previous result "
                                                               "stays.")
        self._probes = None
        self._qs = self._open_settings()
        self.model.settings = stored_settings(self._qs, SETTINGS_KEY, LayersSettings.from_dict)
        self.view.apply_settings(self.model.settings)
        from elmo_engine.resources import HERE

        self.recorded = read_recorded(HERE / RECORDED_FILE)
        v = self.view
        v.run_requested.connect(self.run)
        v.cancel_button.clicked.connect(self.cancel)
        v.settings_changed.connect(self._on_settings)
        for spin in (v.sentences_box, v.mdl_sentences_box):     # remembered as they change
            spin.valueChanged.connect(lambda _=0: self._remember())
        for box in (v.full_box, v.pretokenized_box):
            box.toggled.connect(lambda _=False: self._remember())
        v.corpus_requested.connect(self._on_corpus_request)
        v.mdl_requested.connect(self.run_mdl)
        workspace.model_changed.connect(self._on_model)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        self._redraw()
        v.show_status("Load a model; then Run (Ctrl+R) computes contextuality and CKA on the "
                      "corpus." if workspace.embedder is None else "")

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def export_actions(self) -> List[QAction]:
        out = []
        for text, kind in export.ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _=False, k=kind: self._ask_export(k))
            a.setEnabled(export.has(self.model, kind))
            out.append(a)
        a = QAction("Layers results (JSON)…", self)
        a.triggered.connect(self._ask_export_json)
        a.setEnabled(self.model.result is not None)
        return out + [a]

    def view_state(self) -> Dict[str, Any]:
        self.model.settings = self._current_settings()
        return self.model.view_state()

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        checksum = getattr(self.ws.embedder, "checksum", "")
        self.model.restore(state, checksum)
        self.view.apply_settings(self.model.settings)
        self._redraw()

    # ---- wiring -------------------------------------------------------------------------------
    def attach_probes(self, probes_panel) -> None:
        """Show the Probes tab's accuracies beside the MDL codelengths."""
        self._probes = probes_panel
        probes_panel.runs_changed.connect(self._redraw)

    def _probe_runs(self) -> list:
        return list(getattr(getattr(self._probes, "model", None), "runs", []) or [])

    @staticmethod
    def _open_settings():
        try:
            from elmo_explorer.state.settings import AppSettings

            return AppSettings().qs
        except Exception:  # settings are a convenience: the view works without them
            log.warning("the layers view's settings cannot be read", exc_info=True)
            return None

    def _current_settings(self) -> LayersSettings:
        return self.view.settings(self.model.settings.corpus)

    def _remember(self) -> None:
        self.model.settings = self._current_settings()
        if self._qs is not None:
            from dataclasses import asdict

            self._qs.setValue(SETTINGS_KEY, json.dumps(asdict(self.model.settings)))

    def corpus_path(self) -> str:
        return self.model.settings.corpus or str(reference_corpus_path())

    # ---- model and settings -------------------------------------------------------------------
    def _on_model(self) -> None:
        # a job asked for while this model loaded captured the one before: its result is not
        # this model's (it ran after the load, and was drawn under it)
        self.jobs.cancel_all()
        self.model.model_changed()
        self._ready = False
        self._show_cached_or_recorded()
        self._set_ready()

    def _show_cached_or_recorded(self) -> bool:
        """Show the result of the current settings if it is known (this session or recorded)."""
        emb = self.ws.embedder
        if emb is None:
            return False
        self.model.settings = self._current_settings()
        key = self.model.key(emb.checksum, self.corpus_path(), emb.precision)
        rec = self.recorded
        if (not self.model.cached(key) and rec is not None and not self.model.settings.corpus
                and rec["model"].get("checksum") == emb.checksum and emb.precision == "fp32"
                and rec["corpus"].get("max_sentences") == self.model.n_sentences()):
            self.model.cache[key] = (rec, None)
        if self.model.cached(key):
            self.model.show(key)
            self._redraw()
            self.view.show_status("")
            return True
        self.view.show_status("Run (Ctrl+R) computes contextuality and CKA of this model on the "
                              "corpus.")
        return False

    def _on_settings(self) -> None:
        self._remember()
        self._redraw()

    def _on_corpus_request(self, what: str) -> None:
        if what == "choose":
            name = open_file_name(self, "Corpus (one sentence a line)", CORPUS_FILTER)
            if not name:
                return
            self.set_corpus(name)
        else:
            self.set_corpus("")

    def set_corpus(self, path: str) -> None:
        """Analyse ``path`` ("" = the shipped reference corpus) from the next Run."""
        self.model.settings = LayersSettings.from_dict({"corpus": str(path)},
                                                       self._current_settings())
        self.view.apply_settings(self.model.settings)
        self._remember()
        self._show_cached_or_recorded()

    # ---- jobs ---------------------------------------------------------------------------------
    def _submit(self, kind: str, name: str, fn, on_done) -> JobHandle:
        """One job at a time (a new one supersedes the running one), on the long lane."""
        job = self.jobs.submit(
            name, fn, lane=Lane.LONG, kind="compute", on_done=on_done, on_failed=self._on_error,
            on_progress=self._on_progress, on_finished=self._on_finished)
        self._ready = False
        self.view.set_busy(True)
        self.view.show_status(f"{name}…")
        return job

    def run(self) -> Optional[JobHandle]:
        """Contextuality and CKA of the loaded model on the chosen corpus (cached: at once)."""
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return None
        self._remember()
        if self._show_cached_or_recorded() and self.model.analysis is not None:
            return None
        corpus, n = self.corpus_path(), self.model.n_sentences()
        pretokenized = self.model.settings.split_on_spaces
        key = self.model.key(emb.checksum, corpus, emb.precision)
        info = _model_info(emb, getattr(self.ws.model_spec, "path", ""))

        def job(state):
            from elmo_engine.analysis.layers import run as layers_run  # torch

            sample = read_sample(corpus, pretokenized, n, seed=SEED, state=state)
            sample.check_enough()             # as `layers` says it: the file, before embedding
            res = layers_run.analyse_layers(emb, sample.tokens, seed=SEED, state=state)
            analysis = (res, sample.tokens)
            return (result_dict(info, corpus, sample.sentences_in_file, n, analysis,
                                pretokenized), analysis, sample)

        def done(out) -> None:
            result, analysis, sample = out
            self.model.store(key, result, analysis)
            t = result["timings"]
            notes = "; ".join(x for x in (sample.sample_note(), sample.blank_note) if x)
            self.view.show_status(f"Done in {sum(t.values()):.1f} s (embedding "
                                  f"{t['embedding_s']:.1f} s)" + (f": {notes}." if notes
                                                                   else "."))
            self._redraw()
            self.results_changed.emit()

        return self._submit("analysis", f"Layers: {Path(corpus).name}", job, done)

    def compare_with(self, path: str) -> Optional[JobHandle]:
        """CKA between the loaded model's layers and those of the checkpoint ``path`` (loaded on
        the worker; the corpus analysis runs first when it is not in memory)."""
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return None
        self._remember()
        corpus, n = self.corpus_path(), self.model.n_sentences()
        pretokenized = self.model.settings.split_on_spaces
        key = self.model.key(emb.checksum, corpus, emb.precision)
        have = self.model.cache[key][1] if self.model.cached(key) else None
        info = _model_info(emb, getattr(self.ws.model_spec, "path", ""))

        def job(state):
            from elmo_engine.analysis.layers import run as layers_run  # torch

            from elmo_engine.embed.embedder import Embedder
            from elmo_engine.model.checkpoint import load_checkpoint

            state.report(0, 1, f"loading {path}")
            emb_b = Embedder(load_checkpoint(path, progress=state.report), device="cpu",
                             cache_size=256)
            state.check()
            analysis, result = have, None
            if analysis is None:
                sample = read_sample(corpus, pretokenized, n, seed=SEED, state=state)
                res = layers_run.analyse_layers(emb, sample.tokens, seed=SEED, state=state)
                analysis = (res, sample.tokens)
                result = result_dict(info, corpus, sample.sentences_in_file, n, analysis,
                                     pretokenized)
            cmp = layers_run.compare_layers(emb_b, analysis[1], analysis[0], state)
            return result, analysis, {"model": _model_info(emb_b, path),
                                      "cka": cmp["cka"].to_dict(),
                                      "cka_self": cmp["cka_self"].to_dict()}

        def done(out) -> None:
            result, analysis, compare = out
            if result is not None:
                self.model.store(key, result, analysis)
            self.model.compare = compare
            self.view.show_status(f"Compared with {compare['model']['name'] or path}.")
            self._redraw()
            self.results_changed.emit()

        return self._submit("compare", f"Comparing with {Path(path).name}", job, done)

    def ask_compare(self) -> None:
        """File → Compare with checkpoint…: choose a checkpoint file or folder."""
        name = open_file_name(self, "Compare with checkpoint",
                              "Checkpoints (*.json *.hdf5 *.h5 *.safetensors);;All files (*)")
        if name:
            self.compare_with(name)

    def run_mdl(self, task: str) -> Optional[JobHandle]:
        """Online-code MDL probes of every layer on a demo task (``demo-pos``, ``demo-wsd``)."""
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return None
        self._remember()
        n = self.model.settings.mdl_sentences

        def job(state):
            from elmo_engine.analysis.layers import run as layers_run  # torch

            sents, source = layers_run.demo_mdl_data(task)
            return layers_run.mdl_probe(emb, sents, task, source, max_sentences=n, seed=SEED,
                                        device="cpu", state=state).to_dict()

        def done(mdl: dict) -> None:
            self.model.mdl[task] = mdl
            self.view.show_status(f"MDL {task}: {mdl['examples']:,} labelled tokens, "
                                  f"{mdl['classes']} labels, {mdl['probe_training_s']:.1f} s.")
            self._redraw()
            self.results_changed.emit()

        names = dict(MDL_TASKS)
        return self._submit("mdl", f"MDL probes: {names.get(task, task)}", job, done)

    def cancel(self) -> None:
        if self.jobs.cancel("compute"):
            self.view.show_status("Cancelled; the previous result stays.")

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(progress_text(done, total, message))

    def _on_finished(self) -> None:
        if self.jobs.is_idle():             # (a superseded job ends before its successor)
            self.view.set_busy(False)
            self._set_ready()

    def _on_error(self, message: str) -> None:
        self.view.show_status(f"Layers: {message}", error=True)

    # ---- drawing and export -------------------------------------------------------------------
    def _redraw(self) -> None:
        m = self.model
        m.settings = self._current_settings()
        self.view.draw_curves([m.curves(key) for key, _ in layer_figures.MEASURES], m.settings.adjusted)
        self.view.draw_cka(m.cka_shown(), self.cka_title())
        from elmo_engine.analysis.probes.results import model_label   # (light: no torch)

        emb = self.ws.embedder
        self.view.fill_mdl(m.mdl_rows(self._probe_runs(),
                                      None if emb is None else model_label(emb)))
        self.view.draw_hubness(m.hubness(), m.hub_rows())
        self.view.summary.setText(m.summary())

    def cka_title(self) -> str:
        m = self.model
        if m.compare is not None:
            return f"CKA: {m.result['model'].get('name') or 'A'} × {m.compare['model']['name'] or 'B'}"
        return "CKA between layers" if m.result is not None else ""

    # ---- File → Export (export_*: no dialogs, for tests and scripts) --------------------------
    def figure(self, kind: str):
        """The export figure of ``kind`` ("contextuality", "cka", "mdl"), or None."""
        return export.figure(self.model, kind, self.cka_title())

    def export_figure(self, kind: str, path) -> List[Path]:
        """Write one figure as PNG, SVG or PDF (by extension)."""
        written = export.write_figure(self.model, kind, self.cka_title(), path,
                                      panel_figure_options(self))
        for p in written:
            self.exported.emit(str(p))
        return written

    def export_json(self, path) -> None:
        """The shown results (``view_state``'s result, comparison and MDL runs) as JSON."""
        export.write_json(self.model, path)
        self.exported.emit(str(path))

    def _ask_export(self, kind: str) -> None:
        if kind == export.HUBS_TSV:
            path = ask_save_path(self, "Export the hubs per layer", "TSV (*.tsv)")
            if path is not None:
                self._guard(lambda: self.exported.emit(str(export.write_hubs(self.model, path))))
            return
        path = ask_save_path(self, f"Export {kind}", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_figure(kind, path))

    def _ask_export_json(self) -> None:
        path = ask_save_path(self, "Export layers results", "JSON (*.json)")
        if path is not None:
            self._guard(lambda: self.export_json(path))

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:  # shown, never a crash
            log.exception("layers export failed")
            self.view.show_status(f"Export failed: {e}", error=True)
