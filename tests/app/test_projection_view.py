"""The projection view (pytest-qt, offscreen): linked selection, legend, search, UMAP, exports."""
from __future__ import annotations

import csv
import threading

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

import elmo_explorer.views.projection.running as running_mod
import elmo_explorer.views.projection.warmup as warmup_mod
from elmo_explorer.views.projection.controller import ProjectionPanel
from elmo_explorer.views.projection.plots import PALETTE, categories
from elmo_explorer.state.workspace import TokenRef

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

SENTENCES = [
    "He sat on the bank of the river and watched the boats .",
    "She deposited the check at the bank on Monday .",
    "The children play in the park after school .",
    "We saw a play at the theatre last night .",
    "The bank raised its interest rates again .",
    "They walked along the grassy bank of the stream .",
]


@pytest.fixture
def ws(ws, qtbot):
    """The loaded workspace (tests/app/conftest.py) with :data:`SENTENCES` embedded."""
    ws.set_sentences(SENTENCES)
    qtbot.waitUntil(ws.all_embedded, timeout=30000)
    qtbot.waitUntil(lambda: not ws.worker.is_busy(), timeout=10000)
    return ws


@pytest.fixture
def pca_panel(qtbot, ws, monkeypatch):
    """A shown panel whose automatic run stops at PCA (no UMAP compile in these tests)."""
    monkeypatch.setattr(running_mod, "AUTO_UMAP_MAX", 0)
    monkeypatch.setattr(ProjectionPanel, "_schedule_warm_up", lambda self: None)
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    panel.view.controls.set_source("loaded")      # these tests: every loaded token …
    panel.view.controls.set_colour_by("word")       # … coloured by word
    panel.resize(1100, 500)
    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.show()
    assert panel.is_ready()
    return panel


