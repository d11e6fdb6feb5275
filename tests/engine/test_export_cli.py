"""``elmo-explorer export vectors|report`` end to end on a tiny checkpoint."""
from __future__ import annotations

import csv
import json
import os
import stat
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

from elmo_engine.cli.main import main
from elmo_engine.analysis.probes.experiment import LayerResult, MixResult, ProbeResult
from elmo_engine.io.workspace_file import (CheckpointRef, WorkspaceData, checkpoint_checksum,
                                           save_workspace)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = ["He sat on the bank of the river .", "She went to the bank .", "bank loans rose"]
GROUPS = [(0, 4, "river"), (1, 4, "money"), (2, 0, "money")]


@pytest.fixture
def text_file(tmp_path):
    p = tmp_path / "in.txt"
    p.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return p


def test_vectors_hdf5_and_word_selection(tmp_path, text_file, tiny_checkpoint, capsys):
    out = tmp_path / "v.hdf5"
    assert main(["export", "vectors", str(text_file), "-o", str(out), "--checkpoint",
                 str(tiny_checkpoint), "--layers", "all", "--device", "cpu"]) == 0
    with h5py.File(out, "r") as fh:
        assert fh["0"].shape == (3, 9, 32) and fh["2"].shape == (3, 3, 32)
        assert json.loads(fh["sentence_to_index"][0])["bank loans rose"] == "2"
        first = fh["1"][()]
    assert "wrote 18 vectors of 3 sentences" in capsys.readouterr().err
    sel = tmp_path / "bank.csv"
    assert main(["export", "vectors", str(text_file), "-o", str(sel), "--checkpoint", str(tiny_checkpoint),
                 "--layers", "mix", "--mix-weights", "0,0,1", "--mix-gamma", "2", "--word", "bank",
                 "--device", "cpu"]) == 0
    with open(sel, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert len(rows) == 4 and [r[:3] for r in rows[1:]] == [["0", "4", "bank"], ["1", "4", "bank"],
                                                           ["2", "0", "bank"]]
    np.testing.assert_allclose([float(x) for x in rows[2][4:]], 2 * first[2, 4], rtol=1e-5, atol=1e-6)


def test_vectors_refuses_existing_and_bad_options(tmp_path, text_file, tiny_checkpoint, capsys):
    out = tmp_path / "v.npz"
    out.write_bytes(b"old")
    args = ["export", "vectors", str(text_file), "-o", str(out), "--checkpoint", str(tiny_checkpoint)]
    assert main(args) == 1
    assert f"{out} exists; pass --force" in capsys.readouterr().err and out.read_bytes() == b"old"
    assert main(args + ["--force", "--layers", "top", "--device", "cpu"]) == 0
    with np.load(out, allow_pickle=False) as z:
        assert z["0"].shape == (9, 32)
    assert main(["export", "vectors", str(text_file), "-o", str(tmp_path / "m.npz"), "--checkpoint",
                 str(tiny_checkpoint), "--layers", "mix", "--mix-weights", "1,2"]) == 1
    assert "one weight per layer: 3 expected, got 2" in capsys.readouterr().err
    assert main(["export", "vectors", str(text_file), "-o", str(tmp_path / "w.npz"), "--checkpoint",
                 str(tiny_checkpoint), "--word", "nowhere", "--device", "cpu"]) == 1
    assert "'nowhere' does not occur" in capsys.readouterr().err
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "w.npz").exists()


def _probe_run() -> dict:
    layers = [LayerResult(k, 0.5 + k / 10, 0.4 + k / 10, 0.3) for k in range(3)]
    return ProbeResult("pos", "POS (demo)", "upos", "tiny", layers,
                       MixResult([0.2, 0.5, 0.3], 1.1, 0.7, 0.65, 0.6), {"majority": 0.2},
                       {"train": 10}, {"seed": 0}, {}).to_dict()


