"""The one CLI (issue 16, item 5): the conventions every subcommand shares.

Typed text tokenized (``--pretokenized`` splits on whitespace), ``--device auto``, existing
outputs refused without ``--force`` naming the file, results on stdout and logs on stderr,
blank lines skipped and counted, ``info`` readable and ``--json``, an absent word exits 1 with a
did-you-mean, ``export vectors … NAME.tsv`` writes files, and the neighbours are the app's.
"""
from __future__ import annotations

import csv
import json
import os
import stat

import h5py
import pytest

from elmo_engine.cli.common import suggestions
from elmo_engine.cli.main import build_parser, main
from elmo_engine.io.datasets.text_input import read_text_input

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TEXT = "He sat on the bank of the river.\n\nShe went to the bank, didn't she?\n\n"


@pytest.fixture
def text_file(tmp_path):
    p = tmp_path / "in.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


# ---- the parsers (the options every command shares: test_cli_convention.py) ----------------
def test_pretokenized_sets_the_whitespace_tokenizer_of_the_lm_commands():
    args = build_parser().parse_args(["eval-lm", "t.txt", "--pretokenized"])
    assert args.tokenize == "whitespace"
    args = build_parser().parse_args(["train-lm", "c.txt", "--dev", "d.txt", "--out", "o"])
    assert args.tokenize == "tokenize" and args.device == "auto"


# ---- the one reader ------------------------------------------------------------------------
def test_reader_tokenizes_skips_and_counts_blank_lines(text_file):
    t = read_text_input(text_file)
    assert t.tokens[0][-2:] == ["river", "."] and "," in t.tokens[1]
    assert t.lines == [1, 3] and t.blank == [2, 4] and t.groups is None
    assert t.blank_note() == "skipped 2 blank lines (lines 2, 4) of in.txt"
    p = read_text_input(text_file, pretokenized=True)
    assert p.tokens[0][-1] == "river." and p.tokens[1][-2:] == ["didn't", "she?"]


