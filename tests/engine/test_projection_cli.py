"""``elmo-explorer project`` (the module's add_parser/run, driven through argparse)."""
from __future__ import annotations

import argparse
import csv

import numpy as np
import pytest

from elmo_engine.errors import InputError
from elmo_engine.cli import project as cli

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _run(argv):
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["project", *argv])
    return args.func(args)


def test_project_sentences_pca_csv_and_tensorboard(tmp_path, tiny_checkpoint, capsys):
    src = tmp_path / "s.txt"
    src.write_text("He sat on the bank.\nThe bank raised rates.\n\nA play in the park.\n", "utf-8")
    out = tmp_path / "c.csv"
    assert _run([str(src), "--checkpoint", str(tiny_checkpoint), "--method", "pca",
                 "-o", str(out), "--tensorboard", str(tmp_path / "tb"),
                 "--tensorboard-layer", "1", "--mix-weights", "1,2,1"]) == 0
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["token"] for r in rows[:6]] == ["He", "sat", "on", "the", "bank", "."]
    assert len(rows) == 6 + 5 + 6
    assert {"layer0_pca_x", "layer2_pca_y", "mix_pca_x"} <= set(rows[0])
    vec = np.loadtxt(tmp_path / "tb" / "vectors.tsv", delimiter="\t")
    assert vec.shape == (17, 32)
    printed = capsys.readouterr()
    assert "wrote" in printed.err and "wrote" not in printed.out        # a log, not a result


def test_project_word_filter_and_bad_layer(tmp_path, tiny_checkpoint):
    src = tmp_path / "s.tsv"
    src.write_text("the\t_\nbank\tNOUN\n\nbank\tNOUN\nrose\tVERB\n", "utf-8")
    out = tmp_path / "c.csv"
    assert _run([str(src), "--labelled", "--words", "bank", "--method", "pca",
                 "--checkpoint", str(tiny_checkpoint), "-o", str(out)]) == 0
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["token"], r["label"]) for r in rows] == [("bank", "NOUN"), ("bank", "NOUN")]
    with pytest.raises(InputError, match="tensorboard-layer"):
        _run([str(src), "--labelled", "--method", "pca", "--checkpoint", str(tiny_checkpoint),
              "-o", str(out), "--tensorboard", str(tmp_path / "tb"), "--tensorboard-layer", "7",
              "--force"])


def test_project_prints_every_maps_faithfulness(tmp_path, tiny_checkpoint, capsys):
    """Issue 42: T, C and kNN kept of each map on stderr and, with --json, on stdout; the
    numbers are map_faithfulness's on the layer's vectors."""
    import json

    from elmo_engine.analysis.projection import (LayerSpec, Projector, UmapParams, all_tokens,
                                                 map_faithfulness)
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    text = ["He sat on the bank of the river.", "The bank raised its rates again today.",
            "A play in the park was fun for all of us."]
    src = tmp_path / "s.txt"
    src.write_text("\n".join(text) + "\n", "utf-8")
    out = tmp_path / "c.csv"
    assert _run([str(src), "--checkpoint", str(tiny_checkpoint), "--method", "pca", "-o",
                 str(out), "--json", "--faithfulness-k", "3", "--no-layer-norm"]) == 0
    printed = capsys.readouterr()
    doc = json.loads(printed.out)
    assert [m["layer"] for m in doc["projections"]] == ["layer0", "layer1", "layer2", "mix"]
    assert "layer 1 PCA: T=" in printed.err and "(k=3, n=" in printed.err
    from elmo_engine.cli.common import read_text

    tokens = all_tokens(read_text(src, False).tokens, src.name)
    acts = Embedder(load_checkpoint(tiny_checkpoint), device="cpu").embed(tokens.sentences)
    p = Projector().pca(acts, tokens, LayerSpec.single(1), dims=UmapParams().pca_dims)
    f = map_faithfulness(acts, tokens, p, k=3)
    got = doc["projections"][1]["faithfulness"]
    assert got["k"] == 3 and got["n"] == len(tokens) == doc["tokens"]
    assert got["trustworthiness"] == pytest.approx(f.trustworthiness, abs=1e-9)
    assert got["continuity"] == pytest.approx(f.continuity, abs=1e-9)
    assert got["knn_kept"] == pytest.approx(f.knn_kept, abs=1e-9)
    with pytest.raises(InputError, match="--json prints on stdout"):
        _run([str(src), "--checkpoint", str(tiny_checkpoint), "--json", "-o", "-"])


def test_faithfulness_defaults_agree_with_the_engine():
    from elmo_engine.analysis.layers import HUBNESS_K, HUBNESS_MAX_POINTS
    from elmo_engine.analysis.layers import hubness
    from elmo_engine.analysis.projection import faithfulness

    assert (cli.FAITHFULNESS_K, cli.FAITHFULNESS_POINTS) == (
        faithfulness.FAITHFULNESS_K, faithfulness.FAITHFULNESS_MAX_POINTS)
    assert (hubness.HUBNESS_K, hubness.HUBNESS_MAX_POINTS) == (HUBNESS_K, HUBNESS_MAX_POINTS)
