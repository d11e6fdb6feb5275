"""The Corpus view under pytest-qt (offscreen) on a tiny index built in a temporary folder: the
hint without an index, a selected token finds itself first in every layer, the senses table
fills, a 10^5-point map draws a density image and points once zoomed in, the TSV export."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.state.workspace import TokenRef
from elmo_explorer.views.corpus.atlas import MapMode, POINTS_MAX, synthetic_map
from elmo_explorer.views.corpus.controller import INDEX_JOBS, CorpusPanel
from support import LAYERS_SENTENCES as SENTENCES

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def ws(app_settings_dir, ws, qtbot):
    """The loaded workspace (tests/app/conftest.py) with :data:`SENTENCES` embedded."""
    ws.set_sentences(SENTENCES)
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    return ws


@pytest.fixture
def panel(qtbot, ws, tmp_path):
    p = CorpusPanel(ws)
    qtbot.addWidget(p)
    p.resize(1200, 700)
    p._on_model()                         # the model was loaded before the panel existed
    return p


@pytest.fixture
def built(qtbot, panel, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    with qtbot.waitSignal(panel.index_changed, timeout=120000,
                          check_params_cb=lambda path: bool(path)):
        panel.build([corpus], tmp_path / "index")
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    return panel


def test_without_an_index_the_view_is_a_one_line_hint_with_a_build_button(panel):
    assert panel.index is None and panel.is_ready()
    assert panel.view.pages.currentIndex() == 0
    assert "index" in panel.view.hint.text() and "\n" not in panel.view.hint.text()
    assert panel.view.hint_build.isEnabled()


def test_a_selected_token_lists_its_nearest_occurrences_with_itself_first(qtbot, built, ws):
    assert built.view.pages.currentIndex() == 1
    assert built.index.layers == (0, 1, 2)
    ref = TokenRef(1, 4)                                   # "bank" in sentence 1
    assert ws.word_at(ref) == "bank"
    with qtbot.waitSignal(built.results_changed, timeout=60000,
                          check_params_cb=lambda: bool(built.model.lines)):
        ws.select(ref)
    qtbot.waitUntil(lambda: built.model.query is not None and built.model.query.position == 4
                    and built.model.lines.get(2) and built.model.lines[2][0].sentence_id == 1,
                    timeout=60000)
    n_bank = sum(s.split().count("bank") for s in SENTENCES)
    for layer in (1, 2):
        lines = built.model.lines[layer]
        assert len(lines) == n_bank                        # same word: every "bank", k = 10
        assert (lines[0].sentence_id, lines[0].position) == (1, 4)
        assert lines[0].cosine == pytest.approx(1.0, abs=2e-3)
        assert all(a.cosine >= b.cosine for a, b in zip(lines, lines[1:]))
        assert all(ln.word == "bank" for ln in lines)
        table = built.view.tables[layer]
        assert table.rowCount() == n_bank and table.item(0, 2).text() == "bank"
        assert table.item(0, 1).text() == "she sat on the"      # left context
    # layer 0 is context-free: every "bank" ties at cosine 1
    assert all(ln.cosine == pytest.approx(1.0, abs=2e-3) for ln in built.model.lines[0])


def test_an_index_opens_on_the_workspace_selection(qtbot, panel, ws, tmp_path):
    """Issue 39, part 4: the view opens on the selected token (at first launch the default word's
    first occurrence, as every view), not on a word of its own."""
    ws.select(TokenRef(1, 4))                              # "bank" in sentence 1
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    panel.build([corpus], tmp_path / "index")
    qtbot.waitUntil(lambda: panel.model.query is not None, timeout=120000)
    q = panel.model.query
    assert (q.word, q.position, q.tokens) == ("bank", 4, tuple(ws.tokens[1]))


def test_the_reference_index_is_built_from_the_reference_set(panel, monkeypatch):
    """Issue 39, part 4: one reference set for every view: the default index holds the general
    sentences and the demo words' contexts the Projection view shows."""
    from elmo_engine.resources import reference_set_files

    asked = []
    monkeypatch.setattr(panel, "build", lambda corpus, folder: asked.append((corpus, folder)))
    panel.build_reference()
    assert asked and asked[0][0] == list(reference_set_files())
    assert asked[0][1] == panel.default_folder()