def test_reader_accepts_group_tab_sentence(tmp_path):
    f = tmp_path / "g.tsv"
    f.write_text("# a comment\nriver\tThe bank of the river.\n\nmoney\tThe bank lends.\n",
                 encoding="utf-8")
    t = read_text_input(f)
    assert t.groups == ["river", "money"] and t.lines == [2, 4] and t.blank == [3]
    assert t.tokens[1] == ["The", "bank", "lends", "."]
    plain = tmp_path / "p.txt"                   # a TAB on some lines only: a plain file
    plain.write_text("a\tb c\nd e\n", encoding="utf-8")
    assert read_text_input(plain).tokens == [["a", "b", "c"], ["d", "e"]]
    bad = tmp_path / "b.tsv"
    bad.write_text("\tno group\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"b\.tsv:1: empty group"):
        read_text_input(bad)


def test_suggestions_case_first_then_near_spellings():
    vocab = "the bank of a river the banks Bank".split()
    assert suggestions("BANK", vocab)[:2] == ["bank", "Bank"]
    assert suggestions("bnak", vocab)[0] == "bank"
    assert suggestions("zebra", vocab) == []


# ---- end to end ----------------------------------------------------------------------------
def test_embed_tokenizes_by_default_and_skips_blank_lines(tmp_path, text_file, tiny_checkpoint,
                                                          capsys):
    out = tmp_path / "o.hdf5"
    assert main(["embed", str(text_file), "-o", str(out), "--checkpoint", str(tiny_checkpoint)]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and "skipped 2 blank lines (lines 2, 4)" in cap.err
    with h5py.File(out, "r") as fh:
        index = json.loads(fh["sentence_to_index"][0])
        assert index == {"He sat on the bank of the river .": "0",
                         "She went to the bank , did n't she ?": "1"}
        assert fh["1"].shape[1] == 10
    assert main(["embed", str(text_file), "-o", str(out), "--checkpoint", str(tiny_checkpoint)]) == 1
    assert f"{out} exists; pass --force to overwrite it" in capsys.readouterr().err
    assert main(["embed", str(text_file), "-o", str(out), "--checkpoint", str(tiny_checkpoint),
                 "--pretokenized", "--force"]) == 0
    with h5py.File(out, "r") as fh:
        assert "She went to the bank, didn't she?" in json.loads(fh["sentence_to_index"][0])


def test_existing_outputs_are_refused_naming_the_file(tmp_path, text_file, tiny_checkpoint,
                                                      capsys):
    old = tmp_path / "old.json"
    old.write_text("keep", encoding="utf-8")
    ck = ["--checkpoint", str(tiny_checkpoint)]
    cases = [["contexts", "--word", "bank", "--sentences", str(text_file), "--json", "-o", str(old)],
             ["project", str(text_file), "-o", str(old), "--method", "pca"],
             ["layers", str(text_file), "--json", "-o", str(old)],
             ["probe", "--task", "tsv", "--train", str(text_file), "--out", str(old)],
             ["export", "vectors", str(text_file), "-o", str(old), "--format", "csv"]]
    for argv in cases:
        assert main(argv + ck) == 1, argv
        err = capsys.readouterr().err
        assert f"{old} exists; pass --force to overwrite it" in err, (argv, err)
        assert old.read_text(encoding="utf-8") == "keep"
    model = tmp_path / "model"
    model.mkdir()
    (model / "options.json").write_text("{}", encoding="utf-8")
    assert main(["train-lm", str(text_file), "--dev", str(text_file), "--out", str(model)]) == 1
    assert f"{model / 'options.json'} exists; pass --resume" in capsys.readouterr().err


def test_absent_word_exits_1_with_did_you_mean(tmp_path, text_file, tiny_checkpoint, capsys):
    ck = ["--checkpoint", str(tiny_checkpoint)]
    assert main(["contexts", "--word", "Bank", "--sentences", str(text_file)] + ck) == 1
    cap = capsys.readouterr()
    assert "'Bank' does not occur in the 2 sentences; did you mean 'bank'?" in cap.err
    assert "--ignore-case" in cap.err and cap.out == ""
    assert main(["contexts", "--word", "Bank", "--ignore-case", "--sentences", str(text_file)]
                + ck) == 0
    assert "'Bank': 2 occurrences" in capsys.readouterr().out
    assert main(["export", "vectors", str(text_file), "-o", str(tmp_path / "v.npz"), "--word", "rivr"]
                + ck) == 1
    assert "did you mean 'river'?" in capsys.readouterr().err
    assert main(["project", str(text_file), "-o", str(tmp_path / "c.csv"), "--words",
                 "bank,shee"] + ck) == 1
    assert "'shee' does not occur in the sentences; did you mean 'She'?" in \
        capsys.readouterr().err
    assert not (tmp_path / "v.npz").exists() and not (tmp_path / "c.csv").exists()


def test_results_on_stdout_logs_on_stderr(tmp_path, text_file, tiny_checkpoint, capsys):
    ck = ["--checkpoint", str(tiny_checkpoint)]
    out = tmp_path / "c.csv"
    assert main(["project", str(text_file), "-o", str(out), "--method", "pca"] + ck) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and f"wrote {out}" in cap.err and out.is_file()
    tsv = tmp_path / "pos.tsv"
    tsv.write_text("".join(f"{w}\t{t}\n" + ("\n" if w == "." else "") for w, t in
                           [("the", "DET"), ("bank", "NOUN"), ("rose", "VERB"), (".", "PUNCT")]
                           * 6), encoding="utf-8")
    res = tmp_path / "probe.json"
    assert main(["probe", "--task", "tsv", "--train", str(tsv), "--test", str(tsv), "--out",
                 str(res), "--epochs", "2", "--device", "cpu"] + ck) == 0
    cap = capsys.readouterr()
    assert " layer " in cap.out and "mix weights" in cap.out and f"wrote {res}" in cap.err
    assert "wrote" not in cap.out


def test_info_says_odd_shapes_in_words(tiny_checkpoint, capsys):
    """An attack pass on odd shapes: "1 layers", "1 widths", "clips cell None / proj None",
    and a projection (with its clip) printed for a model without one (P = D)."""
    from elmo_engine.cli.info import format_info
    from elmo_engine.model.header import read_checkpoint_info

    d = read_checkpoint_info(tiny_checkpoint).describe()
    o = d["options"]
    o.update(n_layers=1, filters=[[2, 8]], cell_clip=None, proj_clip=None, n_highway=0)
    text = format_info(d)
    assert "char CNN     1 width (2×8) = 8 filters" in text and "highway      0 layers" in text
    assert "biLSTM       1 layer, cell 32, projection 16, cell clip none, projection clip none" \
        in text
    o.update(projection_dim=32, cell_clip=3.0, proj_clip=3.0, filters=[[1, 1]])
    text = format_info(d)
    assert "no projection (P = D = 32), cell clip 3.0, skip" in text and "= 1 filter," in text


def test_info_readable_and_json(tiny_checkpoint, capsys):
    assert main(["info", "--checkpoint", str(tiny_checkpoint)]) == 0
    text = capsys.readouterr().out
    assert "architecture" in text and "biLSTM       2 layers, cell 32, projection 16" in text
    assert "output       3 layers (0 = token layer) × 32 dims" in text
    assert not text.lstrip().startswith("{")
    assert main(["info", "--checkpoint", str(tiny_checkpoint), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["options"]["lstm_dim"] == 32 and d["parameter_counts"]["total"] > 0


def test_export_vectors_to_a_tsv_name_writes_files(tmp_path, text_file, tiny_checkpoint, capsys):
    ck = ["--checkpoint", str(tiny_checkpoint)]
    out = tmp_path / "vec.tsv"
    assert main(["export", "vectors", str(text_file), "-o", str(out), "--format", "tsv", "--layers",
                 "top", "--word", "bank"] + ck) == 0
    assert out.is_file() and (tmp_path / "vec.metadata.tsv").is_file()
    rows = out.read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 and len(rows[0].split("\t")) == 32
    meta = (tmp_path / "vec.metadata.tsv").read_text(encoding="utf-8").splitlines()
    assert meta[0] == "word\tsentence\ttoken\tcontext" and meta[1].startswith("bank\t0\t4\t")
    assert main(["export", "vectors", str(text_file), "-o", str(out), "--layers", "top"] + ck) == 1
    assert f"{out} exists" in capsys.readouterr().err
    assert main(["export", "vectors", str(text_file), "-o", str(out), "--layers", "all", "--force"]
                + ck) == 0
    assert sorted(p.name for p in tmp_path.glob("vec.*")) == [
        "vec.layer0.tsv", "vec.layer1.tsv", "vec.layer2.tsv", "vec.metadata.tsv", "vec.tsv"]
    folder = tmp_path / "projector"
    old = os.umask(0o022)
    try:
        assert main(["export", "vectors", str(text_file), "-o", str(folder), "--layers", "top"] + ck) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "vectors.tsv").stat().st_mode) == 0o644
    assert not list(tmp_path.glob(".*part*"))


def test_contexts_reads_groups_and_neighbours_match_the_apps(tmp_path, tiny_checkpoint, capsys):
    """The CLI's index is the app's: the sentences, then the reference, and layer 0's known
    words include the vocabulary file (here the demo model's vocab.txt, as in the app)."""
    from elmo_engine.analysis.contexts.neighbour_corpus import (build_index, read_vocabulary,
                                                       vocabulary_file)
    from elmo_engine.analysis.contexts.neighbours import neighbour_table
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    f = tmp_path / "g.tsv"
    f.write_text("river\tHe sat on the bank of the river.\nriver\tThe river bank was muddy.\n"
                 "money\tShe went to the bank to borrow money.\nmoney\tThe bank raised rates.\n",
                 encoding="utf-8")
    nb_csv = tmp_path / "nb.csv"
    js = tmp_path / "s.json"
    assert main(["contexts", "--word", "bank", "--sentences", str(f), "--neighbours", "4",
                 "--neighbours-csv", str(nb_csv), "--json", "-o", str(js), "--device", "cpu",
                 "--checkpoint", str(tiny_checkpoint)]) == 0
    assert capsys.readouterr().out == ""                      # -o FILE: the results there
    doc = json.loads(js.read_text(encoding="utf-8"))
    views = doc["views"]
    assert all(v["within"] is not None and v["between"] is not None for v in views.values())
    # the app's computation (the contexts controller calls the same engine functions)
    model = load_checkpoint(tiny_checkpoint)
    vocab = vocabulary_file(model.info.options_path)
    assert vocab is not None
    emb = Embedder(model, device="cpu")
    tokens = read_text_input(f).tokens
    from elmo_engine.io.datasets.reference_set import REFERENCE_SET_SENTENCES, reference_set_corpus

    in_set = reference_set_corpus("bank", REFERENCE_SET_SENTENCES)     # the view's default
    index = build_index(emb, tokens + in_set, read_vocabulary(vocab))
    vec = emb.embed(tokens)[0][:, 4]
    table = neighbour_table(index, vec, "bank", 4, "both", [(0, 4)])
    with open(nb_csv, encoding="utf-8", newline="") as fh:
        got = list(csv.reader(fh))
    expected = [[str(c) for c in r] for r in table.csv_rows(index)]
    assert got[0][:4] == ["view", "rank", "score", "word"] and len(got) == len(expected) + 1
    for g, e in zip(got[1:], expected):
        assert g[:2] + g[3:] == e[:2] + e[3:]                   # the same neighbours, in order
        assert abs(float(g[2]) - float(e[2])) < 1e-5
    sentence_words = {t for s in tokens for t in s}
    assert any(w not in sentence_words for w, _ in table.words)   # the vocabulary was used
    assert [(n["word"], n["score"]) for n in doc["neighbours"]["layer 0"]] == [
        (w, round(s, 6)) for w, s in table.words]

