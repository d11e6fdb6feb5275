"""One name for each way of splitting a sentence, in every file that records it
(:class:`elmo_engine.model.tokenize.Tokenization`): ``"tokenize"`` (typed text) and
``"whitespace"`` (pretokenized). Workspaces and ``layers --json`` always said so; a corpus index's
manifest, a training run's config and ``train-lm``/``eval-lm --tokenize`` said ``"regex"`` for
typed text. They now write ``"tokenize"``; ``"regex"`` is still read, so an index or a training
run saved before resumes, and old scripts keep working."""
from __future__ import annotations

import json

import pytest

from support import FIXTURES, REPO
from elmo_engine.cli.main import build_parser, main
from elmo_engine.errors import InputError
from elmo_engine.index.store import MANIFEST, Reading, read_manifest
from elmo_engine.io.datasets.corpus_text import read_sentences
from elmo_engine.model.tokenize import TOKENIZATIONS, Tokenization, sentence_tokens
from elmo_engine.train.config import TrainConfig

TINY = FIXTURES / "allennlp"
CORPUS = REPO / "resources" / "reference_corpus" / "sentences.txt"
TYPED = "The bank didn't lend $1,000 (the U.S. rate)."


def test_the_names_and_the_older_one():
    assert TOKENIZATIONS == ("tokenize", "whitespace")
    assert Tokenization.parse("tokenize") is Tokenization.parse("regex") is Tokenization.TYPED
    assert Tokenization.parse("whitespace") is Tokenization.WHITESPACE
    assert Tokenization.parse(Tokenization.WHITESPACE) is Tokenization.WHITESPACE
    assert Tokenization.of(True) is Tokenization.WHITESPACE and Tokenization.of(False) == "tokenize"
    for bad in ("Regex", "spaces", "", None, 1):
        with pytest.raises(ValueError, match="must be one of tokenize, whitespace"):
            Tokenization.parse(bad)
    # written as its name: JSON, f-strings, str()
    assert json.dumps({"t": Tokenization.TYPED}) == '{"t": "tokenize"}'
    assert f"{Tokenization.WHITESPACE}" == str(Tokenization.WHITESPACE) == "whitespace"


def test_every_reader_splits_alike_under_either_name(tmp_path):
    typed = ["The", "bank", "did", "n't", "lend", "$", "1,000", "(", "the", "U.S.", "rate", ")",
             "."]
    assert sentence_tokens(TYPED) == sentence_tokens(TYPED, "regex") == typed
    assert sentence_tokens(TYPED, "whitespace") == TYPED.split()
    f = tmp_path / "c.txt"
    f.write_text(TYPED + "\n", "utf-8")
    assert read_sentences(f, "regex") == read_sentences(f, "tokenize") == [typed]
    assert read_sentences(f, Tokenization.WHITESPACE) == [TYPED.split()]
    # a corpus's pretokenized line is split on whitespace only, as before the one name (so an
    # index or a training run of such a file keeps its identity); a typed one is tokenized
    f.write_text("a\u200bb c\x0bd (e)\n", "utf-8")
    assert read_sentences(f, "whitespace", sentences=False) == [["a\u200bb", "c", "d", "(e)"]]
    assert read_sentences(f, "tokenize", sentences=False) == [["a", "b", "c", "d", "(", "e", ")"]]
    with pytest.raises(InputError, match="tokenization must be one of tokenize, whitespace"):
        read_sentences(f, "spaces")


def test_the_lm_commands_take_the_names_and_the_older_one(capsys):
    parser = build_parser()
    base = ["train-lm", "c.txt", "--dev", "d.txt", "--out", "o"]
    assert parser.parse_args(base).tokenize is Tokenization.TYPED
    assert parser.parse_args([*base, "--tokenize", "regex"]).tokenize is Tokenization.TYPED
    assert parser.parse_args([*base, "--tokenize", "whitespace"]).tokenize is Tokenization.WHITESPACE
    assert parser.parse_args([*base, "--tokenize"]).tokenize is Tokenization.TYPED   # as elsewhere
    assert parser.parse_args(["eval-lm", "t.txt", "--tokenize", "tokenize"]).tokenize == "tokenize"
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["eval-lm", "t.txt", "--tokenize", "spaces"])
    assert e.value.code == 1                               # the commands' usage error
    assert "--tokenize: must be tokenize or whitespace, got 'spaces'" in capsys.readouterr().err


