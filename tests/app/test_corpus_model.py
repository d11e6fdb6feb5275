"""The Corpus view's Qt-free parts: its model (options, concordance TSV, senses rows, saved
state with the map's box, a malformed box ignored), the map's data (density binning, viewport,
PCA per layer) and the exported map's marks (the query's ring, the box and its points)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from elmo_engine.index.search import Hit
from elmo_engine.index.senses import LayerSenses, Occurrence, SenseCluster, SenseInduction
from elmo_engine.io.figures.corpus import density_rgba
from elmo_explorer.views.corpus import atlas
from elmo_explorer.views.corpus.model import (CorpusModel, CorpusOptions, MapScope, Query,
                                              TSV_COLUMNS)


def _hit(layer, rank, cos=0.9):
    return Hit(sentence_id=rank, position=1, word="bank", cosine=cos,
               text="the bank of\tthe river", layer=layer, row=10 * rank + 1)


def test_the_model_imports_no_qt():
    import subprocess
    import sys

    code = ("import sys, elmo_explorer.views.corpus.model, elmo_explorer.views.corpus.atlas, "
            "elmo_explorer.views.corpus.jobs; print(any(m.startswith('PySide6') for m in "
            "sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_concordance_tsv_has_a_header_and_one_line_per_hit_with_tabs_removed():
    m = CorpusModel()
    m.set_hits({2: [_hit(2, 0, 1.0), _hit(2, 1, 0.5)], 1: [_hit(1, 0, 0.75)]})
    lines = m.concordance_tsv().splitlines()
    assert lines[0].split("\t") == list(TSV_COLUMNS)
    rows = [ln.split("\t") for ln in lines[1:]]
    assert [r[0] for r in rows] == ["1", "2", "2"]               # layer order
    assert all(len(r) == len(TSV_COLUMNS) for r in rows)
    assert [float(r[2]) for r in rows] == [0.75, 1.0, 0.5]
    assert rows[1][5:8] == ["the", "bank", "of the river"]       # the tab became a space


def test_options_from_saved_json_keep_defaults_for_bad_values():
    o = CorpusOptions.from_dict({"k": 25, "same_word": False, "map_scope": MapScope.ALL,
                                 "map_max_points": True, "k_max": 99, "junk": 1})
    assert (o.k, o.same_word, o.map_scope) == (25, False, MapScope.ALL)
    assert o.map_max_points == CorpusOptions().map_max_points     # a bool is not a count
    assert not hasattr(o, "k_max")          # not an option: the 6 saved before is not read
    assert CorpusOptions.from_dict("nonsense") == CorpusOptions()


def test_view_state_round_trips_index_options_and_query():
    m = CorpusModel(index_path="idx", options=CorpusOptions(k=7, same_word=False))
    m.query = Query("bank", ("the", "bank", "."), 1)
    other = CorpusModel()
    assert other.restore_view_state(m.view_state()) == "idx"
    assert other.options == m.options
    assert (other.query.word, other.query.tokens, other.query.position) == \
        ("bank", ("the", "bank", "."), 1)
    bad = m.view_state()
    bad["query"]["position"] = 9                                  # outside its sentence
    third = CorpusModel()
    third.restore_view_state(bad)
    assert third.query is None


def test_cluster_rows_name_size_share_context_words_and_typical_sentence():
    occs = tuple(Occurrence(i, 1, ("the", "bank", f"w{i}")) for i in range(4))
    ls = LayerSenses(2, 2, 0.4, ((2, 0.4),), (0, 0, 1, 1), (
        SenseCluster(0, 3, (2, 0), (("river", 2.5), ("shore", 1.0))),
        SenseCluster(1, 1, (3,), (("money", 3.0),))))
    m = CorpusModel(senses=SenseInduction("bank", occs, (ls,), 4))
    rows = m.cluster_rows()
    assert [(r["layer"], r["cluster"], r["size"], r["share"]) for r in rows] == \
        [(2, 1, 3, 0.75), (2, 2, 1, 0.25)]
    assert rows[0]["context_words"] == "river, shore"
    assert rows[0]["typical"] == "the bank w2" and rows[0]["more_typical"] == "the bank w0"


def test_density_bins_count_colour_and_leave_empty_bins_transparent():
    coords = np.array([[0.1, 0.1], [0.15, 0.12], [0.9, 0.9], [5.0, 5.0]], np.float32)
    codes = np.array([0, 1, 0, 0])
    img = density_rgba(coords, codes, ["#ff0000", "#0000ff"], (0, 0, 1, 1), (2, 2))
    assert img.shape == (2, 2, 4) and img.dtype == np.uint8
    # bin (row 0, col 0): one red + one blue point → purple, the fullest bin → opaque
    assert tuple(img[0, 0]) == (128, 0, 128, 255)
    # bin (row 1, col 1): one red point, less opaque than the fullest bin but visible
    assert tuple(img[1, 1, :3]) == (255, 0, 0) and 76 < img[1, 1, 3] < 255
    assert img[0, 1, 3] == 0 and img[1, 0, 3] == 0                # empty; (5, 5) is outside


def test_viewport_mode_switches_at_the_points_limit():
    coords = np.random.default_rng(0).normal(size=(50_000, 2)).astype(np.float32)
    everything = atlas.bounds(coords)
    assert len(atlas.visible(coords, everything)) == 50_000
    assert atlas.mode_for(50_000) is atlas.MapMode.DENSITY
    small = (-0.1, -0.1, 0.1, 0.1)
    inside = atlas.visible(coords, small)
    assert 0 < len(inside) < atlas.POINTS_MAX
    assert np.all(np.abs(coords[inside]) <= 0.1)
    assert atlas.mode_for(len(inside)) is atlas.MapMode.POINTS


def test_projection_per_layer_is_the_pca_of_the_rows_and_samples_big_sets(monkeypatch):
    from elmo_engine.analysis.projection.compute import pca

    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(500, 16)).astype(np.float16)
    rows = np.arange(0, 500, 2)
    xy, explained = atlas.project_layer(vecs, rows)
    ref = pca(vecs[rows].astype(np.float32), 2)
    assert xy.shape == (250, 2)
    np.testing.assert_allclose(xy, ref.coords[:, :2], atol=1e-4)
    assert explained == pytest.approx(ref.explained[:2].sum())
    monkeypatch.setattr(atlas, "PCA_SAMPLE", 100)                 # fit on 100, apply to all
    xy2, _ = atlas.project_layer(vecs, rows)
    assert xy2.shape == (250, 2) and np.isfinite(xy2).all()


def test_categories_colour_the_commonest_words_and_grey_the_rest():
    codes, legend = atlas.categories(["a", "b", "a", "c"], max_colours=2)
    assert [n for n, _c, _k in legend] == ["a", "b"]
    assert codes.tolist() == [0, 1, 0, 2]                          # "c" is "other"
    data = atlas.synthetic_map(1000, clusters=3)
    assert data.colours()[-1] == atlas.OTHER_COLOUR and len(data.legend) == 3
    assert set(data.coords) == {0, 1, 2} and data.coords[1].shape == (1000, 2)


def test_points_in_rect_takes_any_corner_order_includes_edges_and_matches_a_loop():
    from elmo_explorer.common.selection import points_in_rect

    xy = np.random.default_rng(3).normal(0, 1, (5000, 2)).astype(np.float32)
    xy[0] = (0.5, -0.25)                                   # on the box's corner
    box = (0.5, 0.75, -0.5, -0.25)                         # x0 > x1, y0 > y1
    want = [i for i, (x, y) in enumerate(xy.tolist()) if -0.5 <= x <= 0.5 and -0.25 <= y <= 0.75]
    got = points_in_rect(xy, box)
    assert got.dtype == np.int64 and got.tolist() == want and 0 in want
    assert points_in_rect(np.zeros((0, 2), np.float32), box).tolist() == []


def test_a_map_selection_exports_its_listed_lines_as_tsv():
    from elmo_explorer.views.corpus.model import (ConcordanceLine, MapSelection,
                                                  SELECTION_TSV_COLUMNS)

    hits = [_hit(1, r, float("nan")) for r in (1, 2)]
    lines = tuple(ConcordanceLine.from_hit(h, i + 1) for i, h in enumerate(hits))
    sel = MapSelection(1, np.array([11, 21, 31], np.int64), lines)
    out = sel.tsv().splitlines()
    assert out[0].split("\t") == list(SELECTION_TSV_COLUMNS)
    assert sel.n == 3 and len(out) == 3                    # the listed lines, not the count
    assert out[1].split("\t") == ["1", "1", "1", "1", "the", "bank", "of the river"]


def test_a_map_box_is_saved_with_the_view_state_and_restored_normalized():
    from elmo_explorer.views.corpus.model import MapBox, MapSelection

    m = CorpusModel(index_path="idx", map_word="bank")
    m.selection = MapSelection(2, np.array([4, 9], np.int64), rect=(-1.5, 0.25, 2.0, 3.0))
    state = m.view_state()
    assert state["box"] == {"layer": 2, "rect": [-1.5, 0.25, 2.0, 3.0], "map_word": "bank"}
    other = CorpusModel()
    assert other.restore_view_state(state) == "idx"
    assert other.pending_box == MapBox(2, (-1.5, 0.25, 2.0, 3.0), "bank")
    assert other.restore_note == "" and other.selection is None
    assert other.pending_box.fits("Bank") and not other.pending_box.fits("river")
    assert not other.pending_box.fits(None)
    # waiting for its map, the box is still what a save writes (a save before the map came)
    assert other.view_state()["box"] == state["box"]
    # any corner order; the map of every token has no word
    box = MapBox.from_json({"layer": 0, "rect": [3, 4, 1, 2], "map_word": None})
    assert box == MapBox(0, (1.0, 2.0, 3.0, 4.0), None) and box.fits(None)
    # a workspace from before boxes were saved: no box, nothing said
    old = {"index": "idx", "options": {"k": 5}}
    third = CorpusModel()
    assert third.restore_view_state(old) == "idx"
    assert third.pending_box is None and third.restore_note == "" and third.options.k == 5


@pytest.mark.parametrize("box, why", [
    ("a box", "an object was expected, found str"),
    ({"layer": -1, "rect": [0, 0, 1, 1]}, "'layer' must be a whole number 0-99, found -1"),
    ({"layer": True, "rect": [0, 0, 1, 1]}, "'layer' must be a whole number 0-99, found True"),
    ({"layer": 1, "rect": [0, 0, 1]}, "'rect' must be four finite numbers, found [0, 0, 1]"),
    ({"layer": 1, "rect": [0, 0, 1, float("nan")]}, "'rect' must be four finite numbers"),
    ({"layer": 1, "rect": [0, "0", 1, 1]}, "'rect' must be four finite numbers"),
    ({"layer": 1, "rect": [0, 0, 1, 1], "map_word": 7}, "'map_word' must be a word or null"),
])
def test_a_malformed_saved_box_is_ignored_with_a_one_line_note(box, why):
    m = CorpusModel()
    state = {"index": "idx", "options": {"k": 4},
             "query": {"word": "bank", "tokens": ["the", "bank"], "position": 1}, "box": box}
    assert m.restore_view_state(state) == "idx"                 # the rest is restored
    assert m.options.k == 4 and m.query is not None and m.query.word == "bank"
    assert m.pending_box is None
    assert m.restore_note.startswith("the saved map selection box was ignored: " + why)
    assert "\n" not in m.restore_note and len(m.restore_note) < 160
    assert "box" not in m.view_state()


def test_the_exported_map_rings_the_query_in_the_screens_colour_and_draws_the_box():
    """export.figure from values (no widget): the query's ring in the star's colour of the
    on-screen map, the box on its layer's panel and the selected occurrences ringed."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Rectangle

    from elmo_explorer.views.corpus import export
    from elmo_explorer.views.corpus.model import ConcordanceLine, MapSelection
    from elmo_explorer.views.palette import FOUND_COLOUR, SELECTED_PEN

    data = atlas.synthetic_map(600, seed=2)
    data.rows = data.rows + 1000                                  # rows are not indices
    m = CorpusModel()
    query_i = 17
    m.lines = {layer: [ConcordanceLine(layer, 1, 1.0, 0, 0, "", "w", "",
                                       int(data.rows[query_i]))] for layer in data.layers}
    xy = data.coords[1]
    rect = (float(np.quantile(xy[:, 0], 0.3)), float(np.quantile(xy[:, 1], 0.2)),
            float(np.quantile(xy[:, 0], 0.7)), float(np.quantile(xy[:, 1], 0.9)))
    idx = np.flatnonzero((xy[:, 0] >= rect[0]) & (xy[:, 0] <= rect[2])
                         & (xy[:, 1] >= rect[1]) & (xy[:, 1] <= rect[3]))
    m.selection = MapSelection(1, data.rows[idx], rect=rect)
    fig = export.figure(m, data, "map")
    yellow = to_rgba(FOUND_COLOUR)
    for ax, layer in zip(fig.axes, data.layers):
        rings = [c for c in ax.collections
                 if any(np.allclose(e, yellow) for e in c.get_edgecolors())]
        assert len(rings) == 1
        np.testing.assert_allclose(rings[0].get_offsets(), [data.coords[layer][query_i]],
                                   atol=1e-6)
        black = [c for c in ax.collections if len(c.get_offsets()) == len(idx)
                 and np.allclose(c.get_edgecolors()[0], to_rgba(SELECTED_PEN[0]))]
        assert len(black) == 1
        np.testing.assert_allclose(black[0].get_offsets(), data.coords[layer][idx], atol=1e-6)
        boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert len(boxes) == (1 if layer == 1 else 0)
    b = [p for p in fig.axes[1].patches if isinstance(p, Rectangle)][0]
    assert (b.get_x(), b.get_y(), b.get_x() + b.get_width(), b.get_y() + b.get_height()) == \
        pytest.approx(rect)
    # without a selection: the ring, no box, no selected points
    m.selection = None
    fig = export.figure(m, data, "map")
    assert not fig.axes[1].patches and len(fig.axes[1].collections) == 3


