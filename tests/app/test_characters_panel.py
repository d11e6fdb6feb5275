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
    qtbot.waitUntil(lambda: bool(p.is_ready() and p.model.lab and p.model.atlas and p.model.sweep),
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
    figs = panel.report_figures(tmp_path / "r", type("O", (), {"formats": ["png"], "dpi": 50})())
    assert sorted(p.name for p in figs) == ["characters_filters.png", "characters_perturb.png"]
    assert np.isfinite([v for d in panel.model.lab for v in [d["norm"]]]).all()
