"""The Characters view on the tiny checkpoint (issue 41): the word lab, the atlas and the sweep
show the engine's numbers, a search lists the filters, a bad sweep word is one inline message,
the panel's state round-trips and its exports are files."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_engine.analysis.characters import perturb
from elmo_engine.analysis.characters.windows import filters_of
from elmo_engine.analysis.characters.word_lab import analyse
from elmo_explorer.views.characters import export
from elmo_explorer.views.characters.controller import CharactersPanel

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def panel(qtbot, ws, app_settings_dir):
    p = CharactersPanel(ws)                     # the model is loaded: every job starts now
    qtbot.addWidget(p)
    qtbot.waitUntil(lambda: bool(p.is_ready() and p.model.lab and p.model.atlas and p.model.sweep
                                 and (p.model.nonce or p.model.nonce_problem)),
                    timeout=120000)
    return p


def test_the_view_shows_the_engines_numbers(qtbot, panel, ws):
    m = panel.model
    assert [d["word"] for d in m.lab] == ["blorft", "recieve", "Antidisestablishmentarianism"]
    want = analyse(filters_of(ws.embedder.model.char_cnn), ["recieve"])[0]
    got = m.lab[1]
    assert got["characters"] == "⟨recieve⟩" and got["norm"] == pytest.approx(want.norm, abs=1e-4)
    assert got["top_filters"][0]["value"] == pytest.approx(float(want.pooled.max()), abs=1e-4)
    assert len(got["neighbours"]) == 10 and m.vocabulary_size > 10000
    assert "recieve" in panel.view.lab_text.toPlainText()
    assert len(m.atlas) == sum(k for _, k in ws.embedder.opts.filters)
    assert panel.view.atlas_table.rowCount() == len(m.atlas)
    emb = ws.embedder
    tokens = m.sentence.split()
    ref = perturb.sweep(emb, [tokens], m.word, 4).to_dict()
    assert m.sweep["mean_per_type"] == ref["mean_per_type"]
    rows, _, _ = m.sweep_table()
    assert panel.view.mean_table.rowCount() == len(rows) == len(perturb.Kind)


def test_search_width_and_a_bad_sweep_word(qtbot, panel):
    with qtbot.waitSignal(panel.results_changed, timeout=30000,
                          check_params_cb=lambda what: what == "search"):
        panel.view.search_edit.setText("-ing")
    hits = panel.model.search_hits
    assert hits and hits[0]["relative"] >= hits[-1]["relative"]
    assert not panel.view.atlas_table.isColumnHidden(3)
    panel.view.width_combo.setCurrentIndex(panel.view.width_combo.findData(2))
    qtbot.waitUntil(panel.is_ready, timeout=30000)
    assert {int(panel.view.atlas_table.item(r, 1).text())
            for r in range(panel.view.atlas_table.rowCount())} == {2}
    panel.view.word_edit.setText("absent")
    panel.run_sweep()
    qtbot.waitUntil(lambda: panel.is_ready() and "Characters:" in panel.view.status.text(),
                    timeout=30000)
    assert "'absent' is not a token" in panel.view.status.text()


def test_new_words_state_and_exports(qtbot, panel, tmp_path):
    panel.view.words_edit.setText("teh 2nd")
    with qtbot.waitSignal(panel.results_changed, timeout=60000):
        panel.analyse()
    assert [d["word"] for d in panel.model.lab] == ["teh", "2nd"]
    state = panel.view_state()
    assert state["words"] == "teh 2nd"
    panel.view.words_edit.setText("x")
    panel.restore_view_state(state)
    assert panel.view.words_edit.text() == "teh 2nd"
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    written = export.write_figure(panel.model, "perturb", tmp_path / "p.png")
    assert written[0].read_bytes()[:4] == b"\x89PNG"
    export.write_tsv(panel._atlas[1].to_tsv(3), tmp_path / "a.tsv")
    lines = (tmp_path / "a.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + len(panel.model.atlas)
    assert [a.text() for a in panel.export_actions()] == [
        "Filter map (PNG/SVG/PDF)…", "Perturbation chart (PNG/SVG/PDF)…", "Filter atlas (TSV)…"]
    assert all(a.isEnabled() for a in panel.export_actions())
    assert np.isfinite([v for d in panel.model.lab for v in [d["norm"]]]).all()


def test_a_model_without_a_softmax_says_so_in_the_in_context_tab(panel):
    assert panel.model.nonce is None
    assert panel.model.nonce_problem.startswith("No predictions: this model has no usable softmax")
    assert "No predictions" in panel.view.nonce_text.toPlainText()


def test_nonce_word_in_context_on_the_bundled_model(qtbot, app_settings_dir):
    from elmo_engine.resources import demo_checkpoint_path
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    w = Workspace()
    try:
        with qtbot.waitSignal(w.model_changed, timeout=60000):
            w.load_model(ModelSpec(str(demo_checkpoint_path()), device="cpu"))
        p = CharactersPanel(w)
        qtbot.addWidget(p)
        qtbot.waitUntil(lambda: bool(p.is_ready() and p.model.nonce), timeout=120000)
        d = p.model.nonce
        assert d["word"] == "blorft" and not d["in_vocabulary"] and d["position"] == 4
        assert len(d["forward_predictions"]) == 10 and len(d["both_agree"]) == 10
        assert [t for t, _ in p.model.nonce_columns()][0].startswith("layer 0")
        text = p.view.nonce_text.toPlainText()
        assert "outside the softmax's vocabulary" in text and d["both_agree"][0][0] in text
        p.view.nonce_word_edit.setText("river")
        with qtbot.waitSignal(p.results_changed, timeout=60000,
                              check_params_cb=lambda what: what == "nonce"):
            p.run_nonce()
        assert p.model.nonce["in_vocabulary"] and p.model.nonce["forward_rank"] >= 1
    finally:
        assert w.worker.shutdown(timeout_s=60)
