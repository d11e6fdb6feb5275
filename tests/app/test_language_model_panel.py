"""The "Language model" view under pytest-qt (offscreen), on a tiny random checkpoint with a
test-written softmax, and on one without: the selection fills the detail, the reach heatmap
has one row per layer and direction, the missing softmax is one line, exports write files,
the view state round-trips, minimal pairs are scored on the worker."""
from __future__ import annotations

import json
import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_engine.analysis.language_model import predict, reach
from elmo_explorer.state.workspace import ModelSpec, TokenRef, Workspace
from elmo_explorer.views.language_model.controller import LanguageModelPanel
from lm_helpers import checkpoint_with_softmax

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]
SENTENCES = ["the cat sat on the mat .", "a dog sits ."]


@pytest.fixture(scope="module")
def with_softmax(tmp_path_factory, tiny_checkpoint):
    return checkpoint_with_softmax(tiny_checkpoint, tmp_path_factory.mktemp("lmpanel") / "model",
                                   7)


def _open(qtbot, checkpoint, shown=lambda m: m.reach is not None):
    """A workspace of :data:`SENTENCES` on ``checkpoint`` and the panel, once it is ready and
    ``shown(panel.model)`` (default: the reach is there)."""
    ws = Workspace()
    ws.set_sentences(SENTENCES)
    with qtbot.waitSignal(ws.model_changed, timeout=60000):
        ws.load_model(ModelSpec(str(checkpoint), device="cpu"))
    panel = LanguageModelPanel(ws)
    qtbot.addWidget(panel)
    panel.resize(1100, 700)
    qtbot.waitUntil(lambda: ws.all_embedded() and panel.is_ready() and shown(panel.model),
                    timeout=60000)
    return ws, panel


@pytest.fixture
def opened(qtbot, with_softmax, app_settings_dir):
    ws, panel = _open(qtbot, with_softmax)
    qtbot.waitUntil(lambda: panel.model.predictions is not None and panel.is_ready(),
                    timeout=60000)
    yield ws, panel
    assert ws.worker.shutdown(timeout_s=10)


def test_selecting_a_token_fills_the_detail_with_the_engines_numbers(qtbot, opened):
    ws, panel = opened
    ws.select(TokenRef(0, 2))
    qtbot.waitUntil(lambda: panel.model.token == 2 and panel.is_ready(), timeout=30000)
    expected = predict(ws.embedder, panel.softmax, [ws.tokens[0]], top_k=10)[0]
    html = panel.view.detail.toHtml()
    assert "sat" in html and "Forward LM" in html and "Backward LM" in html
    assert f"rank {expected.forward[2].rank:,}" in html
    assert f"{expected.backward[2].surprisal:.2f} bits" in html
    assert panel.view.rows.selected == 2
    assert panel.view.perplexity.text().startswith(
        f"Perplexity: forward {expected.perplexity[0]:,.1f}")


def test_a_click_on_a_token_selects_it_in_the_workspace(qtbot, opened):
    ws, panel = opened
    rows = panel.view.rows
    from PySide6.QtCore import Qt

    qtbot.mouseClick(rows, Qt.MouseButton.LeftButton, pos=rows.token_rect(4).center())
    assert ws.selection == TokenRef(0, 4) and panel.model.token == 4


def test_reach_heatmap_has_a_row_per_layer_and_direction(qtbot, opened):
    ws, panel = opened
    ws.select(TokenRef(0, 3))
    qtbot.waitUntil(lambda: panel.model.token == 3, timeout=30000)
    matrix = panel.view.reach.matrix
    n_layers = ws.n_layers
    assert matrix.shape == (2 * n_layers, len(ws.tokens[0]))
    d = reach(ws.embedder, ws.tokens[0]).distance
    np.testing.assert_allclose(matrix[2], d[1, 0, 3], atol=1e-7)   # layer 1 forward
    assert matrix[2, 4:].max() <= 1e-6 and matrix[3, :3].max() <= 1e-6


def test_a_checkpoint_without_a_softmax_says_which_file_and_still_shows_reach(
        qtbot, tiny_checkpoint, app_settings_dir):
    ws, panel = _open(qtbot, tiny_checkpoint)
    try:
        status = panel.view.status.text()
        assert "\n" not in status and "*softmax_weights.hdf5" in status
        assert "models get NAME --with-softmax" in status
        assert panel.model.predictions is None and panel.view.rows.bins is None
        assert panel.view.reach.matrix.shape == (2 * ws.n_layers, len(ws.tokens[0]))
        assert panel.score_pairs() is None
        assert "softmax" in panel.view.pairs.status.text()
    finally:
        assert ws.worker.shutdown(timeout_s=10)


