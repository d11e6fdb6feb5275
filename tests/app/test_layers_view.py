"""The Layers view on tiny random checkpoints: its numbers are the engine's, a comparison gives
the cross matrix, cancel keeps the previous result, exports are valid files, state round-trips."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.shell.main import main
from elmo_explorer.views.layers.controller import LayersPanel
from elmo_explorer.views.layers.model import (RECORDED_SENTENCES, read_recorded,
                                               valid_result)
from elmo_engine.analysis.layers.cka import cka_matrix, cross_cka
from elmo_engine.analysis.layers.contextuality import contextuality
from elmo_engine.analysis.layers.sample import read_sample

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def corpus(tmp_path, layers_sentences):
    f = tmp_path / "corpus.txt"
    f.write_text("\n".join(layers_sentences * 3) + "\n", encoding="utf-8")
    return f


@pytest.fixture
def panel(qtbot, ws, corpus, app_settings_dir):
    p = LayersPanel(ws)
    qtbot.addWidget(p)
    p._on_model()                       # the model was loaded before the panel existed
    p.set_corpus(str(corpus))
    p.view.sentences_box.setValue(1000)
    return p


def _run(qtbot, panel, fn=None):
    with qtbot.waitSignal(panel.results_changed, timeout=60000):
        (fn or panel.run)()
    qtbot.waitUntil(panel.is_ready, timeout=10000)


def _engine_arrays(checkpoint, corpus):
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    tokens = read_sample(corpus).tokens
    return tokens, Embedder(load_checkpoint(checkpoint), device="cpu").embed(tokens)


def test_numbers_equal_the_engines(qtbot, panel, tiny_checkpoint, corpus):
    assert panel.model.result is None and panel.is_ready()   # nothing runs by itself
    _run(qtbot, panel)
    tokens, arrays = _engine_arrays(tiny_checkpoint, corpus)
    ref = contextuality(arrays, tokens, seed=0)
    res = panel.model.result
    assert res["corpus"]["sentences"] == 24 and res["contextuality"]["words"] == len(ref.words)
    for entry in res["contextuality"]["layers"]:
        for d, m in entry["directions"].items():
            row = ref.row(entry["layer"], d)
            for key in ("self_similarity", "intra_sentence_similarity",
                        "max_explainable_variance"):
                want = getattr(row, key)
                assert m[key]["value"] == pytest.approx(want.value, abs=1e-6)
                assert m[key]["baseline"] == pytest.approx(want.baseline, abs=1e-6)
    # the drawn curves are those numbers: layer 2, forward self-similarity and its baseline
    plot = panel.view.curve_plots[0]
    items = {it.name(): it for it in plot.listDataItems()}
    x, y = items["forward"].getData()
    _, b = items["forward: baseline"].getData()
    assert list(x) == [1, 2]
    assert y[1] == pytest.approx(ref.row(2, "forward").self_similarity.value, abs=1e-6)
    assert b[1] == pytest.approx(ref.row(2, "forward").self_similarity.baseline, abs=1e-6)
    # adjusted: value - baseline
    panel.view.adjusted_box.setChecked(True)
    items = {it.name(): it for it in plot.listDataItems()}
    assert items["forward"].getData()[1][1] == pytest.approx(
        ref.row(2, "forward").self_similarity.adjusted, abs=1e-6)
    # CKA: the engine's matrix, symmetric with ones on the diagonal, drawn with its values
    want = cka_matrix(np.concatenate(arrays, axis=1))
    got = np.array(res["cka"]["matrix"])
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got, got.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(got), 1.0)
    np.testing.assert_allclose(panel.view.cka_matrix, got)
    assert len(panel.view.cka_texts) == 9 and panel.view.cka_texts[1].toPlainText() == f"{got[0, 1]:.2f}"
    # a second Run with the same settings comes from the cache, at once
    shown = panel.model.result
    assert panel.run() is None and panel.model.result is shown


def test_compare_with_checkpoint_gives_the_cross_matrix(qtbot, panel, tiny_checkpoint, corpus,
                                                        tmp_path, make_checkpoint):
    other = make_checkpoint(tmp_path / "b", seed=3, n_layers=1)      # 2 output layers
    _run(qtbot, panel, lambda: panel.compare_with(str(other)))
    cmp = panel.model.compare
    m = np.array(cmp["cka"]["matrix"])
    assert m.shape == (3, 2) and np.array(cmp["cka_self"]["matrix"]).shape == (2, 2)
    tokens, arrays = _engine_arrays(tiny_checkpoint, corpus)
    _, arrays_b = _engine_arrays(other, corpus)
    want = cross_cka(np.concatenate(arrays, axis=1), np.concatenate(arrays_b, axis=1))
    np.testing.assert_allclose(m, want, atol=1e-6)
    assert panel.view.cka_matrix.shape == (3, 2) and len(panel.view.cka_texts) == 6
    assert panel.model.result is not None                 # A's own analysis came with it
    assert panel.figure("cka") is not None


def test_cancel_leaves_the_previous_result(qtbot, panel, ws, tmp_path, layers_sentences):
    _run(qtbot, panel)
    before = panel.model.result
    big = tmp_path / "big.txt"
    big.write_text("\n".join(layers_sentences * 400) + "\n", encoding="utf-8")
    panel.set_corpus(str(big))
    panel.view.full_box.setChecked(True)
    job = panel.run()
    assert job and not panel.is_ready()
    qtbot.waitUntil(lambda: ws.worker.current_job() is not None, timeout=10000)
    panel.cancel()
    qtbot.waitUntil(panel.is_ready, timeout=30000)
    assert panel.model.result is before
    assert "Cancelled" in panel.view.status.text()
    np.testing.assert_allclose(panel.view.cka_matrix, np.array(before["cka"]["matrix"]))


def test_a_corpus_too_small_for_cka_is_the_commands_line_before_embedding(qtbot, panel,
                                                                          tmp_path, capsys):
    """The view said the engine's "CKA needs at least 4 tokens for the unbiased estimator; got
    3" (no file, after embedding); ``layers`` names the file first. Now the same line."""
    from elmo_engine.cli.main import main as cli_main

    tiny = tmp_path / "tiny3.txt"
    tiny.write_text("a b c\n", encoding="utf-8")
    panel.set_corpus(str(tiny))
    panel.run()
    qtbot.waitUntil(panel.is_ready, timeout=30000)
    said = panel.view.status.text()
    assert "tiny3.txt: 3 token(s) to analyse; CKA between layers needs at least 4" in said
    assert cli_main(["layers", str(tiny), "--checkpoint", str(panel.ws.model_spec.path)]) == 1
    assert "tiny3.txt: 3 token(s) to analyse; CKA between layers needs at least 4" in \
        capsys.readouterr().err