def test_reference_source_grid_groups_senses_and_pca_below_50(qtbot, ws, monkeypatch):
    """Issue 16, item 3: the default set is the word's occurrences in the reference corpus with
    the typed ones ringed; 2×2 grid with equal axes; colour by group and sense; few points →
    PCA with a message and words beside the points."""
    import elmo_explorer.views.projection.sources as sources

    from elmo_engine.analysis.projection.tokens import ReferenceSentence

    ref = [ReferenceSentence("pd_fiction", ("The", "bank", "was", "steep", ".")),
           ReferenceSentence("openstax_prose", ("A", "central", "bank", "sets", "rates", ".")),
           ReferenceSentence("semcor", ("The", "bank", "of", "the", "Thames", "."), {1: "river"},
                             ("DET", "NOUN", "ADP", "DET", "PROPN", "PUNCT"))]
    monkeypatch.setattr(sources, "reference_word_sentences", lambda word: list(ref))
    monkeypatch.setattr(ProjectionPanel, "_schedule_warm_up", lambda self: None)
    ws.sentence_groups = {SENTENCES[0]: "bank: river", SENTENCES[1]: "bank: money",
                          SENTENCES[5]: "bank: river"}
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    assert panel.view.controls.source_key() == "reference"           # the default
    assert panel.view.controls.colour_by() == "group"
    panel.resize(900, 700)
    with qtbot.waitSignal(panel.ready, timeout=30000):
        panel.show()
    t = panel.model.tokens
    assert len(t) == 4 + 3 and set(w.lower() for w in t.words) == {"bank"}
    plots = panel.view.plots
    assert len(plots.plots) == 4 and all(lp.view.state["aspectLocked"] for lp in plots.plots)
    rows = [plots.ci.getItem(r, c) for r in (0, 1) for c in (0, 1)]
    assert rows == [lp.plot for lp in plots.plots]                    # a 2×2 grid
    assert len(plots.typed) == 4 and len(plots.plots[1].shown["typed"]) == 4   # ringed

    def typed_fill(lp):
        return [b.color().name() for b in lp.typed.data["brush"]]

    def own_colour(lp):
        return [lp.brushes[i].color().name() for i in lp.shown["typed"]]

    lp = plots.plots[1]        # typed points: filled with their group's colour, above the rest
    assert typed_fill(lp) == own_colour(lp) and len(set(typed_fill(lp))) == 3
    assert lp.typed.zValue() > lp.points.zValue()
    assert len(plots.plots[0].labels) == 7                           # few points: words shown
    # layer 0 of one word: a note, not a map of one dot (issue 29); the other plots are maps
    assert "all 7 tokens (bank 7) have the same vector" in plots.plots[0].note_text()
    assert not plots.plots[0].points.isVisible() and not plots.plots[0].typed.isVisible()
    assert plots.plots[0].title_text() == "layer 0 · context-free"
    assert all(lp.note_text() == "" and lp.points.isVisible() for lp in plots.plots[1:])
    assert plots.plots[0].nearest(QPointF(*panel.model.shown[0].coords[0])) == -1
    assert "below 50 points" in panel.view.controls.status.text()
    assert panel.model.shown[0].method == "pca"
    groups = {name: (c, n) for name, c, n in panel.colour_categories()[1]}
    assert {g: n for g, (_c, n) in groups.items()} == {
        "bank: river": 3, "bank: money": 1, "typed (no group)": 1,       # the SemCor one: river
        "reference: pd_fiction": 1, "reference: openstax_prose": 1}
    panel.view.controls.set_colour_by("sense")
    legend = panel.colour_categories()[1]
    senses = {name: n for name, _c, n in legend}
    assert typed_fill(lp) == own_colour(lp)                         # recoloured with the rest
    assert senses == {"river": 3, "money": 1, "typed (no sense)": 1,
                      "reference (no sense label)": 2}
    # a sense keeps its colour across colouring modes (issue 39): senses first, by name
    colour = {name: c for name, c, _n in legend}
    assert colour["money"] == groups["bank: money"][0] == PALETTE[0]
    assert colour["river"] == groups["bank: river"][0] == PALETTE[1]
    panel.view.controls.set_colour_by("label")          # the SemCor sentence's UPOS tags
    assert {name: n for name, _c, n in panel.colour_categories()[1]} == {"NOUN": 1,
                                                                        "(no tag)": 6}
    panel.view.controls.set_colour_by("sense")
    fig = panel.grid_figure()
    assert len([a for a in fig.axes if a.get_visible()]) == 4
    note, maps = fig.axes[0], fig.axes[1:4]
    assert not note.axison and "same vector" in " ".join(note.texts[0].get_text().split())   # layer 0 of one word
    assert all(a.get_aspect() == 1.0 for a in maps)
    ref, own = maps[0].collections[:2]                 # the typed sentences over the reference
    assert len(own.get_offsets()) == 4 and own.get_zorder() > ref.get_zorder()
    assert "your sentences" in [t.get_text() for t in fig.legends[0].get_texts()]
    ws.worker.shutdown(timeout_s=30)


def test_pca_drawn_for_every_layer(pca_panel, ws):
    p = pca_panel
    n = sum(len(t) for t in ws.tokens)
    assert len(p.model.tokens) == n and len(p.view.plots.plots) == ws.n_layers + 1 == 4
    assert [p.model.shown[k].method for k in range(4)] == ["pca"] * 4
    for k, lp in enumerate(p.view.plots.plots):
        xs, ys = lp.points.getData()
        assert len(xs) == n
        np.testing.assert_allclose(xs, p.model.shown[k].coords[:, 0], rtol=1e-6)
    assert "PCA" in p.view.plots.plots[1].title_text()


def test_box_selection_links_all_plots(pca_panel, qtbot):
    p = pca_panel
    c = p.model.shown[1].coords
    x0, x1 = np.percentile(c[:, 0], [10, 60])
    y0, y1 = np.percentile(c[:, 1], [10, 90])
    with qtbot.waitSignal(p.view.plots.selection_made) as sig:
        p.view.plots.select_in_rect(1, QRectF(QPointF(x0, y0), QPointF(x1, y1)))
    expected = np.flatnonzero((c[:, 0] >= x0) & (c[:, 0] <= x1) & (c[:, 1] >= y0) & (c[:, 1] <= y1))
    assert len(expected) >= 5
    np.testing.assert_array_equal(sig.args[0], expected)
    for k, lp in enumerate(p.view.plots.plots):
        np.testing.assert_array_equal(p.view.plots.overlay_indices(k, "selected"), expected)
        xs, ys = lp.selected.getData()
        np.testing.assert_allclose(xs, p.model.shown[k].coords[expected, 0], rtol=1e-6)
    assert p.view.info.text().startswith(f"{len(expected)} tokens selected")


