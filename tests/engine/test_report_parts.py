"""The report's parts of issue 29, built by the one report path (``export report`` / ``report``,
the app's *Export report…*): the contexts neighbour table (the rows ``contexts
--neighbours-csv`` writes), the MDL table and figure of a layers result, and the projection grid
(one panel per layer, the word's occurrences above the rest); figures at the size asked."""
from __future__ import annotations

import csv
import importlib.util
import json

import numpy as np
import pytest
from PIL import Image

from elmo_engine.analysis.projection.report import (PROJECTION_SEED, projection_figure,
                                                    projection_params)
from elmo_engine.analysis.report import mdl_runs
from elmo_engine.cli.main import main
from elmo_engine.io import figures as F
from elmo_engine.io.workspace_file import CheckpointRef, WorkspaceData, save_workspace

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIVE = ["He sat on the bank of the river .", "The river bank was muddy after the storm .",
        "She deposited the check at the bank on Monday .", "The bank raised its interest rates .",
        "They walked along the grassy bank of the stream ."]


@pytest.fixture
def five(tmp_path):
    p = tmp_path / "five.txt"
    p.write_text("\n".join(FIVE) + "\n", encoding="utf-8")
    return p


def _rows(path):
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _width(path) -> int:
    with Image.open(path) as img:
        return img.size[0]


def _workspace(path, checkpoint, **kw):
    save_workspace(path, WorkspaceData(sentences=FIVE, checkpoint=CheckpointRef(str(checkpoint)),
                                       **kw))
    return path


# ---- the contexts neighbour table ------------------------------------------------------------
def test_the_neighbour_table_is_what_contexts_lists(tmp_path, five, tiny_checkpoint, capsys):
    ws = _workspace(tmp_path / "w.elmows.json", tiny_checkpoint,
                    views={"contexts": {"word": "bank", "k": 5, "direction": "forward"}})
    out = tmp_path / "r"
    assert main(["export", "report", str(ws), "-o", str(out), "--device", "cpu"]) == 0
    capsys.readouterr()
    listed = tmp_path / "n.csv"
    assert main(["contexts", "--word", "bank", "--sentences", str(five), "--checkpoint",
                 str(tiny_checkpoint), "--neighbours", "5", "--direction", "forward",
                 "--neighbours-csv", str(listed), "--json", "--device", "cpu"]) == 0
    doc = json.loads(capsys.readouterr().out)
    table = _rows(out / "tables" / "contexts_neighbours.csv")
    assert table == _rows(listed)                       # the very rows contexts writes
    for layer in ("layer 1", "layer 2"):
        mine = [r for r in table if r["view"] == layer]
        assert [r["rank"] for r in mine] == ["1", "2", "3", "4", "5"]
        first, theirs = mine[0], doc["neighbours"][layer][0]
        assert float(first["score"]) == pytest.approx(theirs["score"], abs=1e-6)
        assert first["text"] == theirs["sentence"] and int(first["token"]) == theirs["token"]
        scores = [float(r["score"]) for r in mine]
        assert scores == sorted(scores, reverse=True)
        assert ("0", "4") not in [(r["sentence"], r["token"]) for r in mine]   # the query
    known = [r for r in table if r["view"] == "layer 0"]
    assert len(known) == 5 and "bank" not in [r["word"] for r in known]
    assert [r["word"] for r in known] == [w["word"] for w in doc["neighbours"]["layer 0"]]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Nearest neighbours of 'bank' per layer" in md
    assert "forward halves" in md and "sentence 1 (token 5)" in md
    first1 = [r for r in table if r["view"] == "layer 1"][0]
    assert f"layer 1: {first1['word']} ({float(first1['score']):.3f})" in md