def test_the_apps_index_build_runs_in_the_models_precision(tmp_path, tiny_checkpoint):
    """The app builds with the workspace's precision (Settings ▸ Precision): bf16 where the CPU
    has bf16 units, recorded in the manifest, and the shared model stays in it."""
    import torch

    from elmo_engine import runtime
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState
    from elmo_explorer.views.corpus import jobs

    if not runtime.cpu_bf16().offered:
        pytest.skip("this CPU has no bf16 units (AMX or AVX512_BF16)")
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river .\nthe bank raised its rates .\n", "utf-8")
    folders = {}
    for precision in ("fp32", "bf16"):
        emb = Embedder(load_checkpoint(tiny_checkpoint), device="cpu", precision=precision)
        req = jobs.BuildRequest((corpus,), tmp_path / precision, str(tiny_checkpoint))
        m = jobs.build_index(req, emb, TaskState())
        assert m.complete and m.precision == precision
        assert next(emb.model.parameters()).dtype == {"fp32": torch.float32,
                                                      "bf16": torch.bfloat16}[precision]
        folders[precision] = req.folder
    a = np.load(folders["fp32"] / "vectors.L2.npy", allow_pickle=False).astype(np.float32)
    b = np.load(folders["bf16"] / "vectors.L2.npy", allow_pickle=False).astype(np.float32)
    assert not np.array_equal(a, b) and (a * b).sum(1).min() > 0.99


