"""The Units view (issue 40): the selected sentence's top units are the engine's states, the
settings switch them, and the ranking runs as a job of the view's group with progress and
cancel."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.views.units.controller import UnitsPanel
from elmo_explorer.views.units.model import (CURVE_KS, CorpusFile, UnitsModel, UnitsSettings,
                                             top_units)

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

SENTENCES = ["He sat on the bank of the river .", "The bank lends money ."]


@pytest.fixture(autouse=True)
def fewer_words(monkeypatch):
    """The view's jobs over fewer words than the app's (ranking 20,000, contexts and a file's
    pattern search 100,000): what is tested here is the job and the view, not the statistics
    (tested in tests/engine)."""
    from elmo_engine.analysis.units import corpus
    from elmo_explorer.views.units import model

    monkeypatch.setattr(model, "RANK_TOKENS", 4_000)
    monkeypatch.setattr(corpus, "CORPUS_TOKENS", 6_000)


@pytest.fixture
def panel(qtbot, ws, app_settings_dir):
    p = UnitsPanel(ws)
    qtbot.addWidget(p)
    ws.set_sentences(SENTENCES)
    qtbot.waitUntil(lambda: p.model.sentence is not None and p.is_ready(), timeout=60000)
    return p


def engine_states(ws, tokens, layer, d, kind):
    import torch

    from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect

    model = ws.embedder.model
    tok, lengths = framed_tokens(model, [tokens])
    res = inspect(model, tok, lengths, Capture(kinds=(StateKind(kind),), layers=(layer,),
                                               directions=(d,), dtype=torch.float32))
    return res.states[(layer, d, StateKind(kind))][0, 1:len(tokens) + 1].numpy()


def test_the_rows_are_the_engines_states_and_follow_the_settings(qtbot, panel, ws):
    rows = panel.model.sentence
    tokens = SENTENCES[0].split()
    assert rows.tokens == tuple(tokens) and rows.settings.state == "c"
    want = engine_states(ws, tokens, 0, 0, "c")
    assert np.allclose(rows.values, want[:, list(rows.units)].T, atol=1e-6)
    assert rows.units == top_units(want, panel.view.rows.value())
    assert ((rows.forget > 0) & (rows.forget < 1)).all()
    panel.view.direction.setCurrentText("backward")
    panel.view.state.setCurrentIndex(2)                               # forget gate
    panel.view.layer.setValue(1)
    qtbot.waitUntil(lambda: panel.model.sentence.settings == UnitsSettings(1, "backward", "f", 24)
                    and panel.is_ready(), timeout=60000)
    want = engine_states(ws, tokens, 1, 1, "f")
    assert np.allclose(panel.model.sentence.values, want[:, list(panel.model.sentence.units)].T,
                       atol=1e-6)
    state = panel.view_state()
    fresh = UnitsModel()
    fresh.restore(state)
    assert fresh.settings == UnitsSettings(1, "backward", "f", 24)


def test_ranking_runs_as_a_job(qtbot, panel):
    panel.rank()
    assert panel.view.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: panel.model.ranking is not None and panel.is_ready(), timeout=120000)
    rows = panel.model.rankings
    assert [(r["layer"], r["direction"], r["state"]) for r in rows][:2] == [
        (0, "forward", "c"), (0, "forward", "h")]
    page = panel.view.ranking_page
    assert len(rows) == 8 and page.table.rowCount() == 8
    # the curve: both methods at every k the state is wide enough for (the tiny model: 32)
    assert {(p["k"], p["method"]) for p in rows[0]["curve"]} == {
        (k, m) for k in CURVE_KS if k <= 32 for m in ("mean-diff", "elastic-net")}
    assert all(len(p["random"]) == 3 for p in rows[0]["curve"])
    assert all(0 <= r["accuracy_all"] <= 1 for r in rows)
    assert not panel.view.cancel_button.isEnabled()
    assert panel.model.ranking["source"] == "the demo POS task's UPOS tags"
    from elmo_explorer.views.units import export

    text = export.tsv(panel.model, "ranking").splitlines()
    assert len(text) == 10 and text[2].split("\t")[:3] == ["0", "forward", "c"]
    assert float(text[2].split("\t")[3]) == pytest.approx(rows[0]["accuracy_all"], abs=1e-4)
    curve = export.tsv(panel.model, "curve").splitlines()
    assert len(curve) == 2 + sum(len(r["curve"]) for r in rows)
    # the curve of the selected row is drawn: top k of each method and the random band
    page.table.selectRow(3)
    r = rows[3]
    assert len(page.curve.getPlotItem().listDataItems()) >= 3
    assert r["layer"] == 0 and r["state"] in page.curve.getPlotItem().titleLabel.text
    top = r["top_units"]["mean-diff"]
    assert panel.view.intervene_page.iv_units.text() == " ".join(map(str, top[:5]))
    iv = panel.view.intervene_page
    assert iv.iv_state.currentText() == r["state"] and iv.iv_layer.value() == 0
    # the row's first unit: its top contexts over the reference corpus, its values per tag
    qtbot.waitUntil(lambda: panel.model.contexts is not None and panel.is_ready(),
                    timeout=120000)
    ctx = panel.model.contexts
    assert ctx.choice.unit == top[0] and ctx.choice.state == r["state"]
    values = [c.value for c in ctx.highest]
    assert values == sorted(values, reverse=True) and len(values) == 25
    assert ctx.lowest[0].value <= ctx.lowest[-1].value <= values[-1]
    assert ctx.histogram is not None and "NOUN" in ctx.histogram.counts
    assert panel.view.unit_page.contexts.rowCount() == 51
    assert panel.view.unit_page.contexts.item(0, 2).text() == ctx.highest[0].word


def test_a_ranking_rows_units_are_found_in_one_run_and_kept(qtbot, panel, tmp_path,
                                                           monkeypatch):
    """Selecting a ranking row finds the contexts of the row's first units in one job (one run
    of the model, as ``units top --unit a,b,c``); choosing another of them shows its contexts at
    once, equal to that unit found alone. Kept results follow the corpus (a file changed on
    disk is found again), a job that ends after the fields moved on does not replace what they
    show, and a new model forgets them."""
    from elmo_explorer.views.units import controller
    from elmo_explorer.views.units.unit_contexts import (PREFETCH_UNITS, UnitChoice,
                                                         unit_contexts, units_contexts)

    runs = []

    def counted(model, choice, units, *rest):
        runs.append(list(units))
        return units_contexts(model, choice, units, *rest)

    monkeypatch.setattr(controller, "units_contexts", counted)
    panel.rank()
    qtbot.waitUntil(lambda: panel.model.ranking is not None and panel.is_ready(), timeout=120000)
    v, m = panel.view, panel.model
    v.ranking_page.table.selectRow(2)
    r = m.rankings[2]
    top = list(r["top_units"]["mean-diff"])
    qtbot.waitUntil(lambda: m.contexts is not None and panel.is_ready(), timeout=120000)
    n = min(PREFETCH_UNITS, len(top))
    assert runs == [top[:n]] and n >= 3
    assert len(m.contexts_cache) == n and m.contexts.choice.unit == top[0]
    assert "found in one run with units" in v.status.text()
    # another unit of the row: shown at once, no job, the same as that unit found alone
    v.unit_page.u_unit.setValue(top[2])
    ctx = m.contexts
    assert ctx.choice == UnitChoice(r["layer"], r["direction"], r["state"], top[2])
    assert len(runs) == 1 and panel.is_ready() and "(found before, kept)" in v.status.text()
    assert v.unit_page.contexts.item(0, 2).text() == ctx.highest[0].word
    alone = unit_contexts(panel.ws.embedder.model, ctx.choice, m.source,
                          panel.ws.embedder.token_vectors)
    assert [(c.sentence, c.token, c.word) for c in ctx.highest] == \
        [(c.sentence, c.token, c.word) for c in alone.highest]
    assert np.allclose([c.value for c in ctx.lowest], [c.value for c in alone.lowest], atol=1e-6)
    assert ctx.histogram is not None and set(ctx.histogram.counts) == set(alone.histogram.counts)
    assert all(np.array_equal(ctx.histogram.counts[k], alone.histogram.counts[k])
               for k in ctx.histogram.counts)
    # Top contexts on a kept unit runs nothing
    v.unit_page.contexts_button.click()
    assert len(runs) == 1 and m.contexts is ctx
    # another corpus: found again, one unit; the file changed on disk: found again
    text = tmp_path / "mine.txt"
    text.write_text("Zebras graze near the water .\n", encoding="utf-8")
    v.unit_page.corpus.set_path(str(text))
    panel.contexts()
    qtbot.waitUntil(lambda: m.contexts.corpus.startswith("mine.txt") and panel.is_ready(),
                    timeout=60000)
    assert runs[1:] == [[top[2]]] and m.contexts.positions == 6
    text.write_text("Zebras graze near the water and the bank .\n", encoding="utf-8")
    panel.contexts()
    qtbot.waitUntil(lambda: m.contexts.positions == 9 and panel.is_ready(), timeout=60000)
    assert runs[2:] == [[top[2]]]
    # back to the reference corpus: kept
    v.unit_page.corpus.reset.click()
    panel.contexts()
    assert len(runs) == 3 and m.contexts is ctx
    # a job that ends after the fields moved on to a kept unit leaves that unit shown
    v.unit_page.u_unit.setValue(next(u for u in range(16) if u not in top[:n]))
    fresh = v.unit_page.unit_choice()
    panel.contexts()                                       # submitted, not yet delivered
    v.unit_page.u_unit.setValue(top[2])
    assert m.contexts is ctx
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert runs[3:] == [[fresh.unit]] and m.contexts is ctx
    assert v.unit_page.u_note.text().startswith(ctx.choice.describe())
    v.unit_page.u_unit.setValue(fresh.unit)                # found by that job: kept
    assert m.contexts.choice == fresh and len(runs) == 4
    # a new model forgets them
    m.clear_results()
    assert len(m.contexts_cache) == 0


def test_cancel_stops_the_ranking(qtbot, panel):
    panel.rank()
    panel.cancel()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert panel.model.ranking is None and "Cancelled" in panel.view.status.text()


@pytest.fixture
def demo_panel(qtbot, app_settings_dir):
    """The panel on the bundled model (it has a softmax; the tiny checkpoint has none)."""
    from support import REPO
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    w = Workspace()
    with qtbot.waitSignal(w.model_changed, timeout=60000):
        w.load_model(ModelSpec(str(REPO / "resources" / "demo_model"), device="cpu"))
    p = UnitsPanel(w)
    qtbot.addWidget(p)
    w.set_sentences(SENTENCES)
    qtbot.waitUntil(lambda: p.model.sentence is not None and p.is_ready(), timeout=60000)
    yield p
    assert w.worker.shutdown(timeout_s=60)


def test_intervention_without_a_softmax_remeasures_the_probe_and_the_similarity(
        qtbot, panel, ws, monkeypatch):
    """A checkpoint without a softmax: Intervene re-measured nothing (the softmax's one line,
    though the probe and the word's similarity do not use it). It re-measures those two, as the
    engine does, says the LMs were not scored, and the result is saved, restored, exported and
    reported without an LM part; with neither a probe nor a word it is one line."""
    from elmo_engine.analysis.units.remeasure import fit_probe, probe_under, similarity_under
    from elmo_engine.analysis.units.report import NOT_SCORED, units_part
    from elmo_engine.io.figures import FigureStyle
    from elmo_explorer.views.units import export, intervention
    from elmo_explorer.views.units.model import RankSource

    monkeypatch.setattr(intervention, "PROBE_TOKENS", 800)
    page = panel.view.intervene_page
    page.iv_units.setText("0 1")
    page.iv_word.setText("bank")
    panel.intervene()
    qtbot.waitUntil(lambda: panel.model.remeasure is not None and panel.is_ready(),
                    timeout=120000)
    res = panel.model.remeasure
    assert not res.scored_lms and res.before is None and res.pairs_after is None
    model, vectors = ws.embedder.model, ws.embedder.token_vectors
    ivs = intervention.build_interventions(model, res.spec)
    top = model.opts.n_layers
    probe = fit_probe(model, RankSource().sentences(800), top, token_vectors=vectors)
    p = probe_under(model, probe, ivs, vectors)
    tokens = SENTENCES[0].split()
    sim = similarity_under(model, "bank", intervention.word_contexts("bank", tokens), top, ivs,
                           vectors)
    assert [m.name for m in res.measures] == [f"probe accuracy, layer {top}",
                                              f"similarity of 'bank', layer {top}"]
    assert (res.measures[0].before, res.measures[0].after) == pytest.approx((p.before, p.after))
    assert (res.measures[1].before, res.measures[1].after) == pytest.approx(
        (sim.before, sim.after), abs=1e-6)
    assert page.iv_words.rowCount() == 0 and page.iv_pairs.rowCount() == 0
    assert page.iv_measures.rowCount() == 2
    # the Units view's own words, not the Language model view's "Reach works without"
    summary = page.iv_summary.text()
    assert "no softmax: published ELMo weights carry none" in summary
    assert "Intervene re-measures only a probe and a word's similarity" in summary
    assert "Reach" not in summary and "LMs were not scored" in panel.view.status.text()
    # saved and read back, exported, reported: the measures, no LM part
    state = panel.model.view_state("c" * 64)
    fresh = panel.model.__class__()
    saved = fresh.restore(state)
    fresh.apply_saved(saved)
    assert not fresh.remeasure.scored_lms and fresh.remeasure.measures == res.measures
    text = export.tsv(panel.model, "intervention")
    assert NOT_SCORED in text and "probe accuracy" in text and "fwd_top_before" not in text
    part = units_part(state, None, FigureStyle(), "tiny", "c" * 64)
    assert [t.name for t in part.tables] == ["units_intervention_measures"]
    assert NOT_SCORED in part.tables[0].caption
    # neither a probe (a labels file chosen, not named) nor a word: one line, nothing kept
    panel.model.remeasure = None
    panel.view.ranking_page.source.setCurrentIndex(1)
    page.iv_word.setText("")
    ws.select(None)
    panel.intervene()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert panel.model.remeasure is None
    assert "Without it, Intervene re-measures a probe" in panel.view.status.text()


@pytest.fixture(scope="module")
def softmax():
    from support import REPO
    from elmo_engine.model.softmax import load_softmax

    return load_softmax(REPO / "resources" / "demo_model", output_dim=None)


def test_intervention_panel_remeasures_before_and_after(qtbot, demo_panel, softmax):
    from elmo_engine.analysis.units.ablate import token_predictions
    from elmo_engine.model.lstm_inspect import Intervention, Op, StateKind, patch_from

    panel, ws = demo_panel, demo_panel.ws
    v = panel.view
    v.intervene_page.iv_units.setText("7,x")                       # a bad unit: one line
    panel.intervene()
    assert "'x'" in v.status.text() and panel.jobs.is_idle()
    v.intervene_page.iv_layer.setValue(1)
    v.intervene_page.iv_direction.setCurrentText("forward")
    v.intervene_page.iv_units.setText("78 403 10-11")
    v.intervene_page.iv_op.setCurrentText("zero")
    v.intervene_page.iv_word.setText("bank")
    panel.intervene()
    qtbot.waitUntil(lambda: panel.model.remeasure is not None and panel.is_ready(),
                    timeout=120000)
    res = panel.model.remeasure
    assert res.spec.units == (10, 11, 78, 403) and res.spec.position == 0
    model = ws.embedder.model
    tokens = SENTENCES[0].split()
    ivs = [Intervention(1, 0, StateKind.C, (10, 11, 78, 403), Op.ZERO)]
    want = token_predictions(model, softmax, tokens, ivs)
    assert np.allclose(res.after.surprisal, want.surprisal, atol=1e-4)
    assert res.after.top == want.top
    assert np.allclose(res.before.surprisal, token_predictions(model, softmax, tokens).surprisal,
                       atol=1e-4)
    assert res.after.surprisal[1] == pytest.approx(res.before.surprisal[1], abs=1e-4)
    assert v.intervene_page.iv_words.rowCount() == len(tokens) and v.intervene_page.iv_pairs.rowCount() == 4
    assert v.intervene_page.iv_pairs.item(0, 0).text() == "all"
    assert all(0 <= x <= 1 for x in res.pairs_after.overall)
    # a probe of the top layer (demo POS) and the similarity of 'bank', as the engine measures
    from elmo_engine.analysis.units.remeasure import fit_probe, probe_under, similarity_under
    from elmo_explorer.views.units.intervention import PROBE_TOKENS, word_contexts
    from elmo_explorer.views.units.model import RankSource

    probe = fit_probe(model, RankSource().sentences(PROBE_TOKENS), 2,
                      token_vectors=ws.embedder.token_vectors)
    p = probe_under(model, probe, ivs, ws.embedder.token_vectors)
    sim = similarity_under(model, "bank", word_contexts("bank", tokens), 2, ivs,
                           ws.embedder.token_vectors)
    names = [m.name for m in res.measures]
    assert names == ["probe accuracy, layer 2", "similarity of 'bank', layer 2"]
    assert (res.measures[0].before, res.measures[0].after) == pytest.approx((p.before, p.after))
    assert (res.measures[1].before, res.measures[1].after) == pytest.approx(
        (sim.before, sim.after), abs=1e-6)
    assert 0.5 < p.before <= 1.0 and sim.before != sim.after
    assert v.intervene_page.iv_measures.rowCount() == 2
    assert v.intervene_page.iv_measures.item(0, 1).text() == f"{p.before:.3f} → {p.after:.3f}"
    # patch: the donor's cells at word 2 written into the sentence at word 2
    v.intervene_page.iv_op.setCurrentText("patch")
    v.intervene_page.iv_units.setText("0-511")
    v.intervene_page.iv_position.setValue(2)
    v.intervene_page.iv_donor.setText("The keys to the cabinet are here .")
    panel.intervene()
    qtbot.waitUntil(lambda: panel.model.remeasure.spec.op == "patch" and panel.is_ready(),
                    timeout=120000)
    iv = patch_from(model, "The keys to the cabinet are here .".split(), 1, 0, StateKind.C, 2,
                    range(512))
    want = token_predictions(model, softmax, tokens, [iv])
    got = panel.model.remeasure.after
    assert np.allclose(got.surprisal, want.surprisal, atol=1e-4)
    assert got.surprisal[0][0] == pytest.approx(res.before.surprisal[0][0], abs=1e-4)
    assert abs(got.surprisal[0][2] - res.before.surprisal[0][2]) > 0.01


def test_number_showcase_runs_as_a_job_and_cancels(qtbot, demo_panel, softmax, monkeypatch):
    from functools import partial

    from elmo_engine.analysis.units.ablate import pair_accuracy
    from elmo_explorer.views.units import controller
    from elmo_explorer.views.units.intervention import bundled_minimal_pairs, number_showcase

    panel, ws = demo_panel, demo_panel.ws
    monkeypatch.setattr(controller, "number_showcase",
                        partial(number_showcase, seeds=2, max_tokens=400))
    monkeypatch.setattr(controller, "showcase_ks", lambda opts: (1, 2))   # the job's k
    panel.run_showcase()
    panel.cancel()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert panel.model.showcase == [] and "Cancelled" in panel.view.status.text()
    panel.run_showcase()
    assert panel.view.cancel_button.isEnabled() and not panel.view.showcase_page.showcase_button.isEnabled()
    qtbot.waitUntil(lambda: bool(panel.model.showcase) and panel.is_ready(), timeout=240000)
    rows = panel.model.showcase
    assert [(r["set"], r["k"]) for r in rows[:3]] == [("all", 0), ("all", 1), ("all", 2)]
    assert len(rows) == 3 * 4 and panel.view.showcase_page.showcase.rowCount() == 12
    base = pair_accuracy(ws.embedder.model, softmax, bundled_minimal_pairs())
    assert rows[0]["top"] == pytest.approx(list(base.overall))
    assert all(len(r["random"]) == 3 and r["random"][0][1] >= 0 for r in rows if r["k"])
    assert "top cells forward" in panel.view.showcase_page.showcase_note.text()
    from elmo_explorer.views.units import export

    text = export.tsv(panel.model, "showcase").splitlines()
    assert text[0].startswith("# ") and len(text) == 2 + 12
    row = text[3].split("\t")                                        # all, k = 1
    assert row[:2] == ["all", "1"] and float(row[5]) == pytest.approx(rows[1]["random"][0][0],
                                                                      abs=1e-4)
    # saved with a workspace and shown again on reopening
    state = panel.view_state()
    assert state["results"]["showcase"]["rows"] == rows
    again = UnitsPanel(ws)
    qtbot.addWidget(again)
    again.restore_view_state(state)
    assert again.model.showcase == rows and again.view.showcase_page.showcase.rowCount() == 12
    assert again.view.showcase_page.showcase_note.text() == panel.model.showcase_note
    qtbot.waitUntil(again.is_ready, timeout=60000)


def test_exports_and_the_panel_in_a_workspace(qtbot, demo_panel, tmp_path):
    from elmo_explorer.views.units import export
    from elmo_explorer.views.units.model import UnitsModel

    panel = demo_panel
    v = panel.view
    assert not any(export.has(panel.model, k) for k in ("ranking", "intervention", "showcase"))
    with pytest.raises(LookupError):
        export.write_tsv(panel.model, "ranking", tmp_path / "r.tsv")
    v.intervene_page.iv_units.setText("78 403")
    v.intervene_page.iv_direction.setCurrentText("both")
    v.intervene_page.iv_op.setCurrentText("scale")
    v.intervene_page.iv_value.setValue(-1.5)
    v.intervene_page.iv_position.setValue(3)
    panel.intervene()
    qtbot.waitUntil(lambda: panel.model.remeasure is not None and panel.is_ready(),
                    timeout=120000)
    res = panel.model.remeasure
    out = export.write_tsv(panel.model, "intervention", tmp_path / "iv.tsv")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# layer 1 both c, units 78 403 scaled by -1.5 from word 3")
    first = lines[2].split("\t")
    assert first[:2] == ["1", "He"] and float(first[5]) == pytest.approx(
        res.after.surprisal[0][0], abs=1e-4)
    assert any(line.startswith("all\t") for line in lines)
    assert [a.text() for a in panel.export_actions() if a.isEnabled()] == [
        "Intervention before → after (TSV)…", "Gate means per word (PNG/SVG/PDF)…"]
    png = export.write_figure(panel.model, tmp_path / "gates.png")
    assert png[0].stat().st_size > 5000
    # the panel's fields are saved with a workspace and come back; bad values are dropped
    state = panel.view_state()
    fresh = UnitsModel()
    fresh.restore(state)
    assert fresh.panel["units"] == "78 403" and fresh.panel["op"] == "scale"
    assert fresh.panel["value"] == -1.5 and fresh.panel["direction"] == "both"
    state["panel"].update(op="explode", position=-4, units=7)
    fresh.restore(state)
    assert "op" not in fresh.panel and "position" not in fresh.panel and "units" not in fresh.panel
    # the last results are saved with the model's checksum and shown again, not recomputed
    assert state["results"]["model"] == panel.ws.embedder.checksum
    again = UnitsPanel(panel.ws)
    qtbot.addWidget(again)
    again.restore_view_state(state)
    shown = again.model.remeasure
    assert shown is not None and shown.describe() == res.spec.describe()
    assert np.allclose(shown.after.surprisal, res.after.surprisal, atol=1e-12)
    assert shown.pairs_after.by_set == res.pairs_after.by_set
    assert [m.name for m in shown.measures] == [m.name for m in res.measures]
    assert again.view.intervene_page.iv_words.rowCount() == len(res.before.words)
    assert export.tsv(again.model, "intervention") == export.tsv(panel.model, "intervention")
    qtbot.waitUntil(again.is_ready, timeout=60000)
    # a malformed or another model's result is dropped, never an error
    import copy

    bad = copy.deepcopy(state)
    bad["results"]["intervention"]["after"]["surprisal"][0].append(1.0)
    other = copy.deepcopy(state)
    other["results"]["model"] = "0" * 64
    for broken, note in ((bad, ""), (other, "another model")):
        p2 = UnitsPanel(panel.ws)
        qtbot.addWidget(p2)
        p2.restore_view_state(broken)
        assert p2.model.remeasure is None and note in p2.view.status.text()
        qtbot.waitUntil(p2.is_ready, timeout=60000)
    v.intervene_page.iv_units.setText("")
    v.intervene_page.iv_op.setCurrentText("zero")
    panel.restore_view_state(panel.view_state() | {"panel": {"units": "1 2", "op": "clamp"}})
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert v.intervene_page.iv_units.text() == "1 2" and v.intervene_page.iv_op.currentText() == "clamp"


def test_pattern_search_in_the_view(qtbot, demo_panel):
    from elmo_engine.analysis.units.pattern import find_pattern
    from elmo_engine.model.lstm_inspect import StateKind
    from elmo_explorer.views.units.model import PATTERN_SHOW, pattern_corpus

    panel = demo_panel
    v = panel.view
    assert v.pattern_page.p_layer.value() == panel.ws.embedder.opts.n_layers - 1   # as the CLI
    v.pattern_page.p_layer.setValue(1)
    v.pattern_page.p_start.setValue(4)
    v.pattern_page.p_end.setValue(5)                                               # "the bank"
    v.pattern_page.p_threshold.setValue(0.3)
    panel.pattern()
    qtbot.waitUntil(lambda: panel.model.pattern is not None and panel.is_ready(),
                    timeout=120000)
    res = panel.model.pattern
    sents, labels = pattern_corpus()
    want = find_pattern(panel.ws.embedder.model, SENTENCES[0].split(), (4, 5), 0.3, 1, 0,
                        StateKind.C, sents, labels=labels, show=PATTERN_SHOW,
                        token_vectors=panel.ws.embedder.token_vectors)
    assert res.on_units == want.on_units and len(res.on_units) > 0
    assert [(m.sentence, m.start) for m in res.matches] == [(m.sentence, m.start)
                                                            for m in want.matches]
    assert [m.score for m in res.matches] == pytest.approx([m.score for m in want.matches])
    assert v.pattern_page.pattern.rowCount() == PATTERN_SHOW and v.pattern_page.pattern.item(0, 3).text() == " ".join(
        res.matches[0].words)
    assert all(m.pos is not None and len(m.pos) == 2 for m in res.matches)
    v.pattern_page.p_start.setValue(9)                                             # past the sentence
    v.pattern_page.p_end.setValue(12)
    panel.pattern()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert "9:12" in v.status.text() and "words 1 … 9" in v.status.text()


def test_ranking_a_file_of_the_users_and_reopening_it(qtbot, panel, tmp_path):
    """A CoNLL-U file with a FEATS label is ranked as ``units rank`` ranks it; a bad file is one
    line naming the file and line (no ranking); the ranking comes back from the workspace."""
    from elmo_engine.analysis.units.collect import collect
    from elmo_engine.analysis.units.rank import RankSettings, rank_units
    from elmo_engine.analysis.units.rank import ranking_json
    from elmo_engine.model.lstm_inspect import StateKind
    from elmo_explorer.views.units.model import RANK_SEEDS, RankSource

    lines = []
    for s in SENTENCES * 6:
        for i, w in enumerate(s.split(), 1):
            feats = "Number=Plur" if w.endswith("s") else "Number=Sing" if w.isalpha() else "_"
            lines.append(f"{i}\t{w}\t{w}\tX\t_\t{feats}\t0\troot\t_\t_")
        lines.append("")
    good = tmp_path / "mine.conllu"
    good.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tHe\n", encoding="utf-8")
    page = panel.view.ranking_page
    page.set_source(RankSource(str(bad), "feats:Number"))
    panel.rank()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert "bad.conllu:1" in panel.view.status.text() and panel.model.ranking is None
    page.set_source(RankSource(str(good), "feats:Number"))
    assert page.label.isEnabled() and page.file_note.text() == "mine.conllu"
    panel.rank()
    qtbot.waitUntil(lambda: panel.model.ranking is not None and panel.is_ready(),
                    timeout=120000)
    doc = panel.model.ranking
    assert doc["source"] == "mine.conllu (feats:Number)" and doc["classes"] == ["Plur", "Sing"]
    model = panel.ws.embedder.model
    data = collect(model, RankSource(str(good), "feats:Number").sentences(20_000),
                   [StateKind.C, StateKind.H], token_vectors=panel.ws.embedder.token_vectors)
    want = [ranking_json(r, 8) for r in rank_units(data, RankSettings(ks=(1, 4, 16),
                                                                      seeds=RANK_SEEDS))]
    assert doc["tokens"] == len(data)
    got = doc["rankings"][0]
    assert got["top_units"] == want[0]["top_units"]
    assert got["curve"][0]["top"] == pytest.approx(want[0]["curve"][0]["top"])
    from elmo_explorer.views.units import export

    svg = export.write_figure(panel.model, tmp_path / "curves.svg", kind="curve-figure")
    text = svg[0].read_text(encoding="utf-8")
    assert "layer 1 backward h" in text and "mine.conllu (feats:Number)" in text
    assert [a.text() for a in panel.export_actions() if a.isEnabled()][:3] == [
        "Units ranking (TSV)…", "Top-k curves (TSV)…", "Top-k curves (PNG/SVG/PDF)…"]
    # reopened: the same table and curve, without ranking again
    state = panel.view_state()
    assert state["source"] == {"path": str(good), "label": "feats:Number"}
    again = UnitsPanel(panel.ws)
    qtbot.addWidget(again)
    again.restore_view_state(state)
    assert again.model.ranking == doc and again.view.ranking_page.table.rowCount() == 8
    assert again.view.ranking_page.rank_source() == RankSource(str(good), "feats:Number")
    qtbot.waitUntil(again.is_ready, timeout=60000)
    # and reported (tables, the curves figure) from the saved state alone
    from elmo_engine.analysis.units.report import units_part
    from elmo_engine.io.figures import FigureStyle

    part = units_part(state, tmp_path / "fig", FigureStyle(formats=("svg",)),
                      checksum=panel.ws.embedder.checksum)
    names = [t.name for t in part.tables]
    assert names == ["units_ranking", "units_topk_curve"]
    assert part.tables[0].rows[0]["top (mean diff)"] == " ".join(
        map(str, got["top_units"]["mean-diff"][:5]))
    assert [f.path.name for f in part.figures] == ["units_topk_curve.svg"]
    assert units_part(state, None, FigureStyle(), checksum="other").notes


def test_a_model_loaded_after_the_view_replaces_the_load_a_model_line(qtbot, tiny_checkpoint,
                                                                      app_settings_dir):
    """At start-up the view exists before the model: once it is loaded and a sentence drawn,
    the status line gives the next step instead of asking for a model."""
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    w = Workspace()
    p = UnitsPanel(w)
    qtbot.addWidget(p)
    assert "Load a model" in p.view.status.text()
    with qtbot.waitSignal(w.model_changed, timeout=60000):
        w.load_model(ModelSpec(str(tiny_checkpoint), device="cpu"))
    w.set_sentences(SENTENCES)
    qtbot.waitUntil(lambda: p.model.sentence is not None and p.is_ready(), timeout=60000)
    assert "Load a model" not in p.view.status.text()
    assert p.view.status.text().startswith("Rank units ranks")
    assert w.worker.shutdown(timeout_s=60)


def test_contexts_and_pattern_over_corpora_of_the_users(qtbot, panel, tmp_path):
    """The Unit tab's contexts and the pattern search over a sentence file and a CoNLL-U of
    the user's (read as ``units top`` / ``units pattern`` read them), a bad file as one line,
    and both choices saved with the view."""
    v = panel.view
    text = tmp_path / "mine.txt"
    text.write_text("Zebras graze near the water .\n\nThe zebra ran .\n", encoding="utf-8")
    v.unit_page.corpus.set_path(str(text))                    # as the file dialog does
    assert panel.model.contexts_corpus.path == str(text) and v.unit_page.corpus.reset.isEnabled()
    assert v.unit_page.corpus.pretokenized.isEnabled()                # a sentence file
    v.unit_page.u_unit.setValue(3)
    panel.contexts()
    qtbot.waitUntil(lambda: panel.model.contexts is not None and panel.is_ready(),
                    timeout=60000)
    ctx = panel.model.contexts
    assert ctx.positions == 10 and ctx.corpus == "mine.txt (10 words)"
    assert {c.word for c in ctx.highest} == set("Zebras graze near the water . The zebra ran".split())
    assert "over mine.txt" in v.status.text()
    assert v.unit_page.u_note.text().endswith("of 10 positions in mine.txt (10 words).")
    # the pattern search over a CoNLL-U: the matches carry its UPOS tags
    conllu = tmp_path / "mine.conllu"
    rows = [("The", "DET"), ("bank", "NOUN"), ("lends", "VERB"), ("money", "NOUN")]
    conllu.write_text("".join(f"{i}\t{w}\t_\t{t}\t_\t_\t0\tdep\t_\t_\n"
                              for i, (w, t) in enumerate(rows, 1)) + "\n", encoding="utf-8")
    v.pattern_page.corpus.set_path(str(conllu))
    v.pattern_page.p_layer.setValue(1)
    v.pattern_page.p_start.setValue(4)
    v.pattern_page.p_end.setValue(5)                                         # "the bank"
    v.pattern_page.p_threshold.setValue(-100.0)                              # every unit is on
    panel.pattern()
    qtbot.waitUntil(lambda: panel.model.pattern is not None and panel.is_ready(), timeout=60000)
    res = panel.model.pattern
    assert res.matches and all(m.sentence == 0 for m in res.matches)
    tags = dict(rows)
    assert all(list(m.pos) == [tags[w] for w in m.words] for m in res.matches)
    assert "in mine.conllu (4 words)" in v.status.text()
    assert v.pattern_page.p_note.text().endswith("spans of mine.conllu (4 words).")
    # both choices go into the saved state, and come back
    state = panel.view_state()
    assert state["corpora"] == {"contexts": {"path": str(text), "pretokenized": False,
                                             "index": False},
                                "pattern": {"path": str(conllu), "pretokenized": False,
                                            "index": False}}
    assert not v.pattern_page.corpus.pretokenized.isEnabled()         # CoNLL-U: its own words
    v.unit_page.corpus.reset.click()
    assert panel.model.contexts_corpus.path == "" and v.unit_page.corpus.name.text().startswith(
        "the reference corpus")
    assert not v.unit_page.corpus.pretokenized.isEnabled()
    panel.restore_view_state(state)
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert panel.model.contexts_corpus.path == str(text)
    assert (v.unit_page.corpus.name.text(), v.pattern_page.corpus.name.text()) == (
        "mine.txt", "mine.conllu")
    # a saved state without corpora (or with a path holding NUL) gives the defaults; a plain
    # path (saved before the Pretokenized switch) is that file, tokenized
    model = UnitsModel()
    model.restore({"corpora": {"contexts": "a\x00b", "pattern": str(conllu)}})
    assert (model.contexts_corpus, model.pattern_corpus) == (CorpusFile(), CorpusFile(str(conllu)))
    model.restore({"corpora": {"contexts": {"path": str(text), "pretokenized": "yes"},
                               "pattern": {"path": 3, "pretokenized": True}}})
    assert (model.contexts_corpus, model.pattern_corpus) == (CorpusFile(str(text)), CorpusFile())
    model.restore({})
    assert (model.contexts_corpus, model.pattern_corpus) == (CorpusFile(), CorpusFile())
    # a bad file: one line naming it, the last contexts kept, the view still works
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\n")
    v.unit_page.corpus.set_path(str(bad))
    panel.contexts()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert "bad.txt" in v.status.text() and "UTF-8" in v.status.text()
    assert panel.model.contexts is ctx


def test_contexts_over_a_corpus_index_are_units_top_index(qtbot, panel, tmp_path, tiny_checkpoint,
                                                         monkeypatch, capsys):
    """*Choose index…* beside the Unit tab's corpus: the unit over every sentence of a corpus
    index, as ``units top --index`` ranks it (the same highest positions), cancellable like
    any job; *Pretokenized* off for an index, the choice saved with the view; a folder that
    is not an index is one line."""
    import json

    from PySide6.QtWidgets import QFileDialog

    from elmo_engine.cli.main import main

    text = tmp_path / "c.txt"
    text.write_text("Zebras graze near the water .\nThe zebra ran to the bank .\n"
                    "A bank lends money .\n", encoding="utf-8")
    folder = tmp_path / "ix"
    assert main(["index", str(text), "-o", str(folder), "--checkpoint", str(tiny_checkpoint),
                 "--device", "cpu", "--layer", "1"]) == 0
    v = panel.view
    chooser = v.unit_page.corpus
    assert chooser.choose_index is not None and v.pattern_page.corpus.choose_index is not None
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(folder))
    chooser.choose_index.click()
    assert panel.model.contexts_corpus == CorpusFile(str(folder), index=True)
    assert chooser.name.text() == "the index ix" and not chooser.pretokenized.isEnabled()
    v.unit_page.u_layer.setValue(1)
    v.unit_page.u_direction.setCurrentText("backward")
    v.unit_page.u_unit.setValue(4)
    panel.contexts()
    qtbot.waitUntil(lambda: panel.model.contexts is not None and panel.is_ready(),
                    timeout=60000)
    ctx = panel.model.contexts
    capsys.readouterr()
    assert main(["units", "top", "--index", str(folder), "--checkpoint", str(tiny_checkpoint),
                 "--device", "cpu", "--layer", "1", "--direction", "backward", "--unit", "4",
                 "--show", str(len(ctx.highest)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(c.sentence, c.token, c.word) for c in ctx.highest] == \
        [(e["sentence"], e["token"], e["word"]) for e in doc["top"]]
    assert np.allclose([c.value for c in ctx.highest], [e["value"] for e in doc["top"]], atol=1e-6)
    assert ctx.positions == doc["positions"] == 18 and ctx.corpus == "the corpus index ix (18 words)"
    assert v.unit_page.u_note.text().endswith("of 18 positions in the corpus index ix (18 words).")
    assert panel.view_state()["corpora"]["contexts"] == {"path": str(folder), "pretokenized": False,
                                                          "index": True}
    assert CorpusFile.from_saved(panel.view_state()["corpora"]["contexts"]).is_index
    # the pattern search over the same index, as units pattern --index
    v.pattern_page.corpus.choose_index.click()
    assert panel.model.pattern_corpus == CorpusFile(str(folder), index=True)
    v.pattern_page.p_layer.setValue(1)
    v.pattern_page.p_start.setValue(4)
    v.pattern_page.p_end.setValue(5)                                         # "the bank"
    v.pattern_page.p_threshold.setValue(0.05)
    panel.pattern()
    qtbot.waitUntil(lambda: panel.model.pattern is not None and panel.is_ready(), timeout=60000)
    res = panel.model.pattern
    assert main(["units", "pattern", "--index", str(folder), "--checkpoint", str(tiny_checkpoint),
                 "--device", "cpu", "--layer", "1", "--sentence", SENTENCES[0], "--span", "4:5",
                 "--threshold", "0.05", "--show", "30", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(m.sentence, m.start, list(m.words)) for m in res.matches] == \
        [(m["sentence"], m["start"], m["words"]) for m in doc["matches"]] and res.matches
    assert "in the corpus index ix (18 words)" in v.status.text()
    # a folder that is not an index: one line naming it, the last contexts kept
    plain = tmp_path / "plain"
    plain.mkdir()
    chooser.set_index(str(plain))
    panel.contexts()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert "plain" in v.status.text() and "index" in v.status.text()
    assert panel.model.contexts is ctx


def test_pretokenized_splits_a_corpus_of_the_users_on_spaces_only(qtbot, panel, tmp_path):
    """*Pretokenized* beside a corpus of the user's: its lines split on spaces only, as
    ``units top/pattern --pretokenized`` read them (WikiText's ``@-@`` stays one word; the
    tokenizer splits it in three), in the contexts and the pattern search alike, saved with the
    view; off for the defaults and for CoNLL-U."""
    from elmo_engine.analysis.units.corpus import read_units_corpus

    v = panel.view
    wiki = tmp_path / "wiki.txt"
    wiki.write_text("The well @-@ known zebra ran 1 @,@ 000 miles .\n", encoding="utf-8")
    chooser = v.unit_page.corpus
    assert not chooser.pretokenized.isEnabled()                 # the default corpus
    chooser.set_path(str(wiki))
    assert chooser.pretokenized.isEnabled() and not chooser.pretokenized.isChecked()

    def contexts():
        panel.model.contexts = None
        panel.contexts()
        qtbot.waitUntil(lambda: panel.model.contexts is not None and panel.is_ready(),
                        timeout=60000)
        return panel.model.contexts

    tokenized = contexts()
    assert tokenized.positions == 15 and "@-@" not in {c.word for c in tokenized.highest}
    chooser.pretokenized.click()                                 # as the user ticks it
    assert panel.model.contexts_corpus == CorpusFile(str(wiki), True)
    split = contexts()
    want = read_units_corpus(wiki, 30_000, pretokenized=True).sentences
    assert split.positions == sum(map(len, want)) == 11
    assert {c.word for c in split.highest} == set(want[0])
    # the pattern search over the same file, pretokenized: its spans hold "@-@" as one word
    v.pattern_page.corpus.set_choice(CorpusFile(str(wiki), True))
    assert panel.model.pattern_corpus == CorpusFile(str(wiki), True)
    v.pattern_page.p_start.setValue(1)
    v.pattern_page.p_end.setValue(2)
    v.pattern_page.p_threshold.setValue(-100.0)                  # every unit is on
    panel.pattern()
    qtbot.waitUntil(lambda: panel.model.pattern is not None and panel.is_ready(), timeout=60000)
    words = {w for m in panel.model.pattern.matches for w in m.words}
    assert "@-@" in words and "@" not in words
    # saved with the view and back; the switch is shown ticked
    state = panel.view_state()
    assert state["corpora"]["contexts"] == {"path": str(wiki), "pretokenized": True,
                                            "index": False}
    chooser.pretokenized.click()
    assert panel.model.contexts_corpus == CorpusFile(str(wiki), False)
    panel.restore_view_state(state)
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert chooser.pretokenized.isChecked() and panel.model.contexts_corpus.pretokenized
    # a CoNLL-U file: the switch is off to the reader whatever it shows
    conllu = tmp_path / "w.conllu"
    conllu.write_text("1\t@-@\t_\tPUNCT\t_\t_\t0\tdep\t_\t_\n\n", encoding="utf-8")
    chooser.set_path(str(conllu))
    assert not chooser.pretokenized.isEnabled() and not CorpusFile(str(conllu), True
                                                                   ).split_on_spaces


def test_the_kept_contexts_are_bounded_least_recently_used_first(tmp_path):
    """ContextsCache keeps at most its limit, dropping the least recently used (a lookup
    counts as a use); a key follows the corpus file's stamp and an index's manifest's."""
    from elmo_explorer.views.units.model import UnitContexts
    from elmo_explorer.views.units.unit_contexts import (MAX_KEPT, ContextsCache, ContextsKey,
                                                         UnitChoice, stamp)

    assert MAX_KEPT == 512
    cache = ContextsCache(limit=3)
    base = ContextsKey.of(UnitChoice(1, "forward", "c", 0), CorpusFile(), None)
    keys = [base.for_unit(u) for u in range(4)]
    found = {k: UnitContexts(k.choice, 10, [], []) for k in keys}
    for k in keys[:3]:
        cache.put(k, found[k])
    assert cache.get(keys[0]) is found[keys[0]]                   # 0 is now the most recent
    cache.put(keys[3], found[keys[3]])
    assert len(cache) == 3 and keys[1] not in cache
    assert [k in cache for k in (keys[0], keys[2], keys[3])] == [True, True, True]
    cache.clear()
    assert len(cache) == 0 and cache.get(keys[0]) is None
    # stamps: the default corpus and a missing file are (0, 0); a file's change moves its key
    text = tmp_path / "c.txt"
    assert stamp("") == (0, 0) and stamp(str(text)) == (0, 0)
    text.write_text("a b\n", encoding="utf-8")
    one = ContextsKey.of(UnitChoice(), CorpusFile(str(text)), None)
    text.write_text("a b c d\n", encoding="utf-8")
    assert ContextsKey.of(UnitChoice(), CorpusFile(str(text)), None) != one
    folder = tmp_path / "ix"
    folder.mkdir()
    (folder / "index.json").write_text("{}", encoding="utf-8")
    assert stamp(str(folder), index=True)[1] == 2 and stamp(str(folder), index=True) != (0, 0)


def test_number_units_takes_the_k_the_models_cells_allow():
    """k is at most half the cells: a model of 24 cells takes 1, 2, 4 and 8 (16 failed, with a
    status line naming --k, an option the app does not have)."""
    from types import SimpleNamespace

    from elmo_explorer.views.units.intervention import SHOWCASE_KS, showcase_ks

    assert showcase_ks(SimpleNamespace(lstm_dim=24)) == (1, 2, 4, 8)
    assert showcase_ks(SimpleNamespace(lstm_dim=4096)) == tuple(SHOWCASE_KS)
    assert showcase_ks(SimpleNamespace(lstm_dim=1)) == ()