def test_the_neighbour_table_queries_the_selected_occurrence(tmp_path, tiny_checkpoint):
    from elmo_engine.analysis.contexts.neighbour_corpus import (build_index, read_vocabulary,
                                                                vocabulary_file)
    from elmo_engine.analysis.contexts.neighbours import neighbour_table
    from elmo_engine.analysis.report import tokenize_sentences
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.io.datasets.reference_set import REFERENCE_SET_SENTENCES, reference_set_corpus
    from elmo_engine.model.checkpoint import load_checkpoint

    ws = _workspace(tmp_path / "w.elmows.json", tiny_checkpoint,
                    selection={"sentence": 3, "token": 1, "word": "bank"})
    out = tmp_path / "r"
    assert main(["export", "report", str(ws), "-o", str(out), "--device", "cpu"]) == 0
    table = _rows(out / "tables" / "contexts_neighbours.csv")
    emb = Embedder(load_checkpoint(tiny_checkpoint, device="cpu"), device="cpu")
    tokens = tokenize_sentences(FIVE)
    vocab = vocabulary_file(emb.model.info.options_path)
    in_set = reference_set_corpus("bank", REFERENCE_SET_SENTENCES)   # the view's default corpus
    assert len(in_set) == REFERENCE_SET_SENTENCES
    index = build_index(emb, tokens + in_set, read_vocabulary(vocab) if vocab else [])
    acts = emb.embed(tokens)
    expected = neighbour_table(index, acts[3][:, 1], "bank", 8, "both", [(3, 1)])
    for name, nbs in expected.layers:
        mine = [r for r in table if r["view"] == name]
        assert [(int(r["sentence"]), int(r["token"])) for r in mine] == \
            [(nb.sentence, nb.token) for nb in nbs]                         # k = 8, the default
        assert [float(r["score"]) for r in mine] == pytest.approx(
            [nb.score for nb in nbs], abs=1e-6)
        assert (3, 1) not in [(nb.sentence, nb.token) for nb in nbs]
    assert "sentence 4 (token 2)" in (out / "report.md").read_text(encoding="utf-8")


# ---- MDL ------------------------------------------------------------------------------------
def test_the_mdl_table_and_figure_of_a_layers_result(tmp_path, five, tiny_checkpoint):
    layers_json = tmp_path / "layers.json"
    assert main(["layers", str(five), "--checkpoint", str(tiny_checkpoint), "--min-count", "2",
                 "--mdl-task", "demo-pos", "--mdl-max-sentences", "40", "--json", "-o",
                 str(layers_json), "--device", "cpu"]) == 0
    mdl = json.loads(layers_json.read_text(encoding="utf-8"))["mdl"]
    out = tmp_path / "r"
    assert main(["report", str(five), "--word", "bank", "--checkpoint", str(tiny_checkpoint),
                 "--layers-json", str(layers_json), "--out", str(out), "--device", "cpu"]) == 0
    rows = _rows(out / "tables" / "layers_mdl.csv")
    codes = mdl["layers"] + [mdl["mix"]]
    assert [r["layer"] for r in rows] == ["layer 0", "layer 1", "layer 2", "mix"]
    for r, c in zip(rows, codes):
        assert r["task"] == "demo-pos"
        assert float(r["online codelength (kbits)"]) == pytest.approx(
            c["online_codelength_bits"] / 1000, abs=1e-4)
        assert float(r["uniform codelength (kbits)"]) == pytest.approx(
            mdl["uniform_codelength_bits"] / 1000, abs=1e-6)
        assert float(r["compression"]) == pytest.approx(c["compression"], abs=1e-6)
        assert float(r["final block accuracy"]) == pytest.approx(c["final_block_accuracy"],
                                                                 abs=1e-6)
    figures = out / "figures"
    for stem in ("layers_mdl", "projection_pca", "layers_contextuality"):
        assert _width(figures / f"{stem}.png") == 1950           # 6.5 in × 300 dpi
        assert (figures / f"{stem}.svg").is_file()
    best = min(codes, key=lambda c: c["online_codelength_bits"])
    md = (out / "report.md").read_text(encoding="utf-8")
    caption = [ln for ln in md.splitlines() if ln.startswith("![") and "layers_mdl.png" in ln][0]
    assert "demo-pos" in caption and "tiny" in caption and f"{mdl['examples']:,}" in caption
    assert f"shortest {best['name']} {best['online_codelength_bits'] / 1000:.2f} kbits" in caption
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "figures/layers_mdl.png" in html and "MDL probes: codelength per layer" in html
    # issue 42: the layers result's hubness, a table and a figure
    hub = json.loads(layers_json.read_text(encoding="utf-8"))["hubness"]
    rows = _rows(out / "tables" / "layers_hubness.csv")
    first = [r for r in rows if r["layer"] == "1"][0]
    top = hub["layers"][1]["hubs"][0]
    assert (first["rank"], first["token"], int(first["N_k"])) == ("1", top["token"], top["count"])
    assert float(first["skewness"]) == pytest.approx(hub["layers"][1]["skewness"], abs=1e-6)
    assert _width(figures / "layers_hubness.png") == 1950
    assert "Radovanović et al. 2010" in md


