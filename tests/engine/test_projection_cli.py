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