def test_shift_drag_selects_with_the_mouse(pca_panel, qtbot):
    p = pca_panel
    lp = p.view.plots.plots[2]
    vp = p.view.plots.viewport()
    rect = lp.view.sceneBoundingRect()
    a = p.view.plots.mapFromScene(rect.center() - QPointF(rect.width() * 0.3, rect.height() * 0.3))
    b = p.view.plots.mapFromScene(rect.center() + QPointF(rect.width() * 0.3, rect.height() * 0.3))
    shift, left = Qt.KeyboardModifier.ShiftModifier, Qt.MouseButton.LeftButton

    def send(kind, pos, buttons):
        ev = QMouseEvent(kind, QPointF(pos), QPointF(vp.mapToGlobal(pos)), left, buttons, shift)
        QApplication.sendEvent(vp, ev)

    with qtbot.waitSignal(p.view.plots.selection_made, timeout=5000) as sig:
        send(QMouseEvent.Type.MouseButtonPress, a, left)
        for t in np.linspace(0.1, 1.0, 6):
            send(QMouseEvent.Type.MouseMove, QPoint(int(a.x() + t * (b.x() - a.x())),
                                                    int(a.y() + t * (b.y() - a.y()))), left)
        send(QMouseEvent.Type.MouseButtonRelease, b, Qt.MouseButton.NoButton)
    sel = sig.args[0]
    c = p.model.shown[2].coords
    lo = lp.view.mapSceneToView(p.view.plots.mapToScene(a))
    hi = lp.view.mapSceneToView(p.view.plots.mapToScene(b))
    box = QRectF(lo, hi).normalized()
    expected = np.flatnonzero((c[:, 0] >= box.left()) & (c[:, 0] <= box.right())
                              & (c[:, 1] >= box.top()) & (c[:, 1] <= box.bottom()))
    assert len(sel) > 0
    np.testing.assert_array_equal(sel, expected)
    np.testing.assert_array_equal(p.view.plots.overlay_indices(0, "selected"), expected)


def test_colour_by_legend_entries(pca_panel, qtbot):
    p = pca_panel
    p.view.controls.set_source("words")
    p.view.controls.words.setText("bank, the, play")
    with qtbot.waitSignal(p.ready, timeout=60000):      # PCA only (no UMAP compile): seconds
        p.run(auto=True)
    assert set(p.model.tokens.words) == {"bank", "the", "The", "play"}
    p.view.controls.set_colour_by("label")
    assert p.view.legend.entries() == ["the", "bank", "play"]          # by frequency: 10, 4, 2
    counts = [p.view.legend.item(i).text() for i in range(3)]
    assert counts[0].endswith("(11)") and counts[1].endswith("(4)") and counts[2].endswith("(2)")
    i_bank = p.model.tokens.words.index("bank")
    assert p.view.plots.point_colour(i_bank) == PALETTE[1]
    p.view.controls.set_colour_by("sentence")
    entries = p.view.legend.entries()
    assert len(entries) == len(SENTENCES) and entries[0].startswith("1: He sat on")
    p.view.controls.set_colour_by("word")
    assert p.view.legend.entries()[:2] == ["the", "bank"]
    p.view.legend.entry_clicked.emit(1)                                  # click "bank"
    np.testing.assert_array_equal(p.view.plots.overlay_indices(3, "selected"),
                                  p.model.tokens.find("bank", True))