def test_the_senses_note_says_why_a_rare_word_has_one_sense():
    """Issue 39: a word of 6 occurrences is one cluster, and the view says why."""
    occ = tuple(Occurrence(i, 1, ("the", "bank", ".")) for i in range(6))
    one = LayerSenses(1, 1, float("nan"), (), (0,) * 6, (SenseCluster(0, 6, (0, 1, 2), ()),))
    m = CorpusModel()
    assert m.senses_note().startswith("A sense needs at least 5 occurrences")
    m.senses = SenseInduction("bank", occ, (one,), 6)
    note = m.senses_note()
    assert note.startswith("'bank' occurs 6 times: too few for two senses of at least 5")
    assert note.endswith("Sense numbers follow the occurrences from layer to layer.")


def test_the_apps_build_reads_files_as_index_does_with_the_same_options(tmp_path,
                                                                        tiny_checkpoint):
    """*Build index…* ▸ *Pretokenized* / *Split each line into sentences* are ``index
    --pretokenized`` / ``--no-split-sentences``: the app's index of a WikiText-like file read
    that way has the command's reading, sentences, tokens ("@-@" one word) and vectors."""
    from elmo_engine.cli import main
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.search import CorpusIndex
    from elmo_engine.index.store import read_manifest
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState
    from elmo_explorer.views.corpus import jobs
    from elmo_engine.index.store import Reading
    from elmo_engine.model.tokenize import Tokenization
    from elmo_explorer.views.reading import CorpusReading

    corpus = tmp_path / "wiki.txt"
    corpus.write_text("The well @-@ known bank . It lends 1 @,@ 000 dollars .\n"
                      "The river bank is steep .\n", "utf-8")
    reading = CorpusReading(pretokenized=True, split_sentences=False)
    assert reading.folder_suffix() == "-pretokenized-lines"
    assert CorpusReading.from_dict(reading.to_dict()) == reading
    assert CorpusReading.from_dict({"pretokenized": "yes", "split_sentences": False}) == \
        CorpusReading(False, False)                      # what is not a bool: the default
    emb = Embedder(load_checkpoint(tiny_checkpoint), device="cpu")
    app = jobs.build_index(jobs.BuildRequest((corpus,), tmp_path / "app", str(tiny_checkpoint),
                                             reading=reading), emb, TaskState())
    assert main(["index", str(corpus), "-o", str(tmp_path / "cli"), "--checkpoint",
                 str(tiny_checkpoint), "--device", "cpu", "--layer", "0,1,2",
                 "--pretokenized", "--no-split-sentences"]) == 0
    cli = read_manifest(tmp_path / "cli")
    assert app.reading == cli.reading == Reading(Tokenization.WHITESPACE, split_sentences=False)
    assert json.loads((tmp_path / "cli" / "index.json").read_text("utf-8"))["reading"] == {
        "tokenizer": "whitespace", "split_sentences": False, "skip_headers": True}
    assert (app.n_sentences, app.n_tokens) == (cli.n_sentences, cli.n_tokens) == (2, 19)
    index = CorpusIndex(tmp_path / "app", emb.checksum)
    assert index.sentence(0)[:3] == ["The", "well", "@-@"]
    index.close()
    for layer in (0, 1, 2):
        a = np.load(tmp_path / "app" / f"vectors.L{layer}.npy", allow_pickle=False)
        b = np.load(tmp_path / "cli" / f"vectors.L{layer}.npy", allow_pickle=False)
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), atol=1e-3)
    default = jobs.build_index(jobs.BuildRequest((corpus,), tmp_path / "typed",
                                                 str(tiny_checkpoint)), emb, TaskState())
    assert default.reading.tokenizer is Tokenization.TYPED and default.n_sentences == 3  # split


