"""The Projection view's Trajectories tab (issue 42; pytest-qt, offscreen): compute, slider,
trails, the kNN-change list, the GIF export."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pytestqt")

import elmo_explorer.views.projection.running as running_mod
from elmo_explorer.views.projection.controller import ProjectionPanel
from elmo_explorer.views.projection.trajectory_panel import FRAMES_SUBFOLDER
from elmo_explorer.views.projection.trajectory_model import (METHODS, SEQUENCE_KEYS,
                                                             TICKS_PER_LAYER, TrajectoryModel,
                                                             TrajectorySettings, layer_sequences)

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

SENTENCES = [
    "He sat on the bank of the river and watched the boats .",
    "She deposited the check at the bank on Monday .",
    "The children play in the park after school .",
    "The bank raised its interest rates again .",
    "They walked along the grassy bank of the stream .",
]


@pytest.fixture
def panel(qtbot, ws, monkeypatch):
    """A shown Projection panel with its PCA maps drawn (no UMAP)."""
    ws.set_sentences(SENTENCES)
    qtbot.waitUntil(ws.all_embedded, timeout=30000)
    monkeypatch.setattr(running_mod, "AUTO_UMAP_MAX", 0)
    monkeypatch.setattr(ProjectionPanel, "_schedule_warm_up", lambda self: None)
    p = ProjectionPanel(ws)
    qtbot.addWidget(p)
    p.view.controls.set_source("loaded")
    p.view.controls.set_colour_by("word")
    p.resize(1200, 700)
    with qtbot.waitSignal(p.ready, timeout=60000):
        p.show()
    return p


def test_layer_sequences_and_model_positions():
    seqs = layer_sequences(3)
    assert [len(s) for _n, s in seqs] == [3, 3, 3, 6]
    assert [x.key for x in seqs[3][1]] == ["layer0f", "layer1f", "layer2f", "layer2b", "layer1b",
                                          "layer0b"]
    assert layer_sequences(1) == []
    m = TrajectoryModel()
    m.set_trails([3, 3, 1])
    assert m.trails == []                              # no tokens yet: nothing to trail


def test_trajectories_tab_compute_slide_trail_and_export(qtbot, panel, tmp_path):
    iio = pytest.importorskip("imageio.v3")
    tr = panel.trajectories
    panel.tabs.setCurrentWidget(tr)
    tr.view.method.setCurrentIndex(0)                  # Procrustes · PCA
    assert METHODS[0].base == "pca"
    tr.view.k.setValue(4)
    with qtbot.waitSignal(tr.computed, timeout=60000):
        tr.compute()
    m = tr.model
    n = len(panel.model.tokens)
    assert m.layouts.coords.shape == (3, n, 2) and tr.view.slider.maximum() == 2 * TICKS_PER_LAYER
    assert tr.view.changes.rowCount() == min(50, n) and "4 nearest" in tr.view.changes_title.text()
    assert "The neighbours compared" not in tr.view.status.text()
    # the slider morphs linearly: halfway between layer 0 and 1
    tr.view.slider.setValue(TICKS_PER_LAYER // 2)
    expected = 0.5 * (m.layouts.coords[0] + m.layouts.coords[1])
    np.testing.assert_allclose(tr.view.map.coords, expected, atol=1e-5)
    x, y = tr.view.map.points.getData()              # the item moved, not only our copy
    np.testing.assert_allclose(np.c_[x, y], expected, atol=1e-5)
    assert "→" in tr.view.where.text()
    # trails: a word's tokens, and a row of the list adds its token
    assert tr.trail_word("bank") == 4
    assert len(m.trails) == 4 and len(tr.view.map.labels) == 4
    first = m.changes.top[0].index
    tr.view.changes.cellClicked.emit(0, 1)
    assert first in m.trails and len(m.trails) == len({*m.trails})
    assert (m.changes.a, m.changes.b) == ("layer 1", "layer 2")   # the default pair
    # playing moves the slider to the end and stops
    tr.set_ticks(2 * TICKS_PER_LAYER - 6)
    tr.view.play.setChecked(True)
    qtbot.waitUntil(lambda: not tr.view.play.isChecked(), timeout=5000)
    assert m.ticks == 2 * TICKS_PER_LAYER
    # the Maps tab's colour-by recolours the trajectories
    before = list(tr.view.map.brushes)
    panel.view.controls.set_colour_by("sentence")
    panel.apply_colours()
    assert [b.color().name() for b in tr.view.map.brushes] != [b.color().name() for b in before]
    gif = tmp_path / "t.gif"
    with qtbot.waitSignal(tr.exported, timeout=60000) as sig:
        tr.export(gif=gif, frames=tmp_path / "frames", steps=3)
    assert gif in sig.args[0]
    assert iio.imread(gif, index=None).shape[0] == 2 * 3 + 1
    assert len(list((tmp_path / "frames").glob("frame_*.png"))) == 7
    # a chosen folder of the user's files is never written over: the frames go into a folder
    # of their own inside it (and replace it the next time)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "frame_0000.png").write_bytes(b"the user's")
    for _ in range(2):
        with qtbot.waitSignal(tr.exported, timeout=60000):
            tr.export(frames=mine, steps=3)
        assert len(list((mine / FRAMES_SUBFOLDER).glob("frame_*.png"))) == 7
    assert sorted(p.name for p in mine.iterdir()) == ["frame_0000.png", FRAMES_SUBFOLDER]
    assert (mine / "frame_0000.png").read_bytes() == b"the user's"


def test_settings_from_json_keep_what_is_valid():
    assert TrajectorySettings.from_json(None) == TrajectorySettings()
    s = TrajectorySettings(method=METHODS[2].key, sequence=SEQUENCE_KEYS[3], reference=4, k=7,
                           pair=(1, 5), trail="bank")
    assert TrajectorySettings.from_json(json.loads(json.dumps(s.to_json()))) == s
    bad = {"method": "tsne", "sequence": 2, "reference": -1, "k": True, "pair": [1, "x"],
           "trail": 3}
    assert TrajectorySettings.from_json(bad) == TrajectorySettings()
    assert TrajectorySettings.from_json({"k": 10_000}).k == 100          # the box's range
    assert len({m.key for m in METHODS}) == len(METHODS)
    assert len(SEQUENCE_KEYS) == len(layer_sequences(3))


def test_the_tabs_choices_are_saved_with_the_view_and_the_trail_word_trails(qtbot, panel):
    tr, v = panel.trajectories, panel.trajectories.view
    v.method.setCurrentIndex(0)
    v.sequence.setCurrentIndex(1)                          # forward 0 → 1 → 2
    v.reference.setCurrentIndex(0)
    v.pair_a.setCurrentIndex(0)
    v.pair_b.setCurrentIndex(1)
    v.k.setValue(3)
    v.trail_word.setText("bank")
    saved = json.loads(json.dumps(panel.view_state()))
    assert saved["trajectories"] == {"method": METHODS[0].key, "sequence": "forward",
                                     "reference": 0, "k": 3, "pair": [0, 1], "trail": "bank"}
    # computing trails the word in the box
    with qtbot.waitSignal(tr.computed, timeout=60000):
        tr.compute()
    assert len(tr.model.trails) == 4 and (tr.model.changes.a, tr.model.changes.b) == (
        "layer 0 forward", "layer 1 forward")
    # other choices, then the saved ones back
    v.method.setCurrentIndex(2)
    v.sequence.setCurrentIndex(0)
    v.k.setValue(20)
    v.trail_word.setText("")
    panel.restore_view_state(saved)
    assert (v.method.currentIndex(), v.sequence.currentIndex(), v.reference.currentIndex(),
            v.pair_a.currentIndex(), v.pair_b.currentIndex(), v.k.value(),
            v.trail_word.text()) == (0, 1, 0, 0, 1, 3, "bank")
    assert tr.settings() == TrajectorySettings.from_json(saved["trajectories"])
    # a workspace of another model: positions past its layers keep the defaults
    panel.restore_view_state({**saved, "trajectories": {**saved["trajectories"],
                                                        "pair": [0, 9], "reference": 9}})
    assert (v.reference.currentIndex(), v.pair_b.currentIndex()) == (0, 1)
    # a new model's layers keep the chosen positions where they exist
    tr.refresh_choices()
    assert (v.sequence.currentIndex(), v.reference.currentIndex(), v.pair_a.currentIndex(),
            v.pair_b.currentIndex()) == (1, 0, 0, 1)
    # restored before there are layers to choose from: the settings wait for them, and a save
    # meanwhile keeps them
    real = tr.n_layers
    tr.n_layers = lambda: 1
    tr.refresh_choices()
    assert v.sequence.count() == 0
    wanted = TrajectorySettings(method=METHODS[1].key, sequence="backward", reference=2, k=5,
                                pair=(0, 2), trail="river")
    tr.apply_settings(wanted)
    assert tr.settings() == wanted and panel.view_state()["trajectories"] == wanted.to_json()
    tr.n_layers = real
    tr.refresh_choices()
    assert tr.settings() == wanted and v.sequence.currentText().startswith("backward")


def test_compute_before_maps_says_so(qtbot, ws, monkeypatch):
    monkeypatch.setattr(ProjectionPanel, "_schedule_warm_up", lambda self: None)
    p = ProjectionPanel(ws)
    qtbot.addWidget(p)
    assert p.trajectories.compute() is None
    assert "Maps tab first" in p.trajectories.view.note.text()


def test_cancel_drops_the_result_and_a_new_compute_supersedes(qtbot, panel):
    tr = panel.trajectories
    handle = tr.compute()
    assert handle is not None and not tr.view.compute.isEnabled()
    tr.cancel()
    assert tr.view.compute.isEnabled() and "Cancelled" in tr.view.status.text()
    qtbot.waitUntil(lambda: panel.jobs.is_idle(), timeout=60000)
    assert tr.model.layouts is None                    # the cancelled job's result never drawn
    first = tr.compute()
    with qtbot.waitSignal(tr.computed, timeout=60000):
        second = tr.compute()                          # supersedes the first
    assert first.stale and not second.stale
    assert tr.model.layouts is not None and tr.view.play.isEnabled()


def test_a_k_over_the_tokens_is_said_not_cut_silently(qtbot, panel):
    """``project --aligned --knn K`` refuses a K of the tokens or more; the tab compares n − 1
    neighbours then, and now says so."""
    tr = panel.trajectories
    panel.tabs.setCurrentWidget(tr)
    tr.view.method.setCurrentIndex(0)
    n = len(panel.model.tokens)
    tr.view.k.setValue(min(tr.view.k.maximum(), n + 5))
    with qtbot.waitSignal(tr.computed, timeout=60000):
        tr.compute()
    assert f"k = {n - 1}, not {tr.view.k.value()} (only {n:,} tokens)" in tr.view.status.text()


def test_esc_during_a_compute_leaves_the_tab_usable(qtbot, panel):
    """Esc (the window's Cancel of every job) left *Compute* disabled and the progress line
    for good; the tab's own Cancel did not. Now both end alike."""
    tr = panel.trajectories
    panel.tabs.setCurrentWidget(tr)
    tr.view.method.setCurrentIndex(0)
    tr.compute()
    assert not tr.view.compute.isEnabled()
    panel.ws.worker.cancel_all()
    qtbot.waitUntil(lambda: tr.view.compute.isEnabled(), timeout=30000)
    assert not tr.view.cancel.isEnabled() and "Cancelled" in tr.view.status.text()
