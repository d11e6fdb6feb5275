"""The one figure module: formats, colours by task kind, atomic writes with the umask's mode."""
from __future__ import annotations

import os

import numpy as np
import pytest

from elmo_engine.io import figures as F
from elmo_engine.errors import InputError


def _bars():
    fig, ax = F.new_figure()
    F.grouped_bars(ax, ["layer 0", "layer 1"], [
        {"label": "POS", "values": [0.4, 0.6], "errors": [0.01, 0.02],
         "color": F.task_color("syntax")},
        {"label": "WSD", "values": [0.3, 0.7], "color": F.task_color("semantics")}])
    F.baseline(ax, 0.5, "uniform")
    F.legend_outside(ax)
    return fig


def test_every_format_and_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        paths = F.save(_bars(), tmp_path / "fig")
    finally:
        os.umask(old)
    assert [p.name for p in paths] == ["fig.png", "fig.svg", "fig.pdf"]
    png, svg, pdf = (p.read_bytes() for p in paths)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg[:500] and pdf[:5] == b"%PDF-"
    assert all(p.stat().st_mode & 0o777 == 0o640 for p in paths)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temp files left
    one = F.save(_bars(), tmp_path / "single.svg")
    assert [p.name for p in one] == ["single.svg"]
    with pytest.raises(InputError, match="unknown figure format"):
        F.render(_bars(), "bmp")


def test_legend_outside_is_kept_whole(tmp_path):
    """The legend sits right of the axes and the saved image is wide enough to hold it."""
    from PIL import Image

    fig = _bars()
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 > ax.get_window_extent().x1                     # outside the data area
    tight = fig.get_tightbbox(fig.canvas.get_renderer())              # inches
    assert legend.x1 / fig.dpi <= tight.x1 + 1e-6                     # inside what is saved
    path, = F.save(fig, tmp_path / "b.png", dpi=100)
    with Image.open(path) as img:
        width = img.size[0]
    assert width >= tight.width * 100                                  # nothing cut off


def test_kind_colours_are_fixed():
    assert F.task_color("syntax") == F.KIND_COLORS["syntax"][0]
    assert F.task_color("semantics") == F.KIND_COLORS["semantics"][0]
    others = {F.task_color("other", i) for i in range(len(F.PALETTE))}
    assert len(others) == len(F.PALETTE)
    assert not others & {c for pair in F.KIND_COLORS.values() for c in pair}


def test_heatmap_colour_scale_follows_the_data(tmp_path):
    fig, ax = F.new_figure()
    m = np.array([[1.0, 0.62], [0.62, 0.98]])
    F.heatmap(fig, ax, m, ["a", "b"], ["a", "b"], "cosine", row_groups=["x", "y"],
              col_groups=["x", "y"])
    im = ax.images[0]
    assert im.get_clim() == pytest.approx((0.62, 1.0))               # sequential, data range
    assert im.get_cmap().name == "viridis"
    assert fig.axes[1].get_ylabel() == "cosine"                        # labelled colour bar
    fig2, ax2 = F.new_figure()
    F.heatmap(fig2, ax2, np.array([[-0.2, 0.5]]), ["r"], ["a", "b"], "difference")
    assert ax2.images[0].get_clim() == pytest.approx((-0.5, 0.5))     # signed: centred on 0
    assert ax2.images[0].get_cmap().name == "RdBu_r"


def test_scatter_panels_have_equal_axes():
    rng = np.random.default_rng(0)
    fig = F.scatter_panels([{"title": f"layer {k}", "xy": rng.normal(size=(10, 2)) * [5, 1],
                             "colors": ["#000000"] * 10} for k in range(4)],
                           legend=[("a", "#000000")])
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 4 and all(a.get_aspect() == 1.0 for a in axes)


def test_probe_figure_colours_by_kind_with_baselines_controls_and_flags(tmp_path):
    from elmo_engine.analysis.probes.experiment import LayerResult, MixResult, ProbeResult
    from elmo_engine.io.figures.probes import figure_runs, probe_figure, run_colors

    def run(task, name, below=False):
        layers = [LayerResult(k, 0.5, 0.6 + k / 10, 0.5, test_sd=0.01, control_test=0.4,
                              below_baseline=below and k == 0) for k in range(3)]
        mix = MixResult([0.2, 0.5, 0.3], 1.0, 0.7, 0.8, 0.7, weights_sd=[0.01, 0.02, 0.01],
                        control_test=0.45)
        return ProbeResult(task, name, "", "m", layers, mix, {"first_sense": 0.65,
                                                              "word_majority": 0.65}, {}, {}, {},
                           reference_baseline="first_sense" if "wsd" in task
                           else "word_majority")

    runs = [run("pos", "POS"), run("wsd", "WSD", below=True), run("demo-pos", "POS 2"),
            run("tsv", "NER")]
    colours = run_colors(runs)
    assert colours[:3] == [F.task_color("syntax"), F.task_color("semantics"),
                           F.task_color("syntax", light=True)]
    assert colours[3] in F.PALETTE
    series = figure_runs(runs)
    assert series[1]["below"] == [True, False, False, False]
    assert series[0]["control"] == [0.4, 0.4, 0.4, 0.45] and series[0]["baseline"][0] == "word_majority"
    fig = probe_figure(runs)
    ax_w, ax_s = fig.axes
    assert [t.get_text() for t in ax_s.get_xticklabels()] == ["0", "1", "2", "mix"]
    assert ax_s.get_xlabel() == "layer" and ax_w.get_ylim()[0] == 0.0      # bars from 0
    labels = fig.legends[0].get_texts()                     # one legend, outside the axes
    assert {"POS", "WSD", "WSD: control task", "WSD: under baseline"} <= {t.get_text() for t in labels}
    dashed = [ln for ln in ax_s.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == 4                                  # one control line per task
    assert any(t.get_text().startswith("first_sense 0.650") for t in ax_s.texts)
    (png,) = F.save(fig, tmp_path / "probes.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