def test_a_sentence_over_the_reach_bound_still_gets_its_predictions(
        qtbot, with_softmax, app_settings_dir, monkeypatch):
    """A sentence of 201–1,000 tokens: one job ran the reach first, which refuses more than 200
    tokens, and the view lost the predictions too (``lm`` gives them without ``--reach``). Now
    the predictions are computed and the reach says why it is not (the bound lowered to 5 here,
    for a 7-token sentence)."""
    import importlib

    reach_module = importlib.import_module("elmo_engine.analysis.language_model.reach")

    monkeypatch.setattr(reach_module, "MAX_REACH_TOKENS", 5)
    ws, panel = _open(qtbot, with_softmax, lambda m: m.predictions is not None)
    try:
        m = panel.model
        assert len(m.tokens) == 7 and m.reach is None
        expected = predict(ws.embedder, panel.softmax, [ws.tokens[0]], top_k=10)[0]
        assert m.predictions.perplexity == pytest.approx(expected.perplexity)
        assert m.reach_problem() == "No reach: 7 tokens, more than 5"
        assert "error" not in panel.view.status.text().lower()
        ws.select(TokenRef(1, 1))                          # 3 tokens: within the bound
        qtbot.waitUntil(lambda: m.tokens == tuple(ws.tokens[1]) and m.reach is not None
                        and panel.is_ready(), timeout=60000)
        assert m.reach_problem() == ""
    finally:
        assert ws.worker.shutdown(timeout_s=10)


