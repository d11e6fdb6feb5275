"""``elmo-explorer contexts`` (elmo_engine.cli.contexts) on the shared fixture model."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from elmo_engine.cli import contexts as compare_cli
from elmo_engine.analysis.contexts.compare import read_matrices_csv
from elmo_engine.errors import InputError


def parse(argv):
    parser = argparse.ArgumentParser()
    compare_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["contexts", *argv])


@pytest.fixture
def sentences(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("We sat on the bank of the river .\nShe paid money into the bank .\n"
                 "The bank of the river was muddy .\n", encoding="utf-8")
    return f


def test_contexts_command(fixtures_dir, sentences, tmp_path, capsys):
    args = parse(["--word", "bank", "--sentences", str(sentences), "--checkpoint",
                  str(fixtures_dir / "allennlp"), "--groups", "river,money,river", "--correct",
                  "--neighbours", "3", "--matrices", str(tmp_path / "m.csv"), "--vectors",
                  str(tmp_path / "v.npz"), "--neighbours-csv", str(tmp_path / "n.csv"),
                  "--json"])
    assert compare_cli.run(args) == 0
    summary = json.loads(capsys.readouterr().out)            # --json: the document alone
    assert summary["occurrences"] == 3 and len(summary["neighbours"]["layer 2"]) == 3
    # one spelling of the layers' keys (layer 0 was "layer0"), as in "views"
    assert list(summary["neighbours"]) == list(summary["views"])[:3] == [
        "layer 0", "layer 1", "layer 2"]
    assert all(set(n) == {"word", "score"} for n in summary["neighbours"]["layer 0"])
    mats = read_matrices_csv(tmp_path / "m.csv")
    m2 = mats["layer 2"]            # ordered by group: river (sentences 1, 3), then money
    assert summary["views"]["layer 2"]["within"] == pytest.approx(m2[0, 1], abs=1e-5)
    assert summary["views"]["layer 2"]["between"] == pytest.approx((m2[0, 2] + m2[1, 2]) / 2,
                                                                   abs=1e-5)
    assert summary["views"]["layer 0"]["self_similarity"] == pytest.approx(1.0, abs=1e-5)
    with np.load(tmp_path / "v.npz", allow_pickle=False) as z:
        assert z["vectors"].shape == (3, 3, 32) and list(z["group"]) == ["river", "river", "money"]
    assert len((tmp_path / "n.csv").read_text().splitlines()) == 1 + 3 * 3


def test_contexts_compares_the_views_first_occurrences_by_default(fixtures_dir, tmp_path,
                                                                  capsys, monkeypatch):
    """The app's Contexts view compares the first 300 occurrences, ``contexts`` compared them
    all (a word of 320 occurrences: other numbers); now one bound, ``--max-occurrences`` to
    change it, said on stderr. The bound is lowered to 4 here for 6 occurrences."""
    from elmo_engine.analysis.contexts import compare as cmp

    assert cmp.MAX_OCCURRENCES == 300      # the view takes it too (tests/app/test_contexts_view)
    f = tmp_path / "six.txt"
    f.write_text("".join(f"the bank {w} .\n" for w in ("one", "two", "three", "four", "five",
                                                       "six")), "utf-8")
    base = ["--word", "bank", "--sentences", str(f), "--checkpoint",
            str(fixtures_dir / "allennlp"), "--json"]
    monkeypatch.setattr(cmp, "MAX_OCCURRENCES", 4)
    assert compare_cli.run(parse(base)) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert (doc["occurrences"], doc["compared"]) == (6, 4)
    assert "compared the first 4 of 6 occurrences of 'bank'" in out.err
    assert compare_cli.run(parse(base + ["--max-occurrences", "6"])) == 0
    doc6 = json.loads(capsys.readouterr().out)
    assert (doc6["occurrences"], doc6["compared"]) == (6, 6)
    assert doc6["views"]["layer 2"]["self_similarity"] != pytest.approx(
        doc["views"]["layer 2"]["self_similarity"], abs=1e-9)
    from elmo_engine.cli.main import main

    for n, says in (("1", "must be at least 2"), ("20000", "must be at most 10000")):
        with pytest.raises(SystemExit):                  # argparse's own refusal, exit 1
            main(["contexts", *base, "--max-occurrences", n])
        err = capsys.readouterr().err
        assert "--max-occurrences" in err and says in err, err
    assert main(["contexts", *base, "--max-occurrences", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["compared"] == 2


def test_contexts_command_errors(fixtures_dir, sentences):
    args = parse(["--word", "bank", "--sentences", str(sentences), "--checkpoint",
                  str(fixtures_dir / "allennlp"), "--groups", "a,b"])
    with pytest.raises(InputError, match="2 labels for 3 occurrences"):
        compare_cli.run(args)
    args = parse(["--word", "bank", "--sentences", str(sentences), "--checkpoint",
                  str(fixtures_dir / "allennlp"), "--mix-weights", "1,x,1"])
    with pytest.raises(InputError, match="--mix-weights"):
        compare_cli.run(args)


def test_a_count_of_mix_weights_the_model_lacks_is_refused_before_the_model_loads(
        fixtures_dir, sentences, monkeypatch):
    """An attack pass: ``contexts --mix-weights 1,1,1`` on a 1-layer model embedded the
    sentences first, then said "3 mix weights given for 2 layers" (``embed`` says it first)."""
    import elmo_engine.model.checkpoint as checkpoint

    def never(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(checkpoint, "load_checkpoint", never)
    args = parse(["--word", "bank", "--sentences", str(sentences), "--checkpoint",
                  str(fixtures_dir / "allennlp"), "--mix-weights", "1,1"])
    with pytest.raises(InputError, match="2 mix weights given for 3 layers"):
        compare_cli.run(args)


def test_contexts_reference_says_its_progress_and_prints_bounded_lines(fixtures_dir, sentences,
                                                                        tmp_path, capsys):
    """Issue 39: `contexts --reference FILE` was silent for 80 s and printed whole paragraphs;
    now progress goes to stderr, a paragraph is split into sentences (the rule of `index` and
    `embed --split-sentences`), and each neighbour is a line centred on the word."""
    para = " ".join(["The long paragraph went on about the bank of the river and more ."] * 40)
    ref = tmp_path / "ref.txt"
    ref.write_text(para + "\n", encoding="utf-8")
    base = ["--word", "bank", "--sentences", str(sentences), "--checkpoint",
            str(fixtures_dir / "allennlp"), "--neighbours", "3", "--reference", str(ref),
            "--no-reference-set"]
    assert compare_cli.run(parse(base)) == 0
    out, err = capsys.readouterr()
    assert "embedding …" in err.splitlines()                       # progress, on stderr
    lines = [ln for ln in out.splitlines() if ln.startswith("   ")]
    assert len(lines) == 3 * 2 and all(len(ln) <= 100 and "[" in ln for ln in lines)
    assert max(len(ln) for ln in out.splitlines()) < 200
    assert compare_cli.run(parse(base + ["--no-split-sentences", "--json"])) == 0
    doc = json.loads(capsys.readouterr().out)
    whole = [nb["sentence"] for nb in doc["neighbours"]["layer 2"]]
    assert any(len(s) > 1000 for s in whole)             # one paragraph: one "sentence"


def test_list_options_take_the_separators_the_apps_fields_take():
    """``--mix-weights 0.2;0.3;0.5`` was refused while the app's Export vectors dialog and the
    Projection view took it."""
    from elmo_engine.cli.common import parse_floats

    for text in ("0.2,0.3,0.5", "0.2 0.3 0.5", "0.2;0.3;0.5", "0.2, 0.3; 0.5"):
        assert parse_floats(text, "--mix-weights") == [0.2, 0.3, 0.5]
    with pytest.raises(InputError, match="--mix-weights must be"):
        parse_floats("0.2,x", "--mix-weights")