def test_search_and_workspace_selection_highlight(pca_panel, ws):
    p = pca_panel
    p.view.controls.search.setText("BANK")
    expected = [i for i, w in enumerate(p.model.tokens.words) if w.lower() == "bank"]
    assert len(expected) == 4
    for k in range(4):
        np.testing.assert_array_equal(p.view.plots.overlay_indices(k, "found"), expected)
    assert p.view.info.text().startswith("'BANK': 4 of")
    p.view.controls.search.setText("")
    assert len(p.view.plots.overlay_indices(0, "found")) == 0
    ws.select(TokenRef(1, 6))                                       # "bank" in sentence 2
    i = int(np.flatnonzero((p.model.tokens.sentence == 1) & (p.model.tokens.position == 6))[0])
    for k in range(4):
        assert p.view.plots.overlay_indices(k, "found").tolist() == [i]
    assert "[bank]" in p.view.info.text()
    p.view.plots.point_clicked.emit(0, 0)                                 # click a point → selects it
    assert ws.selection == TokenRef(0, 0)


def test_hover_shows_token_in_sentence(pca_panel):
    p = pca_panel
    lp = p.view.plots.plots[1]
    i = 5
    scene = lp.view.mapViewToScene(QPointF(*p.model.shown[1].coords[i].astype(float)))
    p.view.plots._on_mouse_moved(scene)
    assert p.view.plots.hover_index == i
    assert p.view.info.text().startswith(f"layer 1 · '{p.model.tokens.words[i]}'")
    assert f"[{p.model.tokens.words[i]}]" in p.view.info.text()
    for k in range(4):
        assert p.view.plots.overlay_indices(k, "hover").tolist() == [i]


def test_exports_from_the_panel(pca_panel, qtbot, tmp_path):
    p = pca_panel
    x = p.exports                   # the panel's export actions (export_actions.py)
    done = []
    x.export_csv(tmp_path / "c.csv", done.append)
    x.export_tensorboard(tmp_path / "tb", 2, done.append)
    qtbot.waitUntil(lambda: len(done) == 2, timeout=60000)
    with open(tmp_path / "c.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(p.model.tokens) and "mix_pca_x" in rows[0]
    vec = np.loadtxt(tmp_path / "tb" / "vectors.tsv", delimiter="\t")
    assert vec.shape == (len(p.model.tokens), 32)
    assert (tmp_path / "tb" / "metadata.tsv").read_text().splitlines()[0].startswith("token\t")
    png = x.export_plot(1, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert x.export_all(tmp_path / "all.pdf").read_bytes()[:5] == b"%PDF-"
    svg = x.export_plot(0, tmp_path / "one.svg").read_text(encoding="utf-8")
    assert "<svg" in svg and svg.count("<use") >= len(p.model.tokens)      # every point
    monkey_declined = []
    x.confirm = lambda msg: monkey_declined.append(msg) or False
    projection_mod_export = __import__("elmo_explorer.views.projection.export", fromlist=["x"])
    old = projection_mod_export.SVG_WARN_POINTS
    projection_mod_export.SVG_WARN_POINTS = 10
    try:
        assert x.export_all(tmp_path / "all.svg") is None            # declined: nothing written
    finally:
        projection_mod_export.SVG_WARN_POINTS = old
    assert monkey_declined and not (tmp_path / "all.svg").exists()
    assert [a.text() for a in p.export_actions()][2] == "Projection: coordinates as CSV…"


def test_labelled_dataset_source(pca_panel, qtbot, tmp_path):
    p = pca_panel
    f = tmp_path / "pos.tsv"
    f.write_text("The\tDET\nbank\tNOUN\nfell\tVERB\n\nA\tDET\nbank\tNOUN\nrose\t_\n", "utf-8")
    with qtbot.waitSignal(p.ready, timeout=30000):
        p.open_dataset(f)
    assert p.view.controls.source_key() == "dataset" and p.view.controls.colour_by() == "label"
    assert p.model.tokens.words == ("The", "bank", "fell", "A", "bank")
    assert p.view.legend.entries() == ["DET", "NOUN", "VERB"]
    assert all(p.model.shown[k].coords.shape == (5, 2) for k in range(4))


def test_warm_up_runs_on_the_worker(qtbot, ws, monkeypatch):
    seen = []
    monkeypatch.setattr(warmup_mod, "is_warm", lambda: bool(seen))
    monkeypatch.setattr(warmup_mod, "warm_up",
                        lambda state: seen.append(threading.current_thread()))
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: bool(seen), timeout=10000)
    assert seen[0] is not threading.main_thread()


def test_warm_up_waits_for_the_job_queued_right_after_a_load(qtbot, ws, monkeypatch):
    """A model load ends with the worker idle for an instant before the embedding is queued:
    the one-time compile must not take that slot and hold the first vectors back."""
    import time

    seen = []
    monkeypatch.setattr(warmup_mod, "is_warm", lambda: bool(seen))
    monkeypatch.setattr(warmup_mod, "warm_up", lambda state: seen.append("warm-up"))
    started = []
    ws.worker.job_started.connect(lambda _i, name: started.append(name))
    ws.worker.submit("load", lambda s: time.sleep(0.3),
                     on_done=lambda _r: ws.worker.submit("embed", lambda s: time.sleep(0.3)))
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: bool(seen) and len(started) == 3, timeout=10000)   # (both signals)
    assert started == ["load", "embed", "Preparing UMAP (one-time compile)"]