def test_a_word_gets_its_senses_per_layer_and_its_map(qtbot, built):
    built.query_word("the")
    qtbot.waitUntil(lambda: built.model.senses is not None and built.map is not None
                    and built.map.title == "the", timeout=120000)
    qtbot.waitUntil(built.is_ready, timeout=60000)
    rows = built.model.cluster_rows()
    assert {r["layer"] for r in rows} == {0, 1, 2}
    table = built.view.clusters
    assert table.rowCount() == len(rows) > 3
    assert all(table.item(r, 6).text() for r in range(table.rowCount()))     # typical sentence
    # issue 39: centred on the word, the [the] mark never cut; the sentence in the tooltip
    for r in range(table.rowCount()):
        line = table.item(r, 6).text()
        assert "[the]" in line.casefold() and line.index("[") == 31          # 30 + a space
        assert len(line) <= 2 * 30 + len("[the] ") + 2
        assert table.item(r, 6).toolTip().startswith(rows[r]["typical"])
    assert "at least 5 occurrences" in built.view.senses_note.text()
    assert all(r["size"] >= 5 for r in rows if r["cluster"] > 1 or len(
        [x for x in rows if x["layer"] == r["layer"]]) > 1)
    n_the = sum(s.split().count("the") for s in SENTENCES)
    assert len(built.map.rows) == n_the
    assert built.view.maps[2].mode is MapMode.POINTS
    assert len(built.view.maps[2].shown) == n_the


def test_a_map_of_1e5_points_is_a_density_image_until_zoomed_in(qtbot, panel):
    data = synthetic_map(100_000)
    panel.show_map(data)
    plot = panel.view.maps[1]
    assert plot.mode is MapMode.DENSITY
    img = plot.image.image
    assert img is not None and img.ndim == 3 and img.shape[2] == 4
    assert (img[..., 3] > 0).sum() > 100                 # many bins drawn
    assert plot.image.isVisible() and len(plot.shown) == 0
    cx, cy = np.median(data.coords[1], axis=0)
    plot.zoom_to((cx - 0.2, cy - 0.2, cx + 0.2, cy + 0.2))
    assert plot.mode is MapMode.POINTS
    assert 0 < len(plot.shown) <= POINTS_MAX
    assert not plot.image.isVisible()
    xy = data.coords[1][plot.shown]
    assert np.all(np.abs(xy - [cx, cy]) <= 0.2 + 1e-6)
    plot.zoom_to((cx - 50, cy - 50, cx + 50, cy + 50))   # back out: density again
    assert plot.mode is MapMode.DENSITY


def test_a_typed_word_the_index_lacks_is_said_as_search_says_it(qtbot, built, capsys):
    """"'rivr' does not occur in the corpus" (no index, no suggestion); ``search`` names the
    index and suggests. Now one message (``CorpusIndex.absent``)."""
    from elmo_engine.cli.main import main

    built.query_word("rivr")
    said = built.view.status.text()
    assert f"{built.index.folder}: 'rivr' does not occur in the index; did you mean 'river'" \
        in said
    assert main(["search", str(built.index.folder), "--sentence", "the rivr bank .", "--word",
                 "rivr", "--pretokenized"]) == 1
    assert said in capsys.readouterr().err


def test_the_concordance_exports_as_tsv(qtbot, built, tmp_path):
    built.query_word("river")
    qtbot.waitUntil(lambda: bool(built.model.lines.get(2)), timeout=60000)
    qtbot.waitUntil(built.is_ready, timeout=60000)
    out = built.export_tsv(tmp_path / "conc.tsv")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("layer\trank\tcosine")
    n = sum(len(v) for v in built.model.lines.values())
    assert len(lines) == 1 + n and n >= 3
    assert all(ln.split("\t")[6] == "river" for ln in lines[1:])
    state = built.view_state()
    assert state["index"] == str(built.index.folder) and state["query"]["word"] == "river"
    assert built.figure("map") is not None