@pytest.mark.parametrize("offered", [True, False])
def test_export_report_computes_in_the_workspaces_precision(tmp_path, tiny_checkpoint, capsys,
                                                           monkeypatch, offered):
    """The app reopens a workspace in its saved precision (bf16 where the CPU has bf16 units)
    and reports in it; ``export report`` computed in fp32 always (5 of 7 tables differed), and
    neither report said which. Now the workspace's precision, fp32 where this machine cannot
    run it (a warning and a note), and the report's parameters name it."""
    from elmo_engine import runtime

    if offered and not runtime.cpu_bf16().offered:
        pytest.skip("this CPU has no bf16 units")
    if not offered:
        monkeypatch.setattr(runtime, "cpu_bf16", lambda: runtime.CpuBf16(None, "a CPU", "", ()))
    ws = tmp_path / "a.elmows.json"
    save_workspace(ws, WorkspaceData(
        sentences=SENTENCES,
        checkpoint=CheckpointRef(str(tiny_checkpoint), checkpoint_checksum(tiny_checkpoint),
                                 "tiny", precision="bf16"),
        selection={"sentence": 1, "token": 4, "word": "bank"}))
    out = tmp_path / "report"
    assert main(["export", "report", str(ws), "-o", str(out), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    text = "\n".join(p.read_text("utf-8") for p in out.glob("*.md"))
    want = "bf16" if offered else "fp32"
    assert f"precision | {want}" in text or f"precision: {want}" in text, text[:2000]
    if not offered:
        assert "the workspace's" in err and "running in fp32" in err
        assert "The workspace was computed in bf16" in text


def test_report_from_workspace(tmp_path, tiny_checkpoint, capsys):
    ws = tmp_path / "a.elmows.json"
    save_workspace(ws, WorkspaceData(
        sentences=SENTENCES,
        checkpoint=CheckpointRef(str(tiny_checkpoint), checkpoint_checksum(tiny_checkpoint), "tiny"),
        selection={"sentence": 1, "token": 4, "word": "bank"},
        views={"contexts": {"direction": "forward", "weights": [0, 1, 1], "layer_norm": True,
                            "groups": {"bank": [{"sentence": i, "token": t, "group": g}
                                                for i, t, g in GROUPS]}}},
        probe_runs=[_probe_run()]))
    out = tmp_path / "report"
    assert main(["export", "report", str(ws), "-o", str(out), "--device", "cpu", "--pdf"]) == 0
    assert "wrote a report with" in capsys.readouterr().err
    tables = sorted(p.name for p in (out / "tables").iterdir())
    assert tables == ["contexts_neighbours.csv", "contexts_occurrences.csv",
                      "contexts_similarity_layer0.csv",
                      "contexts_similarity_layer1.csv", "contexts_similarity_layer2.csv",
                      "contexts_similarity_mix.csv", "contexts_summary.csv", "probe_results.csv"]
    with open(out / "tables" / "contexts_summary.csv", encoding="utf-8") as fh:
        summary = list(csv.DictReader(fh))
    assert [r["view"] for r in summary] == ["layer 0", "layer 1", "layer 2", "mix"]
    assert float(summary[0]["self-similarity"]) == pytest.approx(1.0)   # layer 0: same word
    assert -1 <= float(summary[2]["self-similarity"]) < 1
    with open(out / "tables" / "probe_results.csv", encoding="utf-8") as fh:
        probe = list(csv.DictReader(fh))
    assert len(probe) == 4 and probe[1]["mix weight"] == "0.5000" and probe[3]["test"] == "0.6500"
    with open(out / "tables" / "contexts_occurrences.csv", encoding="utf-8") as fh:
        occ = list(csv.DictReader(fh))                                   # the groups are kept
    assert [r["group"] for r in occ if r["group"]] == sorted(
        [g for _s, _t, g in GROUPS], key=[g for _s, _t, g in GROUPS].index)
    assert summary[1]["p (permutation)"] != ""
    figures = sorted(p.name for p in (out / "figures").iterdir())        # one figure path
    assert figures == sorted(f"{stem}.{ext}" for stem in ("contexts_bank_heatmaps",
                                                          "contexts_bank_summary", "probe_results",
                                                          "projection_pca")
                             for ext in ("pdf", "png", "svg"))
    with open(out / "tables" / "contexts_neighbours.csv", encoding="utf-8") as fh:
        neighbours = list(csv.DictReader(fh))                            # the selected 'bank'
    assert {r["view"] for r in neighbours} == {"layer 0", "layer 1", "layer 2"}
    assert ("1", "4") not in [(r["sentence"], r["token"]) for r in neighbours]
    assert "forward halves, the occurrence in sentence 2 (token 5)" in \
        (out / "report.md").read_text(encoding="utf-8")
    for svg in ("contexts_bank_heatmaps.svg", "probe_results.svg"):
        root = ET.parse(out / "figures" / svg).getroot()                  # well-formed SVG
        text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
        assert ("occurrence" in text and "cosine similarity" in text) or (
            "mix" in text and "POS (demo)" in text)
    assert (out / "figures" / "contexts_bank_heatmaps.pdf").read_bytes()[:5] == b"%PDF-"
    assert probe[3]["mix weight"] == "—"
    # the run names its model ("tiny"), not the one loaded: the report says whose layers these are
    md = (out / "report.md").read_text(encoding="utf-8").replace("\\_", "_")   # (md escapes)
    assert "| contexts: layer norm | yes |" in md and "use_skip_connections | yes |" in md
    assert "True" not in md                                    # Python's word, not a reader's
    loaded = tiny_checkpoint.name
    assert "Probes on tiny (1 run: POS (demo))" in md and f"Probes on {loaded}" not in md
    assert f"The runs were made with tiny, not with the loaded model {loaded}" in md
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "contexts: direction" in page and "forward" in page and "0.00, 0.50, 0.50" in page
    assert "{" not in page.split("<h2>Parameters</h2>")[1].split("</table>")[0]   # readable
    assert "figures/contexts_bank_heatmaps.svg" in (out / "report.md").read_text(encoding="utf-8")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~mask              # not mkdtemp's 0700
    assert stat.S_IMODE((out / "report.html").stat().st_mode) == 0o666 & ~mask
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert main(["export", "report", str(ws), "-o", str(out)]) == 1                # exists, no --force
    assert "pass --force" in capsys.readouterr().err


def test_report_with_moved_checkpoint(tmp_path, tiny_checkpoint, capsys):
    ws = tmp_path / "a.elmows.json"
    save_workspace(ws, WorkspaceData(sentences=SENTENCES,
                                     checkpoint=CheckpointRef(str(tmp_path / "gone"), "00")))
    assert main(["export", "report", str(ws), "-o", str(tmp_path / "r")]) == 1
    assert "was not found (moved?); pass --checkpoint" in capsys.readouterr().err
    # nothing selected, no word named, no results: one line saying what is missing, exit 1
    assert main(["export", "report", str(ws), "-o", str(tmp_path / "r"), "--checkpoint",
                 str(tiny_checkpoint), "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "nothing to report" in err and "--word" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()
    assert main(["export", "report", str(ws), "-o", str(tmp_path / "r"), "--checkpoint",
                 str(tiny_checkpoint), "--device", "cpu", "--word", "bank"]) == 0
    assert (tmp_path / "r" / "tables" / "contexts_summary.csv").is_file()


def test_a_workspace_saved_at_launch_reports_the_word_it_names(tmp_path, tiny_checkpoint,
                                                               capsys):
    """Saved right after launch: nothing selected, the contexts view names "bank"."""
    ws = tmp_path / "launch.elmows.json"
    save_workspace(ws, WorkspaceData(sentences=SENTENCES,
                                     checkpoint=CheckpointRef(str(tiny_checkpoint)),
                                     views={"contexts": {"word": "bank"}}))
    assert main(["export", "report", str(ws), "-o", str(tmp_path / "r"), "--device", "cpu"]) == 0
    assert "wrote a report with 7 tables" in capsys.readouterr().err
    assert (tmp_path / "r" / "figures" / "contexts_bank_heatmaps.png").is_file()
    save_workspace(ws, WorkspaceData(sentences=SENTENCES,
                                     checkpoint=CheckpointRef(str(tiny_checkpoint)),
                                     views={"contexts": {"word": "shore"}}))
    assert main(["export", "report", str(ws), "-o", str(tmp_path / "r2"), "--device", "cpu"]) == 1
    assert "'shore' does not occur in the workspace's 3 sentences" in capsys.readouterr().err


def test_the_report_holds_the_corpus_views_concordance_and_senses(tmp_path, tiny_checkpoint,
                                                                  capsys):
    """The guide promised the Corpus view's tables in a report; no report code read its saved
    state. Now the concordance of the saved query in every indexed layer and the word's senses
    (a table and a figure), from the index the workspace names, as the view computes them; an
    index that cannot be opened under the model is a note, and the rest is written."""
    from elmo_engine.index.search import CorpusIndex, query_vectors
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    corpus = tmp_path / "c.txt"
    lines = [f"the bank of the {w} ." for w in ("river", "stream", "lake", "canal", "creek")]
    lines += [f"the {w} bank raised its rates ." for w in ("big", "old", "new", "first", "state")]
    corpus.write_text("\n".join(lines * 2) + "\n", "utf-8")
    ix = tmp_path / "ix"
    assert main(["index", str(corpus), "-o", str(ix), "--checkpoint", str(tiny_checkpoint),
                 "--device", "cpu"]) == 0
    query = {"word": "bank", "tokens": lines[0].split(), "position": 1}
    state = {"index": str(ix), "options": {"k": 3, "same_word": True, "k_max": 8},
             "query": query}
    ws = tmp_path / "a.elmows.json"
    save_workspace(ws, WorkspaceData(
        sentences=SENTENCES, views={"corpus": state},
        checkpoint=CheckpointRef(str(tiny_checkpoint), checkpoint_checksum(tiny_checkpoint),
                                 "tiny")))
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["export", "report", str(ws), "-o", str(out), "--device", "cpu"]) == 0
    with open(out / "tables" / "corpus_concordance.csv", encoding="utf-8") as fh:
        conc = list(csv.DictReader(fh))
    index = CorpusIndex(ix)
    try:
        emb = Embedder(load_checkpoint(tiny_checkpoint), device="cpu")
        vecs = query_vectors(emb, query["tokens"], 1, index.layers)
        want = [(layer, h.sentence_id, round(h.cosine, 4)) for layer in index.layers
                for h in index.search(vecs[layer], layer, 3, "bank")]
    finally:
        index.close()
    assert [(int(r["layer"]), int(r["sentence"]), float(r["cosine"])) for r in conc] == want
    assert conc[0]["word"] == "bank" and float(conc[0]["cosine"]) == pytest.approx(1, abs=2e-3)
    with open(out / "tables" / "corpus_senses.csv", encoding="utf-8") as fh:
        senses = list(csv.DictReader(fh))
    assert senses and {int(r["layer"]) for r in senses} == {1, 2}
    assert sum(int(r["occurrences"]) for r in senses if r["layer"] == "2") == 20
    assert (out / "figures" / "corpus_senses.png").is_file()
    # any word: the command searches the graphs; the app, whose Corpus view holds them
    # already, leaves a large index's any-word concordance to the view (``corpus_ann_limit``)
    from elmo_engine.analysis.report import export_report
    from elmo_engine.io.figures import FigureStyle
    from elmo_engine.io.workspace_file import load_workspace

    save_workspace(ws, WorkspaceData(
        sentences=SENTENCES, views={"corpus": {**state, "options": {"k": 3, "same_word": False}}},
        checkpoint=CheckpointRef(str(tiny_checkpoint), checkpoint_checksum(tiny_checkpoint),
                                 "tiny")))
    assert main(["export", "report", str(ws), "-o", str(out), "--device", "cpu", "--force"]) == 0
    with open(out / "tables" / "corpus_concordance.csv", encoding="utf-8") as fh:
        anyword = list(csv.DictReader(fh))
    assert len(anyword) == 3 * 2 and anyword[0]["word"] == "bank"
    app_out = tmp_path / "app-report"
    export_report(load_workspace(ws).data, str(ws), emb, app_out, FigureStyle(),
                  corpus_ann_limit=5)
    assert not (app_out / "tables" / "corpus_concordance.csv").exists()
    assert (app_out / "tables" / "corpus_senses.csv").is_file()
    assert "the any-word concordance of “bank” over 130 tokens" in (
        app_out / "report.md").read_text("utf-8")
    # an index of another model: a note, the rest of the report written
    other = tmp_path / "b.elmows.json"
    save_workspace(other, WorkspaceData(
        sentences=SENTENCES, selection={"sentence": 1, "token": 4, "word": "bank"},
        views={"corpus": state}, checkpoint=CheckpointRef("resources/demo_model")))
    out2 = tmp_path / "report2"
    assert main(["export", "report", str(other), "-o", str(out2), "--device", "cpu"]) == 0
    text = (out2 / "report.md").read_text("utf-8")
    assert "Corpus: the saved index cannot be opened" in text and "built with another model" in text
    assert not (out2 / "tables" / "corpus_concordance.csv").exists()
    assert (out2 / "tables" / "contexts_summary.csv").is_file()