def test_exports_are_valid_files(qtbot, panel, tmp_path):
    _run(qtbot, panel)
    panel.view.mdl_sentences_box.setValue(40)
    _run(qtbot, panel, lambda: panel.run_mdl("demo-pos"))
    mdl = panel.model.mdl["demo-pos"]
    assert mdl["sentences"] == 40 and len(mdl["layers"]) == 3
    assert panel.view.mdl_table.rowCount() == 4                       # 3 layers + the mix
    assert panel.view.mdl_table.item(0, 2).text() == f"{mdl['layers'][0]['online_codelength_bits'] / 1000:.2f}"
    magic = {"png": b"\x89PNG\r\n\x1a\n", "svg": b"<?xml", "pdf": b"%PDF"}
    for kind in ("contextuality", "cka", "mdl"):
        for ext, head in magic.items():
            out = tmp_path / f"{kind}.{ext}"
            assert panel.export_figure(kind, out) == [out]
            data = out.read_bytes()
            assert data.startswith(head) and len(data) > 2000
            if ext == "svg":
                assert b"<svg" in data
    panel.export_json(tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert valid_result(doc["result"]) and "demo-pos" in doc["mdl"]


def test_view_state_and_settings_round_trip(qtbot, panel, ws, corpus):
    _run(qtbot, panel)
    panel.view.adjusted_box.setChecked(True)
    state = json.loads(json.dumps(panel.view_state()))
    other = LayersPanel(ws)
    qtbot.addWidget(other)
    # the remembered settings (QSettings) come back in a new view
    assert other.model.settings.corpus == str(corpus) and other.view.adjusted_box.isChecked()
    panel.view.sentences_box.setValue(1250)             # a sample size alone: remembered too
    third = LayersPanel(ws)
    qtbot.addWidget(third)
    assert third.view.sentences_box.value() == 1250
    other.restore_view_state(state)
    assert other.model.result == panel.model.result
    np.testing.assert_allclose(other.view.cka_matrix, panel.view.cka_matrix)
    other.restore_view_state({"settings": {"sentences": "many"}, "result": {"model": 3}})
    assert other.model.settings.sentences == 1000                       # invalid parts ignored


def test_recorded_result_is_shown_for_its_model_only(qtbot, ws, app_settings_dir):
    from elmo_engine.resources import HERE

    rec = read_recorded(HERE / "layers_recorded.json")
    assert rec is not None and rec["recorded"].startswith("elmo-explorer layers ")
    assert rec["corpus"]["max_sentences"] == RECORDED_SENTENCES
    m = np.array(rec["cka"]["matrix"])
    np.testing.assert_allclose(np.diag(m), 1.0)
    np.testing.assert_allclose(m, m.T, atol=1e-12)
    panel = LayersPanel(ws)
    qtbot.addWidget(panel)
    panel._on_model()
    assert panel.model.result is None                # recorded with another model: not shown
    panel.recorded = dict(rec, model=dict(rec["model"], checksum=ws.embedder.checksum))
    panel._on_model()
    assert panel.model.result is panel.recorded and "recorded" in panel.view.summary.text()
    assert panel.is_ready()


def test_screenshot_of_the_layers_view(qtbot, tmp_path, tiny_checkpoint, monkeypatch):
    import elmo_explorer.shell.views

    monkeypatch.setattr(elmo_explorer.shell.views, "VIEWS", ("probes", "layers"))
    out = tmp_path / "layers.png"
    assert main(["--screenshot", str(out), "--checkpoint", str(tiny_checkpoint), "--view",
                 "layers", "--size", "900x600", "--settings-dir", str(tmp_path / "s")]) == 0
    assert out.stat().st_size > 10_000


def test_the_recorded_command_is_documented(repo_root):
    from elmo_explorer.views.layers.model import RECORDED_COMMAND

    assert RECORDED_COMMAND in (repo_root / "docs" / "guide" / "layers.md").read_text(encoding="utf-8")
    assert RECORDED_COMMAND in (repo_root / "README.md").read_text(encoding="utf-8")


def test_progress_states_the_count_once(panel):
    """Issue 39: the progress line read "embedding corpus (256/1000 sentences) (256/1000)"."""
    panel._on_progress(256, 1000, "embedding corpus (256/1000 sentences)")
    assert panel.view.status.text() == "embedding corpus (256/1000 sentences)"
    panel._on_progress(3, 12, "contextuality (sentences)")
    assert panel.view.status.text() == "contextuality (sentences) (3/12)"


def test_hubness_per_layer_is_the_engines_and_the_clis(qtbot, panel, tiny_checkpoint, corpus,
                                                       tmp_path, capsys):
    """Issue 42: the hubness plot and the hubs' table show the engine's k-occurrence skew and
    top hubs; `elmo-explorer layers --json` on the same corpus gives the same numbers; the
    figure and the TSV export."""
    from elmo_engine.analysis.layers.hubness import k_occurrence, skewness
    from elmo_engine.cli import main as cli_main

    _run(qtbot, panel)
    h = panel.model.result["hubness"]
    tokens, arrays = _engine_arrays(tiny_checkpoint, corpus)
    stacked = np.concatenate(arrays, axis=1)
    assert (h["k"], h["n"]) == (10, stacked.shape[1])
    for e in h["layers"]:
        counts = k_occurrence(stacked[e["layer"]], 10)
        assert e["skewness"] == pytest.approx(skewness(counts), abs=1e-9)
        assert e["hubs"][0]["count"] == counts.max()
    x, y = panel.view.hub_plot.listDataItems()[0].getData()
    assert list(x) == [0, 1, 2]
    np.testing.assert_allclose(y, [e["skewness"] for e in h["layers"]])
    table = panel.view.hub_table
    assert table.rowCount() == sum(len(e["hubs"]) for e in h["layers"])
    top = h["layers"][2]["hubs"][0]
    row = [r for r in range(table.rowCount()) if table.item(r, 0).text() == "2"][0]
    assert [table.item(row, c).text() for c in range(4)] == [
        "2", f"{h['layers'][2]['skewness']:.2f}", str(top["count"]), top["token"]]
    assert not panel.view.hub_hint.isVisible()
    out = tmp_path / "l.json"
    assert cli_main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--json",
                     "-o", str(out), "--device", "cpu"]) == 0
    capsys.readouterr()
    cli = json.loads(out.read_text(encoding="utf-8"))["hubness"]
    assert (cli["k"], cli["n"], len(cli["layers"])) == (h["k"], h["n"], 3)
    for a, b in zip(cli["layers"], h["layers"]):
        assert a["skewness"] == pytest.approx(b["skewness"], abs=1e-9)
        assert (a["hubs"], a["distribution"]) == (b["hubs"], b["distribution"])
    assert panel.export_figure("hubness", tmp_path / "h.png")[0].read_bytes()[:4] == b"\x89PNG"
    from elmo_explorer.views.layers import export

    lines = export.write_hubs(panel.model, tmp_path / "h.tsv").read_text("utf-8").splitlines()
    assert lines[0].startswith("layer\tskewness") and len(lines) == 1 + table.rowCount()