def test_the_export_entries_ask_for_a_path_write_and_say_so(qtbot, built, tmp_path,
                                                             monkeypatch):
    from elmo_explorer.views.corpus import exporting as controller

    built.query_word("river")
    qtbot.waitUntil(lambda: built.model.senses is not None and built.is_ready(), timeout=60000)
    actions = built.export_actions()
    assert [a.text() for a in actions] == ["Corpus concordance (TSV)…",
                                           "Corpus map selection (TSV)…",
                                           "Corpus map (PNG/SVG/PDF)…",
                                           "Corpus senses (PNG/SVG/PDF)…"]
    assert [a.isEnabled() for a in actions] == [True, False, True, True]   # nothing boxed yet
    actions = actions[:1] + actions[2:]
    monkeypatch.setattr(controller, "ask_save_path", lambda *a: tmp_path / "senses.svg")
    with qtbot.waitSignal(built.exported, timeout=30000) as sig:
        actions[2].trigger()
    assert sig.args == [str(tmp_path / "senses.svg")]
    assert (tmp_path / "senses.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    monkeypatch.setattr(controller, "ask_save_path", lambda *a: tmp_path / "map.bmp")
    actions[1].trigger()                                  # a format there is none of: one line
    assert not (tmp_path / "map.bmp").exists()
    assert "export failed" in built.view.status.text() and ".bmp" in built.view.status.text()


def test_a_cancelled_build_resumes_to_the_same_index(qtbot, panel, ws, tmp_path):
    from elmo_engine.index.build import missing_shards
    from elmo_engine.index.store import read_manifest

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 20) + "\n", encoding="utf-8")
    folder = tmp_path / "resumed"
    handle = panel.build([corpus], folder, shard_size=1)
    shown = handle.on_progress
    messages = []

    def progress(done, total, message):
        shown(done, total, message)
        messages.append(panel.view.status.text())
        if 0 < done < total:
            handle.cancel()

    handle.on_progress = progress
    qtbot.waitUntil(lambda: handle.finished, timeout=120000)
    assert any("tokens/s" in t and "left" in t for t in messages), messages
    m = read_manifest(folder)
    left = len(missing_shards(folder, m))
    assert not m.complete and 0 < left < m.n_shards == 20 * len(SENTENCES)
    assert panel.index is None
    assert f"stopped with {m.n_shards - left} of {m.n_shards} shards" in panel.view.hint.text()
    with qtbot.waitSignal(panel.index_changed, timeout=180000,
                          check_params_cb=lambda path: bool(path)):
        panel.build([corpus], folder, shard_size=1)
    assert panel.index.manifest.complete
    assert panel.index.manifest.n_tokens == 20 * sum(len(s.split()) for s in SENTENCES)
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    with qtbot.waitSignal(panel.results_changed, timeout=60000):
        ws.select(TokenRef(2, 1))                            # "bank" in "the bank raised …"
    qtbot.waitUntil(lambda: panel.model.lines.get(2) and panel.model.query.position == 1,
                    timeout=60000)
    assert panel.model.lines[2][0].cosine == pytest.approx(1.0, abs=2e-3)


def test_screenshot_of_the_corpus_view_without_an_index_shows_the_hint(qtbot, tmp_path,
                                                                      tiny_checkpoint,
                                                                      monkeypatch):
    import elmo_explorer.shell.views
    from PySide6.QtGui import QImage

    from elmo_explorer.shell.main import main

    monkeypatch.setattr(elmo_explorer.shell.views, "VIEWS", ("corpus",))
    out = tmp_path / "corpus.png"
    code = main(["--screenshot", str(out), "--checkpoint", str(tiny_checkpoint), "--view",
                 "corpus", "--size", "1280x800", "--settings-dir", str(tmp_path / "s")])
    assert code == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1280, 800)


def test_a_saved_state_reopens_the_index_and_its_query_and_reports_it(qtbot, built, ws,
                                                                      tmp_path):

    built.query_word("money")
    qtbot.waitUntil(lambda: built.model.senses is not None and built.map is not None
                    and built.map.title == "money", timeout=120000)
    qtbot.waitUntil(built.is_ready, timeout=60000)
    state = built.view_state()
    state["options"]["k"] = 3
    other = CorpusPanel(ws)
    qtbot.addWidget(other)
    with qtbot.waitSignal(other.results_changed, timeout=60000,
                          check_params_cb=lambda: bool(other.model.lines)):
        other.restore_view_state(state)
    assert other.index is not None and str(other.index.folder) == state["index"]
    assert other.model.query.word == "money" and other.view.k_box.value() == 3
    assert all(len(v) <= 3 for v in other.model.lines.values())
    qtbot.waitUntil(other.is_ready, timeout=60000)