def test_the_apps_index_holds_every_layer_of_the_model(tmp_path, make_checkpoint):
    """The app built layers (0, 1, 2) whatever the model: a 3-layer model's top layer was left
    out of its index."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState
    from elmo_explorer.views.corpus import jobs

    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river .\nthe bank raised its rates .\n", "utf-8")
    for n_layers in (1, 3):
        ck = make_checkpoint(tmp_path / f"ck{n_layers}", n_layers=n_layers)
        emb = Embedder(load_checkpoint(ck), device="cpu")
        m = jobs.build_index(jobs.BuildRequest((corpus,), tmp_path / f"ix{n_layers}", str(ck)),
                             emb, TaskState())
        assert m.complete and m.layers == tuple(range(n_layers + 1))
        m = jobs.build_index(jobs.BuildRequest((corpus,), tmp_path / f"one{n_layers}", str(ck),
                                               layers=(1, 5)), emb, TaskState())
        assert m.layers == (1,)                                 # asked for, where it exists


def test_a_stopped_build_of_a_3_layer_model_resumes_with_its_own_layers(tmp_path,
                                                                        make_checkpoint):
    """A 3-layer model's build the app began with layers 0–2 (before its index held every
    layer) and stopped: *Build* again was refused as an index "of another corpus or settings";
    it resumes with the layers the build holds. *Rebuild* (force) takes every layer."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.build import new_manifest, prepare
    from elmo_engine.index.corpus import count_corpus
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState
    from elmo_explorer.views.corpus import jobs

    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river .\nthe bank raised its rates .\n", "utf-8")
    ck = make_checkpoint(tmp_path / "ck", n_layers=3)
    emb = Embedder(load_checkpoint(ck), device="cpu")
    req = jobs.BuildRequest((corpus,), tmp_path / "ix", str(ck))
    reader = jobs.read_corpus(req.corpus, req.reading)
    prepare(req.folder, new_manifest(emb.model, str(ck), count_corpus(reader, req.shard_size),
                                     (0, 1, 2), req.corpus, reader.reading(), emb.precision))
    m = jobs.build_index(req, emb, TaskState())
    assert m.complete and m.layers == (0, 1, 2)
    m = jobs.build_index(jobs.BuildRequest((corpus,), req.folder, str(ck), force=True), emb,
                         TaskState())
    assert m.complete and m.layers == (0, 1, 2, 3)


