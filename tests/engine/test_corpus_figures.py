"""The Corpus view's figures (engine, no Qt): the map draws points up to its limit and the
density image above it; the senses figure has one bar per layer."""
from __future__ import annotations

import numpy as np

from elmo_engine.io.figures import corpus as CF
from elmo_engine.io.figures import render

COLOURS = ["#1f77b4", "#ff7f0e", "#c8c8c8"]


def _panel(n, seed=0):
    rng = np.random.default_rng(seed)
    return {"title": "layer 1", "xy": rng.normal(size=(n, 2)), "codes": rng.integers(0, 3, n),
            "selected": 0}


def test_a_big_map_panel_is_a_density_image_and_a_small_one_points():
    fig = CF.corpus_map_figure([_panel(CF.FIGURE_POINTS_MAX + 1), _panel(500)], COLOURS,
                               [("a", COLOURS[0], 10), ("b", COLOURS[1], 5)], title="t")
    big, small = fig.axes[:2]
    assert len(big.images) == 1 and big.images[0].get_array().shape == (300, 300, 4)
    assert len(small.images) == 0 and len(small.collections) == 2    # points + the ring
    assert "20,001 points" in big.get_title()
    assert render(fig, "png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_senses_figure_has_a_bar_segment_per_cluster_and_a_row_per_layer():
    layers = [{"layer": 1, "silhouette": 0.2, "clusters": [(30, "river, shore"), (10, "money")]},
              {"layer": 2, "silhouette": float("nan"), "clusters": [(40, "")]}]
    fig = CF.senses_figure("bank", layers, COLOURS)
    ax = fig.axes[0]
    assert len(ax.patches) == 3
    widths = sorted(round(p.get_width(), 3) for p in ax.patches)
    assert widths == [0.25, 0.75, 1.0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["layer 1", "layer 2"]