def test_mdl_runs_of_a_workspace_and_the_bars_from_zero():
    from elmo_engine.io.figures.layers import mdl_figure

    def code(name, layer, bits):
        return {"name": name, "layer": layer, "online_codelength_bits": bits,
                "uniform_codelength_bits": 900.0, "compression": 900.0 / bits,
                "final_block_accuracy": 0.8}

    pos = {"task": "demo-pos", "examples": 100, "classes": 9,
           "layers": [code("layer 0", 0, 400.0), code("layer 1", 1, 300.0)],
           "mix": code("mix", None, 320.0)}
    wsd = {"examples": 50, "classes": 4, "layers": [code("layer 0", 0, 90.0),
                                                    code("layer 1", 1, 60.0)], "mix": None}
    bad = {"layers": [{"name": "layer 0", "online_codelength_bits": "many"}]}
    data = WorkspaceData(sentences=[], views={"layers": {
        "result": {"contextuality": {"layers": []}, "mdl": pos},
        "mdl": {"demo-pos": pos, "demo-wsd": wsd, "broken": bad, "none": None}}})
    runs = mdl_runs(data)
    assert [r.get("task") for r in runs] == ["demo-pos", "demo-wsd"]   # repeat and bad left out
    fig = mdl_figure(runs)
    codelength, compression = fig.axes[:2]
    assert codelength.get_ylim()[0] == 0.0 and compression.get_ylim()[0] == 0.0
    assert mdl_runs(WorkspaceData(sentences=[])) == []


# ---- projection -------------------------------------------------------------------------------
def _synthetic(layer0_same: bool):
    rng = np.random.default_rng(3)
    tokens = [["the", "bank", "of", "a", "river"], ["a", "bank", "loan"], ["bank", "rates", "rose"]]
    acts = []
    for t in tokens:
        a = rng.normal(size=(3, len(t), 12)).astype(np.float32)
        if layer0_same:
            a[0] = 1.0                                    # layer 0: every token the same vector
        acts.append(a)
    return tokens, acts


def test_the_projection_grid_draws_the_word_above_the_rest():
    tokens, acts = _synthetic(layer0_same=True)
    fig, points, projections, how = projection_figure(tokens, acts, "bank")
    assert len(points) == 11 and how.startswith("PCA")
    assert [p.layer.name for p in projections] == ["layer 0", "layer 1", "layer 2", "mix"]
    assert all(p.method == "pca" for p in projections)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 4
    layer0 = shown[0]
    assert not layer0.axison and not layer0.collections            # all the same: a note
    assert "same vector" in " ".join(layer0.texts[0].get_text().split())
    for ax in shown[1:]:
        ref, user = ax.collections
        assert len(ref.get_offsets()) == 8 and len(user.get_offsets()) == 3
        assert user.get_zorder() > ref.get_zorder()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["other tokens (8)",
                                                                  "'bank' (3)"]
    from matplotlib.colors import to_rgba

    from elmo_engine.io import figures as F

    handle = fig.legends[0].legend_handles[1]             # the word's entry has its colour
    assert to_rgba(handle.get_markerfacecolor()) == to_rgba(F.USER_COLOR)
    assert to_rgba(shown[1].collections[1].get_facecolors()[0]) == to_rgba(F.USER_COLOR)
    assert "PCA (" in shown[1].get_title() and "% of variance" in shown[1].get_title()
    # issue 42: each map's faithfulness under its title, the numbers of map_faithfulness
    from elmo_engine.analysis.projection import map_faithfulness
    for ax, p in zip(shown[1:], projections[1:]):
        f = map_faithfulness(acts, points, p)
        assert ax.get_title().split("\n")[1:] == list(f.caption_lines())
    assert "\n" not in layer0.get_title()                         # a note has nothing to measure
    # the coordinates are the engine's PCA of that layer
    from elmo_engine.analysis.projection import LayerSpec, Projector
    again = Projector().pca(acts, points, LayerSpec.single(2))
    assert np.allclose(projections[2].coords, again.coords)