def test_tokenize_means_one_thing_in_every_command(capsys):
    """``--tokenize NAME`` reads alike in the commands that keep ``args.pretokenized`` (embed,
    contexts, lm, chars, units, report …) and in ``train-lm``/``eval-lm``; a bare ``--tokenize``
    (the former opt-in) still means tokenize."""
    import argparse

    parser = build_parser()
    cases = {"embed": ["embed", "i.txt", "-o", "o.hdf5"], "lm": ["lm", "i.txt"],
             "report": ["report", "s.txt", "--word", "w", "-o", "r"],
             "units top": ["units", "top", "s.txt", "--unit", "3"],
             "chars perturb": ["chars", "perturb", "--word", "w", "--sentences", "s.txt"]}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    with_both = [name for name, p in sub.choices.items()
                 if {"--pretokenized", "--tokenize"} <= set(p._option_string_actions)]
    assert len(with_both) >= 8, with_both
    for name, base in cases.items():
        assert parser.parse_args(base).pretokenized is False, name
        assert parser.parse_args([*base, "--tokenize"]).pretokenized is False, name
        assert parser.parse_args([*base, "--tokenize", "regex"]).pretokenized is False, name
        assert parser.parse_args([*base, "--tokenize", "whitespace"]).pretokenized is True, name
        assert parser.parse_args([*base, "--pretokenized"]).pretokenized is True, name
    for base, where, dest in ((cases["embed"], 1, "input"), (cases["lm"], 1, "input"),
                              (cases["units top"], 2, "input"),
                              (cases["report"], 1, "sentences")):
        argv = [*base[:where], "--tokenize", *base[where:]]    # the old flag before the file
        args = parser.parse_args(argv)
        assert args.pretokenized is False and str(getattr(args, dest)) == base[where], argv
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["embed", "i.txt", "-o", "o.hdf5", "--tokenize", "spaces"])
    assert e.value.code == 1
    assert "--tokenize: must be tokenize or whitespace, got 'spaces'" in capsys.readouterr().err


def test_a_training_config_of_either_name_reads_as_the_one_name():
    from elmo_engine.cli.train_lm import build_config
    from elmo_engine.train.presets import preset

    opts = preset("demo")["options"]
    assert TrainConfig.from_dict({"options": opts, "tokenizer": "regex"}).tokenizer == "tokenize"
    assert TrainConfig(options=opts).tokenizer == "tokenize"
    assert TrainConfig(options=opts, tokenizer="regex").tokenizer == "tokenize"
    ws = TrainConfig(options=opts, tokenizer=Tokenization.WHITESPACE).tokenizer
    assert ws == "whitespace" and type(ws) is str
    bad = TrainConfig.from_dict({"options": opts, "tokenizer": "spaces"})
    assert bad.tokenizer == "spaces"
    with pytest.raises(InputError, match="tokenization must be one of"):
        bad.check()
    args = build_parser().parse_args(["train-lm", "c.txt", "--dev", "d.txt", "--out", "o",
                                      "--pretokenized"])
    cfg = build_config(args)
    assert cfg.tokenizer == "whitespace" and type(cfg.tokenizer) is str   # plain JSON


def _manifest(folder):
    return json.loads((folder / MANIFEST).read_text("utf-8"))


def _rewrite_reading(folder, **change):
    d = _manifest(folder)
    d["reading"].update(change)
    (folder / MANIFEST).write_text(json.dumps(d), "utf-8")


def test_an_index_saved_with_the_older_name_resumes_and_a_bad_reading_is_refused(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS.read_text("utf-8").splitlines()[:12]) + "\n", "utf-8")
    out = tmp_path / "ix"
    args = ["index", str(corpus), "--out", str(out), "--checkpoint", str(TINY),
            "--shard-size", "5", "--layer", "1", "--device", "cpu"]
    assert main(args) == 0
    assert _manifest(out)["reading"] == {"tokenizer": "tokenize", "split_sentences": True,
                                         "skip_headers": True}
    assert read_manifest(out).reading == Reading()
    # an index built before the one name: the same identity, so the same command resumes it
    _rewrite_reading(out, tokenizer="regex")
    assert read_manifest(out).reading.tokenizer is Tokenization.TYPED
    capsys.readouterr()
    assert main(args) == 0
    assert "another corpus or settings" not in capsys.readouterr().err
    # ... and a pretokenized build of the same files is another index
    assert main([*args, "--pretokenized"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another corpus or settings (" in err[0] and "reading" in err[0]
    good = _manifest(out)
    for change, field in (({"tokenizer": "spaces"}, "'tokenizer' must be tokenize or whitespace"),
                          ({"split_sentences": "yes"}, "'split_sentences' must be true or false"),
                          ({"extra": 1}, "'extra' must be absent")):
        bad = dict(good, reading=dict(good["reading"], **change))
        (out / MANIFEST).write_text(json.dumps(bad), "utf-8")
        with pytest.raises(InputError, match=field) as e:
            read_manifest(out)
        assert e.value.path is not None and "index manifest's reading" in str(e.value)


def test_a_workspace_of_the_older_name_loads_as_typed_text(tmp_path):
    from elmo_engine.io.workspace_file import WorkspaceData, load_workspace, save_workspace

    path = tmp_path / "w.elmows.json"
    save_workspace(path, WorkspaceData(sentences=["A bank ."], tokenization=Tokenization.TYPED))
    assert json.loads(path.read_text("utf-8"))["tokenization"] == "tokenize"
    d = json.loads(path.read_text("utf-8"))
    d["tokenization"] = "regex"
    path.write_text(json.dumps(d), "utf-8")
    assert load_workspace(path, verify_checksum=False).data.tokenization == "tokenize"