def test_the_senses_tab_tries_as_many_clusters_as_the_command(tmp_path, capsys):
    """The Senses tab tried at most 6 clusters, ``senses`` 8: a word of 8 senses (8 contexts
    of *bank*, 6 times each) got 8 clusters from the command and 6 in the app. One default."""
    import json

    from elmo_engine.cli.main import main
    from elmo_engine.index.search import CorpusIndex
    from elmo_engine.index.senses import K_MAX
    from elmo_explorer.views.corpus import jobs
    from elmo_engine.progress import TaskState
    from support import FIXTURES

    contexts = ["He sat on the bank of the river .", "She paid money into the bank today .",
                "Snow formed a deep bank by the barn .", "A bank of fog rolled in from sea .",
                "The pilot had to bank the plane left .", "You can bank on me tomorrow .",
                "The blood bank needs more donors .", "A bank of switches lined the wall ."]
    corpus = tmp_path / "eight.txt"
    corpus.write_text("\n".join(contexts * 6) + "\n", "utf-8")
    ix = tmp_path / "ix"
    ck = str(FIXTURES / "allennlp")
    assert main(["index", str(corpus), "-o", str(ix), "--checkpoint", ck, "--device", "cpu"]) == 0
    capsys.readouterr()
    assert main(["senses", str(ix), "--word", "bank", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    index = CorpusIndex(ix)
    try:
        app = jobs.induce(index, "bank", TaskState())
    finally:
        index.close()
    assert K_MAX == 8
    assert [len(set(lay.labels)) for lay in app.layers] == [8] * len(app.layers)
    assert [lay["k"] for lay in cli["layers"]] == [8] * len(app.layers)