def test_warm_up_waits_for_a_model_and_the_jobs_its_load_starts(qtbot, tiny_checkpoint,
                                                                 monkeypatch):
    """At start-up the panel exists before the model loads: the compile is not queued ahead
    of the load (the demo model then waited 7 s behind it), but after the load and the
    embedding it starts."""
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    seen = []
    monkeypatch.setattr(warmup_mod, "is_warm", lambda: bool(seen))
    monkeypatch.setattr(warmup_mod, "warm_up", lambda state: seen.append("warm-up"))
    ws = Workspace()
    started = []
    ws.worker.job_started.connect(lambda _i, name: started.append(name))
    try:
        panel = ProjectionPanel(ws)
        qtbot.addWidget(panel)
        qtbot.wait(300)
        assert seen == [], started                          # no model: nothing to compile for
        ws.set_sentences(SENTENCES[:2])
        ws.load_model(ModelSpec(str(tiny_checkpoint), device="cpu"))
        qtbot.waitUntil(lambda: bool(seen) and "Preparing UMAP (one-time compile)" in started,
                        timeout=60000)                   # (its started signal comes queued)
        load = next(i for i, n in enumerate(started) if n.startswith("Loading model"))
        warm = started.index("Preparing UMAP (one-time compile)")
        assert load < started.index("Embedding sentences") < warm, started
    finally:
        assert ws.worker.shutdown(timeout_s=10)


def test_a_deleted_panel_schedules_no_warm_up(qtbot, tiny_checkpoint, monkeypatch):
    """The warm-up's timer belongs to the panel: a panel deleted before the workspace loads a
    model schedules nothing (a lambda connected to the workspace outlived it and raised)."""
    import gc

    from elmo_explorer.state.workspace import ModelSpec, Workspace

    seen = []
    monkeypatch.setattr(warmup_mod, "is_warm", lambda: bool(seen))
    monkeypatch.setattr(warmup_mod, "warm_up", lambda state: seen.append("warm-up"))
    ws = Workspace()
    try:
        panel = ProjectionPanel(ws)
        panel.deleteLater()
        qtbot.wait(50)
        gc.collect()
        with qtbot.waitSignal(ws.model_changed, timeout=60000):
            ws.load_model(ModelSpec(str(tiny_checkpoint), device="cpu"))
        qtbot.wait(2500)
        assert seen == []
    finally:
        assert ws.worker.shutdown(timeout_s=10)