def test_the_projection_figure_file_has_the_width_asked(tmp_path):
    tokens, acts = _synthetic(layer0_same=False)
    fig, *_ = projection_figure(tokens, acts, "bank")
    (png,) = F.save(fig, tmp_path / "p.png", style=F.FigureStyle(6.5, 300))
    assert _width(png) == 1950


def test_the_report_projects_with_seeded_umap_only_for_a_projection_view():
    assert projection_params(None)[0] == "pca"                    # no view saved: PCA
    if importlib.util.find_spec("umap") is None:
        assert projection_params({"umap": {"seed": 7}})[0] == "pca"
        return
    method, params = projection_params({"umap": {"seed": 7, "n_neighbors": 5,
                                                 "min_dist": 0.3, "epochs": 0}})
    assert method == "umap" and params.random_state == 7 and params.n_neighbors == 5
    assert params.min_dist == pytest.approx(0.3) and params.n_epochs is None
    _m, params = projection_params({"umap": {"seed": -1, "n_neighbors": True}})
    assert params.random_state == PROJECTION_SEED and params.n_neighbors == 15


@pytest.mark.skipif(importlib.util.find_spec("umap") is None, reason="umap-learn not installed")
def test_umap_maps_are_reproducible():
    rng = np.random.default_rng(0)
    tokens = [[f"w{i * 7 + j}" for j in range(7)] + ["bank"] for i in range(6)]
    acts = [rng.normal(size=(3, len(t), 16)).astype(np.float32) for t in tokens]
    state = {"umap": {"seed": 3}}
    _fig, _pts, first, how = projection_figure(tokens, acts, "bank", state)
    _fig, _pts, second, _how = projection_figure(tokens, acts, "bank", state)
    assert how.startswith("UMAP (seed 3") and all(p.method == "umap" for p in first)
    for a, b in zip(first, second):
        assert np.array_equal(a.coords, b.coords)


def test_report_pretokenized_splits_on_spaces_and_saves_it_in_the_workspace(tmp_path,
                                                                             tiny_checkpoint):
    """``report --pretokenized``: the word is found as the pretokenized text writes it
    ("@-@" whole), the workspace records "whitespace" and the app (Settings ▸ Tokenization)
    reads it back the same way; without it the tokenizer splits "@-@" and the word is
    absent."""
    from elmo_engine.analysis.report import tokenize_sentences
    from elmo_engine.io.workspace_file import load_workspace

    text = tmp_path / "wiki.txt"
    text.write_text("The well @-@ known bank rose .\nA run @-@ down bank .\n", encoding="utf-8")
    base = ["report", str(text), "--word", "@-@", "--checkpoint", str(tiny_checkpoint),
            "--device", "cpu"]
    ws = tmp_path / "w.elmows.json"
    assert main(base + ["--pretokenized", "--out", str(tmp_path / "r"), "--workspace",
                        str(ws)]) == 0
    data = load_workspace(ws).data
    assert data.tokenization == "whitespace"
    assert data.selection == {"sentence": 0, "token": 2, "word": "@-@"}
    assert tokenize_sentences(data.sentences, data.tokenization)[1] == [
        "A", "run", "@-@", "down", "bank", "."]
    assert main(base + ["--out", str(tmp_path / "typed")]) == 1      # "@-@" split in three
