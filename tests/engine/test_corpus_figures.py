"""The Corpus view's figures (engine, no Qt): the map draws points up to its limit and the
density image above it, the query's ring in the colour asked for and the box selection; the
senses figure has one bar per layer."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_engine.io.figures import corpus as CF
from elmo_engine.io.figures import render

COLOURS = ["#1f77b4", "#ff7f0e", "#c8c8c8"]


def _panel(n, seed=0, box=None):
    rng = np.random.default_rng(seed)
    return CF.MapPanel("layer 1", rng.normal(size=(n, 2)), rng.integers(0, 3, n), query=0,
                       box=box)


def test_a_big_map_panel_is_a_density_image_and_a_small_one_points():
    fig = CF.corpus_map_figure([_panel(CF.FIGURE_POINTS_MAX + 1), _panel(500)], COLOURS,
                               [("a", COLOURS[0], 10), ("b", COLOURS[1], 5)], title="t")
    big, small = fig.axes[:2]
    assert len(big.images) == 1 and big.images[0].get_array().shape == (300, 300, 4)
    assert len(small.images) == 0 and len(small.collections) == 3    # points + the ring (2)
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


def _edge_rgba(coll):
    return [tuple(np.round(c, 3)) for c in coll.get_edgecolors()]


def test_the_map_rings_the_query_in_its_colour_and_draws_the_box_and_its_points():
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Rectangle

    query_colour, ring_colour = "#ffd400", "#000000"
    rng = np.random.default_rng(3)
    xy = rng.normal(size=(400, 2)).astype(np.float32)
    codes = rng.integers(0, 3, 400)
    box = (-0.5, -0.25, 0.75, 1.0)
    inside = np.flatnonzero((xy[:, 0] >= -0.5) & (xy[:, 0] <= 0.75)
                            & (xy[:, 1] >= -0.25) & (xy[:, 1] <= 1.0))
    panels = [CF.MapPanel("layer 1", xy, codes, query=7, box=(box[2], box[3], box[0], box[1])),
              CF.MapPanel("layer 2", xy[:, ::-1].copy(), codes, query=7)]
    marks = CF.MapMarks(query_colour=query_colour, selected=inside,
                        selection_colour=ring_colour)
    fig = CF.corpus_map_figure(panels, COLOURS, [("a", COLOURS[0], 1)], marks=marks)
    yellow = tuple(np.round(to_rgba(query_colour), 3))
    for ax, p in zip(fig.axes[:2], panels):
        rings = [c for c in ax.collections if yellow in _edge_rgba(c)]
        assert len(rings) == 1                                       # the query's ring
        np.testing.assert_allclose(rings[0].get_offsets(), [p.xy[7]], atol=1e-6)
        assert len(rings[0].get_facecolors()) == 0 or rings[0].get_facecolors()[0][3] == 0
        # the selected points ringed in every panel (the same occurrences)
        sel = [c for c in ax.collections if len(c.get_offsets()) == len(inside)
               and c is not rings[0] and _edge_rgba(c)[0] == (0.0, 0.0, 0.0, 1.0)]
        assert len(sel) == 1
        np.testing.assert_allclose(sel[0].get_offsets(), p.xy[inside], atol=1e-6)
    # the box on the panel it was drawn on only, normalized, outlined in the rings' colour
    rects = [a for a in fig.axes[0].patches if isinstance(a, Rectangle)]
    assert len(rects) == 1 and not any(isinstance(a, Rectangle) for a in fig.axes[1].patches)
    r = rects[0]
    assert (r.get_x(), r.get_y(), r.get_x() + r.get_width(), r.get_y() + r.get_height()) == \
        pytest.approx(box)
    assert tuple(r.get_edgecolor()) == to_rgba(ring_colour) and not r.get_fill()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "the query" in labels and f"box selection ({len(inside):,})" in labels
    assert render(fig, "png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_box_past_the_data_is_clipped_and_a_big_selection_is_shaded():
    xy = np.random.default_rng(0).normal(size=(CF.FIGURE_POINTS_MAX + 5000, 2))
    codes = np.zeros(len(xy), np.int64)
    panel = CF.MapPanel("layer 0", xy, codes, box=(-100.0, -100.0, 0.0, 100.0))
    everything = np.arange(len(xy))
    fig = CF.corpus_map_figure([panel], COLOURS, marks=CF.MapMarks(selected=everything))
    ax = fig.axes[0]
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    assert x0 > -10 and y1 < 10                        # the box did not widen the panel
    (r,) = ax.patches
    assert r.get_x() == pytest.approx(x0) and r.get_x() + r.get_width() == pytest.approx(0.0)
    assert r.get_y() == pytest.approx(y0) and r.get_y() + r.get_height() == pytest.approx(y1)
    assert len(ax.images) == 2                          # the map's density + the selection's
    shade = ax.images[1].get_array()
    assert shade.shape == (300, 300, 4) and shade[..., 3].max() <= 128
    assert len(ax.collections) == 0                     # no 25,000 rings
    # a box wholly outside the panel draws nothing
    far = CF.MapPanel("layer 0", xy[:100], codes[:100], box=(50.0, 50.0, 60.0, 60.0))
    assert not CF.corpus_map_figure([far], COLOURS).axes[0].patches