@pytest.mark.slow
def test_umap_replaces_pca_and_uses_the_cache(qtbot, ws):
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    panel.resize(1100, 500)
    panel.view.controls.set_source("loaded")      # every loaded token: many distinct in layer 0
    started = []
    ws.worker.job_started.connect(lambda _i, name: started.append(name))
    with qtbot.waitSignal(panel.ready, timeout=120000):
        panel.show()
    assert [panel.model.shown[k].method for k in range(4)] == ["umap"] * 4
    assert all("UMAP" in lp.title_text() for lp in panel.view.plots.plots)
    assert sum(name.startswith("Projection: UMAP") for name in started) == 4
    # issue 42: ready means every UMAP map's faithfulness is in its caption; the PCA maps that
    # UMAP replaced were never measured
    for k, lp in enumerate(panel.view.plots.plots):
        assert lp.title_text().split("\n")[1] == panel.model.faith[k].caption()
    assert sum(name.startswith("Projection: faithfulness") for name in started) == 4
    first = {k: panel.model.shown[k] for k in range(4)}
    started.clear()
    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.model.ready = False
        panel.run()
    assert not any(name.startswith("Projection: UMAP") for name in started)
    assert all(panel.model.shown[k] is first[k] for k in range(4))


def test_categories_other_bucket():
    codes, legend = categories(["a"] * 3 + ["b"] * 2 + ["c", "d"], max_colours=2)
    assert codes.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert legend[:2] == [("a", PALETTE[0], 3), ("b", PALETTE[1], 2)]
    assert legend[2][0] == "2 others" and legend[2][2] == 2


@pytest.mark.slow
def test_layer_with_too_few_distinct_vectors_keeps_pca(qtbot, ws):
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    panel.view.controls.set_source("words")
    panel.view.controls.words.setText("bank the")          # layer 0: only 3 distinct vectors
    with qtbot.waitSignal(panel.ready, timeout=120000):
        panel.run()
    assert [panel.model.shown[k].method for k in range(4)] == ["pca", "umap", "umap", "umap"]
    assert "PCA kept for layer 0" in panel.view.controls.status.text()


# ---- workspace / report hooks (views/projection/report.py, controls.state) -----------------------
def test_view_state_round_trip(pca_panel, qtbot, ws):
    import json

    p = pca_panel
    c = p.view.controls
    c.set_source("words")
    c.words.setText("bank, play")
    c.max_points.setValue(5000)
    c.set_colour_by("sentence")
    c.n_neighbors.setValue(7)
    c.min_dist.setValue(0.35)
    c.seed.setValue(123)
    c.epochs.setValue(5)                  # under UMAP's 10: refused as `project --epochs 5` is
    from elmo_engine.errors import InputError

    with pytest.raises(InputError, match="n_epochs must be in 10..5000, got 5"):
        c.params()
    c.epochs.setValue(150)
    c.mix.setText("0.2, 0.3, 0.5")
    assert c.layer_norm.isChecked()                          # the contexts rule by default
    c.layer_norm.setChecked(False)
    c.search.setText("bank")
    state = json.loads(json.dumps(p.view_state()))          # JSON values only
    assert state["source"] == "words" and state["words"] == "bank, play"
    assert state["umap"] == {"n_neighbors": 7, "min_dist": 0.35, "seed": 123, "epochs": 150}
    assert state["mix_weights"] == [0.2, 0.3, 0.5] and state["colour_by"] == "sentence"
    assert state["search"] == "bank" and state["max_points"] == 5000
    assert state["layer_norm"] is False

    other = ProjectionPanel(ws)
    qtbot.addWidget(other)
    other.resize(1100, 500)
    other.restore_view_state(state)
    assert other.view_state() == state
    assert other.view.controls.words.isVisibleTo(other)          # the word-list field is shown
    assert other.view.controls.params().n_neighbors == 7
    assert other.view.controls.mix_weights(3) == [0.2, 0.3, 0.5]
    assert not other.view.controls.layer_norm.isChecked()
    with qtbot.waitSignal(other.ready, timeout=60000):      # the usual scheduled run
        other.show()
    mix = other.model.layers[-1]
    assert mix.weights == (0.2, 0.3, 0.5) and mix.layer_norm is False
    n_words = sum(w in ("bank", "play") for t in ws.tokens for w in t)
    assert len(other.model.tokens) == n_words == 6
    assert len(other.view.plots.highlight) == 4                  # search "bank" marked