def test_exports_write_the_figure_tsv_and_lm_json(qtbot, opened, tmp_path):
    ws, panel = opened
    png = panel.export_figure("sentence", tmp_path / "lm.png")
    assert png[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tsv = panel.export_tsv(tmp_path / "lm.tsv").read_text(encoding="utf-8").splitlines()
    assert len(tsv) == 1 + len(ws.tokens[0])
    head = tsv[0].split("\t")
    assert head[:2] == ["index", "word"] and "forward surprisal" in head
    assert tsv[1].split("\t")[1] == "the"
    doc = json.loads(panel.export_json(tmp_path / "lm.json").read_text(encoding="utf-8"))
    sent = doc["sentences"][0]
    assert set(sent) >= {"tokens", "forward", "backward", "substitutes", "perplexity", "reach"}
    assert set(sent["forward"][0]) >= {"word", "prob", "rank", "surprisal", "entropy", "top"}
    assert len(sent["reach"]) == ws.n_layers and len(sent["reach"][0][0]) == len(ws.tokens[0])
    with pytest.raises(LookupError):
        panel.export_figure("pairs", tmp_path / "p.png")            # nothing scored yet


def test_the_export_entries_ask_for_a_path_write_and_say_so(qtbot, opened, tmp_path,
                                                             monkeypatch):
    from elmo_explorer.views.language_model import controller

    ws, panel = opened
    actions = panel.export_actions()
    assert [a.text() for a in actions] == [
        "Language model figure (PNG/SVG/PDF)…", "Minimal pairs figure (PNG/SVG/PDF)…",
        "Language model per token (TSV)…", "Language model sentence (JSON)…"]
    assert [a.isEnabled() for a in actions] == [True, False, True, True]  # no pairs scored
    monkeypatch.setattr(controller, "ask_save_path", lambda *a: tmp_path / "s.json")
    with qtbot.waitSignal(panel.exported, timeout=5000) as sig:
        actions[3].trigger()
    assert sig.args == [str(tmp_path / "s.json")]
    doc = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert doc["sentences"][0]["tokens"] == list(ws.tokens[0])
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    bad = tmp_path / "a-file" / "t.tsv"                   # a file where a folder must be
    monkeypatch.setattr(controller, "ask_save_path", lambda *a: bad)
    actions[2].trigger()                                  # the write fails: one line, no crash
    assert not bad.exists() and panel.view.status.text().startswith("Export failed:")


def test_view_state_round_trips(qtbot, opened):
    ws, panel = opened
    ws.select(TokenRef(1, 1))
    panel.view.k_box.setValue(5)
    qtbot.waitUntil(lambda: panel.is_ready() and panel.model.predictions is not None
                    and len(panel.model.predictions.forward[0].top) == 5, timeout=30000)
    state = panel.view_state()
    assert state["sentence"] == 1 and state["token"] == 1 and state["top_k"] == 5
    ws.select(TokenRef(0, 0))
    panel.view.k_box.setValue(10)
    panel.restore_view_state(state)
    assert ws.selection == TokenRef(1, 1) and panel.view.k_box.value() == 5
    qtbot.waitUntil(lambda: panel.model.tokens == ("a", "dog", "sits", ".")
                    and panel.model.token == 1, timeout=30000)


def test_minimal_pairs_are_scored_on_the_worker(qtbot, opened, tmp_path):
    ws, panel = opened
    f = tmp_path / "pairs.tsv"
    f.write_text("set\tgood\tbad\nagr\tthe cat sits\tthe cats sits\ndet\ta cat .\ta cats .\n",
                 encoding="utf-8")
    panel.set_pairs_source(str(f))
    with qtbot.waitSignal(panel.pairs_drawn, timeout=60000):
        panel.score_pairs()
    acc = panel.view.pairs.accuracy
    assert acc.rowCount() == 2 and acc.item(0, 0).text() == "agr" and acc.item(0, 1).text() == "1"
    assert panel.view.pairs.pairs.rowCount() == 2
    assert panel.model.pair == 0 and panel.view_state()["pairs"] == str(f)
    written = panel.export_figure("pairs", tmp_path / "pairs.svg")
    assert written[0].read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_the_filled_view_fits_beside_the_sentences_dock_on_a_1280_wide_screen(opened):
    _ws, panel = opened
    assert panel.view.perplexity.text() and panel.view.detail.toPlainText()
    # the window's other parts (the dock, margins) take ~330 px of 1280
    assert panel.minimumSizeHint().width() <= 900, panel.minimumSizeHint()


def test_app_report_and_export_report_write_the_same_language_model_tables(
        qtbot, with_softmax, app_settings_dir, tmp_path):
    """End to end: the window's Save workspace + Export report…, then ``elmo-explorer export
    report`` on the saved workspace: the language-model CSVs are the same."""
    import elmo_explorer.persistence.workspace_actions as wa
    from elmo_engine.cli.main import main as cli
    from elmo_explorer.common.figure_export import FigureOptions
    from elmo_explorer.shell.main_window import MainWindow
    from elmo_explorer.state.settings import AppSettings

    w = MainWindow(AppSettings(app_settings_dir), views=("language-model",))
    qtbot.addWidget(w)
    w.show()
    w.start(str(with_softmax), "\n".join(SENTENCES) + "\n")
    panel = w.panels["language-model"]
    qtbot.waitUntil(lambda: w.workspace.all_embedded() and panel.model.predictions is not None
                    and panel.is_ready(), timeout=60000)
    try:
        w.workspace.select(TokenRef(0, 2))
        qtbot.waitUntil(lambda: panel.model.token == 2 and panel.is_ready(), timeout=30000)
        actions = wa.install_workspace_actions(w, recover=False)
        saved = tmp_path / "lm.elmows.json"
        with qtbot.waitSignal(actions.saved, timeout=30000):
            actions.save_workspace(saved)
        with qtbot.waitSignal(actions.exported, timeout=60000):
            actions.export_report(tmp_path / "app", FigureOptions(dpi=60))
        assert cli(["export", "report", str(saved), "-o", str(tmp_path / "cli")]) == 0
        for name in ("language_model_tokens.csv", "language_model_reach.csv"):
            app_rows = (tmp_path / "app" / "tables" / name).read_text(encoding="utf-8")
            cli_rows = (tmp_path / "cli" / "tables" / name).read_text(encoding="utf-8")
            assert app_rows.splitlines()[0] == cli_rows.splitlines()[0]
            assert len(app_rows.splitlines()) == len(cli_rows.splitlines()) > 2
            for a, b in zip(app_rows.splitlines()[1:], cli_rows.splitlines()[1:]):
                for x, y in zip(a.split(","), b.split(",")):
                    try:
                        assert float(x) == pytest.approx(float(y), abs=1e-6)
                    except ValueError:
                        assert x == y
        figs = {p.name for p in (tmp_path / "cli" / "figures").iterdir()}
        assert "language_model_sentence.png" in figs
    finally:
        w.workspace.worker.shutdown()


def test_token_labels_are_staggered_not_cut_when_columns_are_narrow(qtbot):
    """Issue 39: at 1280×800 the reach heatmap's token labels read "b…", "ri…"; when a label
    is wider than its column the labels take two lines, each two columns wide."""
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QLabel

    from elmo_explorer.views.language_model.pairs_view import fitted_ticks

    fm = QFontMetrics(QLabel().font())
    words = "He sat on the bank of the river and watched the boats .".split()
    wide = fitted_ticks(words, 60 * len(words), fm)
    assert [t for _x, t in wide] == words                           # room: one line, whole
    narrow = fitted_ticks(words, 26 * len(words), fm, offset=0.5)
    texts = [t for _x, t in narrow]
    assert texts[4] == "bank" and texts[7] == "\nriver" and texts[9].startswith("\n")
    assert [x for x, _t in narrow] == [k + 0.5 for k in range(len(words))]
    tiny = fitted_ticks(["extraordinarily"] * 4, 40, fm)
    assert all(t.strip("\n").endswith("…") or t.strip("\n") == "·" for _x, t in tiny)
