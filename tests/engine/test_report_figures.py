"""Figures for papers (issue 29): exact size and dpi, bars from zero, the user's points above the
reference points, the layer-0 note, captions with the model, the word and the numbers; and
``elmo-explorer report`` end to end on the bundled demo model."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PIL import Image

from elmo_engine.cli.main import main
from elmo_engine.io import figures as F
from elmo_engine.io.figures import FigureStyle

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIVE = ["He sat on the bank of the river .", "The river bank was muddy after the storm .",
        "She deposited the check at the bank on Monday .", "The bank raised its interest rates .",
        "They walked along the grassy bank of the stream ."]


def _bars():
    fig, ax = F.new_figure(11.0, 3.0)                     # drawn wide, written at the style
    F.grouped_bars(ax, ["a", "b"], [{"label": "x", "values": [0.7, 0.9]},
                                    {"label": "y", "values": [0.8, 0.95]}], ylabel="score")
    F.legend_outside(ax)
    return fig, ax


@pytest.mark.parametrize("width, dpi, pixels", [(6.5, 300, 1950), (3.3, 200, 660),
                                                (7.0, 100, 700)])
def test_the_png_has_the_width_and_dpi_asked_for(tmp_path, width, dpi, pixels):
    fig, _ax = _bars()
    (png,) = F.save(fig, tmp_path / "b.png", style=FigureStyle(width, dpi))
    with Image.open(png) as img:
        assert img.size[0] == pixels
        assert round(img.info["dpi"][0]) == dpi
    assert fig.get_size_inches()[0] == pytest.approx(width)


def test_fonts_follow_the_width_and_never_go_under_7_pt():
    assert FigureStyle(6.5).font_pt() == pytest.approx(8.5)
    assert FigureStyle(3.3).font_pt() == 7.0 and FigureStyle(20).font_pt() == 12.0
    fig, ax = _bars()
    F.fit(fig, FigureStyle(6.5, 100))
    label = ax.yaxis.label.get_fontsize()
    assert label == pytest.approx(8.5)                    # "medium" at 8.5 pt
    F.fit(fig, FigureStyle(6.5, 100))                     # fitting twice does not scale twice
    assert ax.yaxis.label.get_fontsize() == pytest.approx(label)


def test_bad_styles_are_refused():
    from elmo_engine.errors import InputError

    with pytest.raises(InputError, match="width"):
        FigureStyle(0.2)
    with pytest.raises(InputError, match="dpi"):
        FigureStyle(6.5, 5)


def test_bars_start_at_zero_or_say_why_not():
    _fig, ax = _bars()
    assert ax.get_ylim()[0] == 0.0
    fig, ax = F.new_figure()
    F.grouped_bars(ax, ["a", "b"], [{"label": "d", "values": [-0.2, 0.3]}])
    assert ax.get_ylim()[0] < 0
    assert any("negative values" in t.get_text() for t in ax.texts)


def test_user_points_above_reference_points_and_named_in_the_legend():
    xy = np.random.default_rng(0).normal(size=(40, 2))
    mine = np.zeros(40, bool)
    mine[:4] = True
    fig = F.scatter_panels([{"title": "layer 1", "xy": xy, "colors": ["#009E73"] * 40,
                             "highlight": mine}], legend=[("river", "#009E73")])
    ax = fig.axes[0]
    ref, user = ax.collections
    assert len(ref.get_offsets()) == 36 and len(user.get_offsets()) == 4
    assert user.get_zorder() > ref.get_zorder()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["river", "your sentences"]


def test_a_panel_of_identical_points_is_a_note():
    same = np.ones((6, 2))
    fig = F.scatter_panels([{"title": "layer 0", "xy": same, "colors": ["k"] * 6,
                             "note": "layer 0: all 6 occurrences are the same vector"},
                            {"title": "layer 1", "xy": np.arange(12.0).reshape(6, 2),
                             "colors": ["k"] * 6}])
    a0, a1 = fig.axes[:2]
    assert not a0.axison and not a0.collections
    assert "all 6 occurrences" in " ".join(a0.texts[0].get_text().split())
    assert a1.axison and a1.collections


def test_the_contexts_heatmaps_replace_layer_0_of_one_word_by_a_note():
    from elmo_engine.analysis.contexts import compare as cmp

    rng = np.random.default_rng(1)
    tokens = [["the", "bank", "x"], ["a", "bank"], ["bank", "y"]]
    acts = []
    for t in tokens:
        a = rng.normal(size=(3, len(t), 8)).astype(np.float32)
        for i, w in enumerate(t):
            if w == "bank":
                a[0, i] = 1.0                           # layer 0: context-free
        acts.append(a)
    comp, _v, _n = cmp.compare_word(tokens, acts, "bank")
    from elmo_engine.io.figures.contexts import contexts_heatmaps

    fig = contexts_heatmaps(comp)
    first = fig.axes[0]
    assert not first.axison and "same vector" in " ".join(first.texts[0].get_text().split())
    assert all(ax.images for ax in fig.axes[1:4])       # layers 1, 2 and the mix are drawn


@pytest.fixture
def five(tmp_path):
    p = tmp_path / "five.txt"
    p.write_text("\n".join(FIVE) + "\n", encoding="utf-8")
    return p


def test_report_command_end_to_end_on_the_demo_model(tmp_path, five, capsys):
    from elmo_engine.io.workspace_file import load_workspace
    from elmo_engine.resources import demo_checkpoint_path

    probe = sorted((demo_checkpoint_path().parent / "probe_reference").glob("pos*.json"))
    out, ws = tmp_path / "rep", tmp_path / "bank.elmows.json"
    assert main(["report", str(five), "--word", "bank", "--out", str(out), "--workspace",
                 str(ws), "--probes", str(probe[0]), "--width-in", "3.5", "--dpi", "200",
                 "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "wrote a report with 8 tables" in err and "wrote the workspace" in err
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures == ["contexts_bank_heatmaps.png", "contexts_bank_heatmaps.svg",
                       "contexts_bank_summary.png", "contexts_bank_summary.svg",
                       "probe_results.png", "probe_results.svg",
                       "projection_pca.png", "projection_pca.svg"]    # no projection view: PCA
    for png in (out / "figures").glob("*.png"):
        with Image.open(png) as img:
            assert img.size[0] == 700                     # 3.5 in × 200 dpi
    with open(out / "tables" / "contexts_summary.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["view"] for r in rows] == ["layer 0", "layer 1", "layer 2", "mix"]
    assert float(rows[0]["self-similarity"]) == pytest.approx(1.0)
    md = (out / "report.md").read_text(encoding="utf-8")
    caption = [ln for ln in md.splitlines() if "contexts_bank_heatmaps" in ln][0]
    assert "'bank'" in caption and "demo" in caption and "5 sentences" in caption
    assert "layer 2" in caption and "self-similarity" in caption
    probe_caption = [ln for ln in md.splitlines() if "probe_results.png" in ln][0]
    assert "best layer" in probe_caption and "demo" in probe_caption
    loaded = load_workspace(ws)
    assert loaded.data.sentences[0] == FIVE[0] and loaded.data.selection["word"] == "bank"
    assert loaded.data.views["contexts"]["word"] == "bank" and len(loaded.data.probe_runs) == 1
    assert not loaded.checksum_mismatch and not loaded.checkpoint_missing
    # the saved workspace gives the same report through export report
    again = tmp_path / "again"
    assert main(["export", "report", str(ws), "-o", str(again), "--width-in", "3.5", "--dpi", "200",
                 "--device", "cpu"]) == 0
    assert sorted(p.name for p in (again / "figures").iterdir()) == figures
    for table in ("contexts_summary.csv", "contexts_neighbours.csv"):
        assert (again / "tables" / table).read_text("utf-8") == \
            (out / "tables" / table).read_text("utf-8")


def test_report_command_bad_input_exits_1_naming_the_file(tmp_path, five, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    deep = tmp_path / "deep.json"          # a fourth attack pass: "nested too deeply" was an
    deep.write_text("[" * 100_000, encoding="utf-8")     # unexpected error, the file unnamed
    nan = tmp_path / "nan.json"
    nan.write_text('{"value": NaN}', encoding="utf-8")
    cases = [(["report", str(tmp_path / "none.txt"), "--word", "bank"], "none.txt"),
             (["report", str(five), "--word", "bank", "--probes", str(deep)],
              "deep.json: the probe results is not JSON (nested too deeply)"),
             (["report", str(five), "--word", "bank", "--layers-json", str(nan)],
              "nan.json: the layers results is not JSON (NaN is not a JSON number)"),
             (["report", str(five), "--word", "shore"], "'shore' does not occur"),
             (["report", str(five), "--word", "bank", "--probes", str(bad)], "bad.json"),
             (["report", str(five), "--word", "bank", "--layers-json", str(bad)], "bad.json")]
    for argv, needle in cases:
        assert main(argv + ["--out", str(tmp_path / "r"), "--device", "cpu"]) == 1
        err = capsys.readouterr().err
        assert needle in err and err.startswith("elmo-explorer") and err.count("\n") == 1
        assert not (tmp_path / "r").exists()
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"task": "pos"}), encoding="utf-8")
    assert main(["report", str(five), "--word", "bank", "--probes", str(wrong), "--out",
                 str(tmp_path / "r")]) == 1
    assert "wrong.json: not a probe result" in capsys.readouterr().err


def test_a_report_folder_that_turns_read_only_names_the_report_not_its_staging(tmp_path, five,
                                                                              capsys, monkeypatch):
    """A review: a folder that took no new files once the work had started made ``report``
    name its staging folder (".rep.figures-…"), never the report the user asked for."""
    import errno
    import tempfile

    real = tempfile.mkdtemp

    def read_only(*a, **kw):
        if ".figures-" in str(kw.get("prefix", "")):
            raise OSError(errno.EROFS, "Read-only file system",
                          str(tmp_path / ".rep.figures-abc123"))
        return real(*a, **kw)

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    assert main(["report", str(five), "--word", "bank", "--out", str(tmp_path / "rep"),
                 "--device", "cpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'rep'}" in err[0] and "read-only" in err[0], err
    assert ".figures-" not in err[0] and not (tmp_path / "rep").exists()


def test_a_layer_whose_tokens_fall_on_a_few_points_is_a_note_naming_the_spellings():
    """Issue 29: layer 0 of one word (two spellings) is not a map of two dots but a note; the
    mix and the contextual layers stay maps."""
    from elmo_engine.analysis.projection import LayerSpec, Projection, collapsed_note

    words = ["bank"] * 445 + ["Bank"] * 5
    two = np.array([[0.0, 0.0]] * 445 + [[3.0, 1.0]] * 5)
    spread = np.random.default_rng(0).normal(size=(450, 2))
    note = collapsed_note(Projection(LayerSpec.single(0), "pca", two, 0.0), words)
    assert note.startswith("layer 0: the 450 tokens fall on 2 points, one per spelling "
                           "(bank 445, Bank 5)")
    one = collapsed_note(Projection(LayerSpec.single(0), "pca", np.zeros((450, 2)), 0.0), ["bank"] * 450)
    assert "all 450 tokens (bank 450) have the same vector" in one
    assert collapsed_note(Projection(LayerSpec.single(1), "umap", spread, 0.0), words) is None
    assert collapsed_note(Projection(LayerSpec.single(0), "pca", two[:5], 0.0), words[:5]) is None
    mixed = collapsed_note(Projection(LayerSpec.mix((0.5, 0.5, 0.0)), "pca", two, 0.0), words)
    assert "fall on 2 points" in mixed and "spelling" not in mixed
    fig = F.scatter_panels([{"title": "layer 0", "xy": two, "colors": ["k"] * 450, "note": note},
                            {"title": "layer 1", "xy": spread, "colors": ["k"] * 450}])
    a0, a1 = fig.axes[:2]
    assert not a0.axison and not a0.collections and "one per spelling" in " ".join(a0.texts[0].get_text().split())
    assert a1.axison and len(a1.collections[0].get_offsets()) == 450


def test_a_note_is_wrapped_inside_its_panel():
    """A long note stays within its axes' column (matplotlib's own wrap follows the figure)."""
    long = ("layer 0: all 11 occurrences of 'bank' have the same vector (the character CNN sees "
            "only the word), so every cosine is 1.00. ") * 2
    fig = F.scatter_panels([{"title": "layer 0", "xy": np.zeros((8, 2)), "colors": ["k"] * 8,
                             "note": long},
                            {"title": "layer 1", "xy": np.arange(16.0).reshape(8, 2),
                             "colors": ["k"] * 8}])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    a0 = fig.axes[0]
    text = a0.texts[0]
    box, panel = text.get_window_extent(renderer), a0.get_window_extent(renderer)
    assert "\n" in text.get_text() and " ".join(text.get_text().split()) == " ".join(long.split())
    assert box.x0 >= panel.x0 - 2 and box.x1 <= panel.x1 + 2


def test_the_report_projection_colours_the_word_by_its_groups():
    """Issue 39: the report's projection drew every "bank" in one colour; its occurrences are
    now coloured by their group (sense), senses in the order of their names, named in the
    legend."""
    from elmo_engine.analysis.projection.report import (GROUP_COLORS, OTHER_TOKENS_COLOR,
                                                        group_colors, projection_figure)

    colours, legend = group_colors(["bank: river", "bank: money", "", "bank: river"])
    assert colours == [GROUP_COLORS[1], GROUP_COLORS[0], F.USER_COLOR, GROUP_COLORS[1]]
    assert legend == [("money (1)", GROUP_COLORS[0]), ("river (2)", GROUP_COLORS[1]),
                      ("no group (1)", F.USER_COLOR)]
    rng = np.random.default_rng(0)
    tokens = [["the", "bank", "of", "the", "river"], ["a", "bank", "loan", "is", "due"],
              ["he", "sat", "by", "the", "bank"]]
    acts = [rng.normal(size=(3, len(t), 8)).astype(np.float32) for t in tokens]
    groups = {(0, 1): "bank: river", (1, 1): "bank: money", (2, 4): "bank: river"}
    fig, points, _proj, _how = projection_figure(tokens, acts, "bank", None, groups)
    ax = next(a for a in fig.axes if a.get_visible() and len(a.collections) >= 2)
    user = ax.collections[1]                                     # the word, above the rest
    faces = {tuple(np.round(c[:3], 3)) for c in user.get_facecolors()}
    assert len(user.get_offsets()) == 3 and len(faces) == 2
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "'bank': river (2)" in names and "'bank': money (1)" in names
    assert ax.collections[0].get_facecolors().shape[0] == len(points) - 3
    assert OTHER_TOKENS_COLOR not in GROUP_COLORS