def test_restore_view_state_tolerates_bad_input(pca_panel):
    p = pca_panel
    before = p.view_state()
    p.restore_view_state({"source": "nowhere", "words": 3, "max_points": "many",
                          "colour_by": 1, "umap": {"n_neighbors": True, "min_dist": "x",
                                                   "seed": 2.5}, "mix_weights": [1, "a"],
                          "search": None, "unknown": {"x": 1}, "dataset_file": 7})
    assert p.view_state() == before
    p.restore_view_state("not a dict")
    p.restore_view_state({"umap": {"n_neighbors": 10_000}, "mix_weights": None})
    state = p.view_state()
    assert state["umap"]["n_neighbors"] == 200 and state["mix_weights"] is None   # clamped




# ---- how faithful each map is (issue 42) ------------------------------------------------------
def _measured(panel):
    return lambda: len(panel.model.faith) == len(panel.model.shown) == 4


def test_every_map_carries_its_faithfulness(pca_panel, qtbot, tmp_path):
    """Each plot's second title line is its map's T, C and kNN kept, measured on the worker
    against the layer's vectors; the exported grid's panel titles carry the same."""
    from elmo_engine.analysis.projection import map_faithfulness

    p = pca_panel
    qtbot.waitUntil(_measured(p), timeout=60000)
    m = p.model
    for k, lp in enumerate(p.view.plots.plots):
        f = m.faith[k]
        want = map_faithfulness(m.acts, m.tokens, m.shown[k], metric=m.params.metric)
        assert (f.trustworthiness, f.continuity, f.knn_kept) == (
            want.trustworthiness, want.continuity, want.knn_kept)
        assert f.k == 10 and f.n == len(m.tokens) and 0 < f.trustworthiness <= 1
        first, second = lp.title_text().split("\n")
        assert "PCA" in first and second == f.caption()
        assert second.startswith(f"T={f.trustworthiness:.2f} C={f.continuity:.2f} kNN kept ")
    fig = p.grid_figure()
    titles = [a.get_title() for a in fig.axes if a.get_visible()]
    assert all("T=" in t and "(k=10, n=" in t for t in titles), titles


def test_neighbourhood_preserved_colouring(pca_panel, qtbot):
    """Colour by "Neighbourhood preserved": each plot's points by the share of their k nearest
    neighbours its own map keeps; the legend bins them."""
    from elmo_explorer.views.projection.faithful import KEPT_BINS, kept_colours

    p = pca_panel
    qtbot.waitUntil(_measured(p), timeout=60000)
    p.view.controls.set_colour_by("kept")
    m, plots = p.model, p.view.plots
    for k in (1, 2):
        share = m.faith[k].per_point
        brushes = [b.color().name() for b in plots.plots[k].brushes]
        assert brushes == kept_colours(m.faith[k], len(m.tokens))[0]
        i = int(np.argmax(share))
        j = int(np.argmin(share))
        bins = [b[0] for b in KEPT_BINS]
        assert brushes[i] == KEPT_BINS[int(np.searchsorted(bins, share[i]))][2]
        assert brushes[j] == KEPT_BINS[int(np.searchsorted(bins, share[j]))][2]
    rows = [p.view.legend.item(r).text() for r in range(p.view.legend.count())]
    assert rows[0].startswith("layer 0: 0–20 % of k=10 kept")
    assert sum(int(r.rsplit("(", 1)[1].rstrip(")").replace(",", "")) for r in rows) == len(
        m.tokens)
    fig = p.grid_figure()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("80–100 % of k=10 kept" in t for t in legend)
    p.view.controls.set_colour_by("word")                      # back to one colouring for all
    assert plots.plots[1].brushes[0].color().name() == plots.point_colour(0)