def test_the_recorded_command_runs_from_the_repository_root(repo_root, monkeypatch):
    """Issue 39: every README command runs from a fresh clone. The recorded command's output is
    not refused (it once named resources/, which no command writes) and its inputs exist."""
    import shlex

    from elmo_engine.cli.main import build_parser
    from elmo_engine.cli.outputs import guard_outputs
    from elmo_explorer.views.layers.model import RECORDED_COMMAND

    monkeypatch.chdir(repo_root)
    argv = shlex.split(RECORDED_COMMAND)[1:]
    args = build_parser([argv[0]]).parse_args(argv)
    assert (repo_root / args.corpus).is_file() and (repo_root / args.checkpoint).is_dir()
    guard_outputs(args)                                 # raises InputError when refused


def test_pretokenized_and_grouped_corpora_read_as_the_command_reads_them(qtbot, panel, ws,
                                                                         tmp_path):
    """The view reads its corpus with the command's reader (``read_sample``): *pretokenized*
    splits a corpus of the user's on spaces only (``layers --pretokenized``), a grouped
    ``group<TAB>sentence`` file gives its sentences without the groups, and the result says
    which tokenization made it; the switch is off for the reference corpus and is remembered."""
    wiki = tmp_path / "wiki.txt"
    lines = [f"The well @-@ known zebra number {i} ran 1 @,@ 000 miles ." for i in range(12)]
    wiki.write_text("\n".join(lines) + "\n", encoding="utf-8")
    panel.set_corpus(str(wiki))
    box = panel.view.pretokenized_box
    assert box.isEnabled() and not box.isChecked()
    _run(qtbot, panel)
    typed = panel.model.result["corpus"]
    assert typed["tokenization"] == "tokenize" and typed["tokens"] == 12 * 17
    box.setChecked(True)
    _run(qtbot, panel)                            # another key: computed again, not the cache
    split = panel.model.result["corpus"]
    assert split["tokenization"] == "whitespace" and split["tokens"] == 12 * 13
    assert split["tokens"] == read_sample(wiki, pretokenized=True).n_tokens
    assert panel.model.settings.pretokenized
    other = LayersPanel(ws)                       # remembered for the next view
    qtbot.addWidget(other)
    assert other.model.settings.pretokenized and other.view.pretokenized_box.isChecked()
    # a grouped file: the groups are not words (the view read the whole line before)
    grouped = tmp_path / "grouped.txt"
    grouped.write_text("".join(f"g{i % 3}\t{s}\n" for i, s in enumerate(lines)), encoding="utf-8")
    panel.set_corpus(str(grouped))
    box.setChecked(False)
    _run(qtbot, panel)
    assert panel.model.result["corpus"]["tokens"] == typed["tokens"]
    assert panel.model.result["corpus"]["sentences_in_file"] == 12
    panel.set_corpus("")                          # the reference corpus: the switch is off
    assert not box.isEnabled() and not panel.model.settings.split_on_spaces
    # a workspace saved before the switch: its corpus tokenized, whatever this session chose
    panel.set_corpus(str(wiki))
    box.setChecked(True)
    panel.restore_view_state({"settings": {"corpus": str(wiki), "sentences": 1000}})
    assert not panel.model.settings.pretokenized and not box.isChecked()