def test_opening_an_index_while_a_job_reads_the_old_one_stops_that_job_quietly(qtbot, built,
                                                                              monkeypatch):
    """A box's listing (the interactive lane) still reads the old index when another index opens
    (the long lane): the old one is closed under the listing's query. The listing ends as a
    stale job (CancelledError, nothing reported), never as a crash or a "damaged" message."""
    import threading

    from elmo_explorer.views.corpus import jobs

    built.query_word("the")
    qtbot.waitUntil(lambda: built.map is not None and built.map.title == "the", timeout=120000)
    qtbot.waitUntil(built.is_ready, timeout=60000)
    old, seen, errors, reading = built.index, [], [], threading.Event()

    def listing_that_reads_until_stopped(index, selection, state):
        rows = np.arange(index.manifest.n_tokens)
        try:
            while True:                     # no cancel check of its own: only the close stops it
                reading.set()
                index.tokens_at(rows)
                index.folded_between(0, len(rows) - 1)
        except Exception as e:
            seen.append(type(e).__name__)
            raise

    monkeypatch.setattr(jobs, "selection_lines", listing_that_reads_until_stopped)
    monkeypatch.setattr(built, "report_error", lambda message, dialog=False: errors.append(message))
    built.select_on_map(1, np.arange(len(built.map.rows)))
    assert reading.wait(30)
    before = {k: built.jobs.generation(k) for k in INDEX_JOBS}
    with qtbot.waitSignal(built.index_changed, timeout=60000,
                          check_params_cb=lambda path: path == str(old.folder)):
        built.open_index(str(old.folder))
    qtbot.waitUntil(lambda: bool(seen) and built.is_ready(), timeout=60000)
    assert seen == ["CancelledError"] and errors == []
    assert all(built.jobs.generation(k) > before[k] for k in INDEX_JOBS)   # made stale first
    assert old._closing and built.index is not old                  # the new one answers
    assert built.map is not None and built.map.title != "the"        # the old map went with it
    assert built.index.rows_of(built.map.title).size == len(built.map.rows) > 0


def _shift_drag(qtbot, plot, a, b):
    """A real Shift+drag with the left button on ``plot`` from data point ``a`` to ``b``."""
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication

    vp = plot.viewport()

    def widget_pos(xy):
        scene = plot.view.mapViewToScene(QPointF(*xy))
        return QPointF(plot.mapFromScene(scene))

    left, shift = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier
    p0, p1 = widget_pos(a), widget_pos(b)
    steps = [p0 + (p1 - p0) * (i / 8) for i in range(1, 9)]

    def send(kind, pos, button, buttons):
        ev = QMouseEvent(kind, pos, vp.mapToGlobal(pos), button, buttons, shift)
        QApplication.sendEvent(vp, ev)

    send(QEvent.Type.MouseButtonPress, p0, left, left)
    for p in steps:
        send(QEvent.Type.MouseMove, p, Qt.MouseButton.NoButton, left)
        qtbot.wait(5)
    send(QEvent.Type.MouseButtonRelease, p1, left, Qt.MouseButton.NoButton)