def test_cli_and_app_give_the_same_faithfulness(pca_panel, qtbot, tmp_path, tiny_checkpoint,
                                                capsys):
    """`elmo-explorer project --json` on the same sentences prints the numbers the captions
    show."""
    import json

    from elmo_engine.cli import main

    p = pca_panel
    qtbot.waitUntil(_measured(p), timeout=60000)
    src = tmp_path / "s.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    norm = [] if p.view.controls.layer_norm.isChecked() else ["--no-layer-norm"]
    assert main(["project", str(src), "--method", "pca", "--checkpoint", str(tiny_checkpoint),
                 "--device", "cpu", "-o", str(tmp_path / "c.csv"), "--json", *norm]) == 0
    doc = json.loads(capsys.readouterr().out)
    for k, entry in enumerate(doc["projections"]):
        f = p.model.faith[k]
        assert entry["layer"] == p.model.layers[k].key
        got = entry["faithfulness"]
        assert (got["k"], got["n"]) == (f.k, f.n)
        for key in ("trustworthiness", "continuity", "knn_kept"):
            assert got[key] == pytest.approx(getattr(f, key), abs=1e-6), (k, key)


def test_the_word_list_is_projected_as_project_words_projects_it(qtbot, ws, tmp_path,
                                                                  tiny_checkpoint, capsys,
                                                                  monkeypatch):
    """*Word list* = bank: the mix's layer statistics were taken over every loaded sentence,
    ``project --words bank`` over the sentences that hold a point, so the mix maps differed (by
    0.12 on a map of ±4). Now the same coordinates, and a click still selects the workspace's
    sentence. A word that does not occur is said as the command says it (it was dropped)."""

    from elmo_engine.cli import main

    monkeypatch.setattr(running_mod, "AUTO_UMAP_MAX", 0)
    monkeypatch.setattr(ProjectionPanel, "_schedule_warm_up", lambda self: None)
    panel = ProjectionPanel(ws)
    qtbot.addWidget(panel)
    c = panel.view.controls
    c.set_source("words")
    c.words.setText("bank")
    panel.resize(1100, 500)
    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.show()
    t = panel.model.tokens
    assert len(t) == 4 and len(t.sentences) == len(SENTENCES)          # the workspace's order
    src = tmp_path / "s.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "c.csv"
    assert main(["project", str(src), "--words", "bank", "--method", "pca", "--checkpoint",
                 str(tiny_checkpoint), "--device", "cpu", "-o", str(out), "--json"]) == 0
    capsys.readouterr()
    with open(out, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    mix = np.array([[float(r["mix_pca_x"]), float(r["mix_pca_y"])] for r in rows])
    got = panel.model.shown[len(panel.model.layers) - 1].coords
    assert panel.model.layers[-1].key == "mix" and got.shape == mix.shape
    # PCA's axes may flip sign between the two fits: compare up to the sign of each axis
    signs = np.sign(np.sum(got * mix, axis=0))
    assert np.allclose(got * signs, mix, atol=1e-4), (got, mix)
    panel.on_click(0, 1)                                # the second 'bank': sentence 1 word 4
    assert (ws.selection.sentence, ws.selection.token) == (int(t.sentence[1]), int(t.position[1]))
    c.words.setText("play")                             # not in the first sentence (it was
    panel.run()                                         # an AttributeError on its None)
    qtbot.waitUntil(lambda: panel.is_ready() and panel.model.tokens is not None
                    and len(panel.model.tokens) == 2, timeout=30000)
    assert panel.model.acts[0] is None and "play" in panel.model.tokens.words
    c.words.setText("bank, bnak")
    panel.run()
    qtbot.waitUntil(panel.is_ready, timeout=30000)
    assert ("'bnak' does not occur in the loaded sentences; did you mean 'bank'?"
            in c.status.text())
    ws.worker.shutdown(timeout_s=30)


def test_esc_during_a_umap_run_ends_it_as_the_views_cancel_does(qtbot, pca_panel):
    """Esc during *Run UMAP* left Cancel enabled and the view never ready (its run's end was
    never said); now the same reset as the view's own Cancel."""
    p, c = pca_panel, pca_panel.view.controls
    release = threading.Event()
    held = p.jobs.submit("hold the lane", lambda st: release.wait(10))   # UMAP waits behind it
    p.run(auto=False)
    assert c.cancel_button.isEnabled()
    p.ws.worker.cancel_all()
    release.set()
    qtbot.waitUntil(lambda: p.is_ready() and not c.cancel_button.isEnabled(), timeout=30000)
    assert held.stale and "Cancelled" in c.status.text()