def test_shift_drag_on_a_1e5_point_density_map_selects_exactly_the_points_inside(qtbot, panel):
    data = synthetic_map(100_000)
    panel.show_map(data)
    panel.show()
    qtbot.waitExposed(panel)
    panel.view.tabs.setCurrentIndex(0)
    plot = panel.view.maps[1]
    plot.refresh()
    assert plot.mode is MapMode.DENSITY
    xy = data.coords[1]
    (x0, x1), (y0, y1) = plot.view.viewRange()
    a = (x0 + 0.2 * (x1 - x0), y0 + 0.25 * (y1 - y0))
    b = (x0 + 0.7 * (x1 - x0), y0 + 0.8 * (y1 - y0))
    with qtbot.waitSignal(plot.selection_made, timeout=10000) as sig:
        _shift_drag(qtbot, plot, a, b)
    # the box as the view saw it: the drag's end points mapped back to data coordinates
    got = sig.args[0]
    assert plot.view.viewRange() == [[x0, x1], [y0, y1]]      # a Shift+drag does not pan
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    tol = 0.01 * (x1 - x0)                                     # a pixel or so of rounding
    inner = np.flatnonzero((xy[:, 0] >= lo[0] + tol) & (xy[:, 0] <= hi[0] - tol)
                           & (xy[:, 1] >= lo[1] + tol) & (xy[:, 1] <= hi[1] - tol))
    outer = np.flatnonzero((xy[:, 0] >= lo[0] - tol) & (xy[:, 0] <= hi[0] + tol)
                           & (xy[:, 1] >= lo[1] - tol) & (xy[:, 1] <= hi[1] + tol))
    assert POINTS_MAX < len(inner) and set(inner) <= set(got) <= set(outer)
    # exactly the points inside a given box, against a plain per-point check
    box = (a[0], b[1], b[0], a[1])                             # corners in any order
    idx = plot.select_in_rect(box)
    expected = [i for i, (x, y) in enumerate(xy.tolist())
                if a[0] <= x <= b[0] and a[1] <= y <= b[1]]
    assert idx.tolist() == expected and len(expected) > POINTS_MAX
    # linked: the same occurrences in every layer's plot and in the model
    for other in panel.view.maps.values():
        np.testing.assert_array_equal(other.selection, idx)
    np.testing.assert_array_equal(panel.model.selection.rows, data.rows[idx])
    assert panel.model.selection.layer == 1
    assert f"{len(idx):,} occurrences selected" in panel.view.selection_note.text()
    # more selected points in view than are drawn: a grey density image, no rings
    assert plot.boxed_image.isVisible() and len(plot.boxed_shown) == 0
    # zoomed in (points): the selected points in view are ringed, the others not
    cx, cy = xy[idx[len(idx) // 2]]                            # around a selected point
    plot.zoom_to((cx - 0.3, cy - 0.3, cx + 0.3, cy + 0.3))
    assert plot.mode is MapMode.POINTS and not plot.boxed_image.isVisible()
    np.testing.assert_array_equal(plot.boxed_shown, np.intersect1d(plot.shown, idx))
    assert 0 < len(plot.boxed_shown)
    # a new map clears the selection
    panel.show_map(synthetic_map(1000, seed=1))
    assert panel.model.selection is None and len(plot.selection) == 0


def test_a_box_on_a_words_map_lists_its_occurrences_and_exports_them(qtbot, built, tmp_path):
    built.query_word("the")
    qtbot.waitUntil(lambda: built.map is not None and built.map.title == "the"
                    and built.is_ready(), timeout=120000)
    plot = built.view.maps[2]
    xy = built.map.coords[2]
    mid = float(np.median(xy[:, 0]))
    box = (float(xy[:, 0].min()) - 1, float(xy[:, 1].min()) - 1, mid, float(xy[:, 1].max()) + 1)
    with qtbot.waitSignal(built.results_changed, timeout=60000,
                          check_params_cb=lambda: bool(built.model.selection
                                                       and built.model.selection.lines)):
        idx = plot.select_in_rect(box)
    expected = np.flatnonzero(xy[:, 0] <= mid)
    np.testing.assert_array_equal(idx, expected)
    sel = built.model.selection
    rows = built.map.rows[expected]
    assert sel.layer == 2 and len(sel.lines) == len(rows) > 0
    want = {(sid, pos) for _r, sid, pos, _w, _t in built.index.tokens_at(rows)}
    assert {(ln.sentence_id, ln.position) for ln in sel.lines} == want
    assert all(ln.word.casefold() == "the" for ln in sel.lines)
    table = built.view.selection_table
    assert table.rowCount() == len(rows) and table.item(0, 2).text().casefold() == "the"
    assert table.item(0, 0).text() == str(sel.lines[0].sentence_id)
    assert built.view.tabs.tabText(2) == f"Selection ({len(rows):,})"
    actions = built.export_actions()
    assert actions[1].text() == "Corpus map selection (TSV)…" and actions[1].isEnabled()
    out = built.export_selection_tsv(tmp_path / "sel.tsv")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "layer\trank\tsentence_id\tposition\tleft\tword\tright"
    assert len(lines) == 1 + len(rows)
    assert all(ln.split("\t")[0] == "2" and ln.split("\t")[5].casefold() == "the"
               for ln in lines[1:])


def test_a_box_survives_a_workspace_save_and_open_and_selects_the_same_rows(qtbot, built, ws,
                                                                           tmp_path):
    from matplotlib.patches import Rectangle

    from elmo_engine.io import workspace_file as wf
    from elmo_explorer.persistence import workspace_state

    built.query_word("the")
    qtbot.waitUntil(lambda: built.map is not None and built.map.title == "the"
                    and built.is_ready(), timeout=120000)
    xy = built.map.coords[1]
    x_mid, y_mid = (float(v) for v in np.median(xy, axis=0))
    box = (x_mid, y_mid, float(xy[:, 0].max()) + 1, float(xy[:, 1].max()) + 1)
    with qtbot.waitSignal(built.results_changed, timeout=60000,
                          check_params_cb=lambda: bool(built.model.selection
                                                       and built.model.selection.lines)):
        built.view.maps[1].select_in_rect((box[2], box[3], box[0], box[1]))   # any corners
    sel = built.model.selection
    assert sel.layer == 1 and sel.rect == box and 0 < sel.n < len(built.map.rows)
    qtbot.waitUntil(built.is_ready, timeout=60000)
    path = wf.save_workspace(tmp_path / "boxed.elmows.json",
                             workspace_state.collect(ws, [("corpus", built)], None))
    loaded = wf.load_workspace(path).data
    assert loaded.views["corpus"]["box"] == {"layer": 1, "rect": list(box), "map_word": "the"}
    other = CorpusPanel(ws)
    qtbot.addWidget(other)
    other.resize(1200, 700)
    workspace_state.restore(ws, [("corpus", other)], loaded)
    qtbot.waitUntil(lambda: other.model.selection is not None
                    and bool(other.model.selection.lines), timeout=120000)
    qtbot.waitUntil(other.is_ready, timeout=60000)
    got = other.model.selection
    assert other.map.title == "the" and other.model.query.word == "the"
    np.testing.assert_array_equal(got.rows, sel.rows)
    assert (got.layer, got.rect) == (1, box)
    assert [(ln.sentence_id, ln.position) for ln in got.lines] == \
        [(ln.sentence_id, ln.position) for ln in sel.lines]
    want = np.flatnonzero(np.isin(other.map.rows, sel.rows))
    for plot in other.view.maps.values():                      # ringed in every layer
        np.testing.assert_array_equal(plot.selection, want)
    assert other.view.tabs.tabText(2) == f"Selection ({sel.n:,})"
    fig = other.figure("map")                                  # and drawn in the export
    assert sum(isinstance(p, Rectangle) for p in fig.axes[1].patches) == 1
    assert other.view_state()["box"] == loaded.views["corpus"]["box"]


def test_a_malformed_box_in_a_workspace_is_ignored_with_one_line(qtbot, panel, caplog):
    state = {"index": None, "options": {"k": 6}, "box": {"layer": 1, "rect": [0, 0, "x", 1]}}
    with caplog.at_level("WARNING"):
        panel.restore_view_state(state)
    text = panel.view.status.text()
    assert text.startswith("the saved map selection box was ignored: 'rect' must be four")
    assert "\n" not in text and any("box was ignored" in r.getMessage() for r in caplog.records)
    assert panel.view.k_box.value() == 6 and panel.model.pending_box is None


def test_build_index_asks_how_to_read_the_files_and_remembers_it(qtbot, panel, tmp_path,
                                                                 monkeypatch):
    """*Build index…*: the files, then *Pretokenized* and *Split each line into sentences*
    (the last choice first), the folder following the reading; the build gets that reading."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QDialog, QFileDialog

    from elmo_explorer.views.reading import CorpusReading
    from elmo_explorer.views.reading_dialog import ReadingDialog

    corpus = tmp_path / "wiki.txt"
    corpus.write_text("The well @-@ known bank .\n", encoding="utf-8")
    qs = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    monkeypatch.setattr(panel, "_qsettings", lambda: qs)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(corpus)], ""))
    shown = []

    def answer(dlg):                                   # the user ticks Pretokenized, then Build
        shown.append((dlg.reading(), dlg.note.text()))
        dlg.pretokenized.setChecked(True)
        shown.append((dlg.reading(), dlg.note.text()))
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(ReadingDialog, "exec", answer)
    builds = []
    monkeypatch.setattr(panel, "build", lambda files, folder, reading: builds.append(
        (files, folder, reading)))
    panel._ask_build()
    (first, where0), (ticked, where1) = shown
    assert first == CorpusReading() and ticked == CorpusReading(pretokenized=True)
    base = panel.default_folder("wiki")
    assert where0 == f"Into {base} (a stopped build there resumes)."
    assert where1 == f"Into {panel.default_folder('wiki-pretokenized')} (a stopped build " \
        "there resumes)."
    assert builds == [([corpus], panel.default_folder("wiki-pretokenized"), ticked)]
    shown.clear()
    monkeypatch.setattr(ReadingDialog, "exec",
                        lambda dlg: shown.append(dlg.reading()) or QDialog.DialogCode.Rejected)
    panel._ask_build()                                 # remembered; cancel builds nothing
    assert shown == [ticked] and len(builds) == 1


def test_a_build_that_ends_in_a_hidden_tab_leaves_no_progress_line(built):
    """An attack pass: a build that ended while another tab was shown kept "building the
    nearest-neighbour graph (…, 00:00:00 left)" in the status line for good (the progress bar
    of a hidden tab is never visible, so the line was taken for a message to keep)."""
    assert not built.isVisible() and built.is_ready()
    text = built.view.status.text()
    assert "building" not in text and "left)" not in text, text
