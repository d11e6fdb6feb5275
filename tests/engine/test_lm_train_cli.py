"""``train-lm`` command: clear messages for bad input, exit status 1, nothing trained."""
from __future__ import annotations

import gzip

import pytest
from lm_train_helpers import write_corpus
from support import FIXTURES

from elmo_engine.cli.train_lm import main


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.fixture()
def dev(tmp_path):
    return write_corpus(tmp_path / "dev.txt", 5, seed=3)


def test_empty_corpus(tmp_path, dev, capsys):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("= only a header =\n\n   \n", "utf-8")
    code, err = _run(capsys, corpus, "--dev", dev, "--out", tmp_path / "o", "--preset", "tiny")
    assert code == 1 and "empty.txt" in err and "corpus is empty" in err
    assert not (tmp_path / "o" / "checkpoint").exists()


def test_missing_and_folder_corpus(tmp_path, dev, capsys):
    code, err = _run(capsys, tmp_path / "nope.txt", "--dev", dev, "--out", tmp_path / "o")
    assert code == 1 and "nope.txt" in err and "cannot read the corpus" in err
    code, err = _run(capsys, tmp_path, "--dev", dev, "--out", tmp_path / "o")
    assert code == 1 and "not a folder" in err


def test_not_utf8_names_the_line(tmp_path, dev, capsys):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("A fine line .\nCaf\u00e9 au lait .\n".encode("latin-1"))
    code, err = _run(capsys, corpus, "--dev", dev, "--out", tmp_path / "o", "--preset", "tiny")
    assert code == 1 and "latin1.txt:2" in err and "UTF-8" in err


def test_bad_gzip(tmp_path, dev, capsys):
    corpus = tmp_path / "c.txt.gz"
    corpus.write_bytes(b"this is not gzip data at all\n")
    code, err = _run(capsys, corpus, "--dev", dev, "--out", tmp_path / "o", "--preset", "tiny")
    assert code == 1 and "gzip" in err and "c.txt.gz" in err
    good = tmp_path / "g.txt.gz"
    good.write_bytes(gzip.compress(b"one two three .\n")[:-8])        # truncated
    code, err = _run(capsys, good, "--dev", dev, "--out", tmp_path / "o", "--preset", "tiny")
    assert code == 1 and "g.txt.gz" in err


def test_vocabulary_too_small(tmp_path, dev, capsys):
    corpus = tmp_path / "small.txt"
    corpus.write_text("a b c a b c .\n" * 3, "utf-8")
    code, err = _run(capsys, corpus, "--dev", dev, "--out", tmp_path / "o", "--preset", "tiny")
    assert code == 1 and "vocabulary too small" in err and "--min-count" in err


def test_empty_dev_and_missing_resume_state(tmp_path, dev, capsys):
    corpus = write_corpus(tmp_path / "train.txt", 30, seed=1)
    empty = tmp_path / "dev_empty.txt"
    empty.write_text("", "utf-8")
    code, err = _run(capsys, corpus, "--dev", empty, "--out", tmp_path / "o", "--preset", "tiny")
    assert code == 1 and "dev file is empty" in err
    code, err = _run(capsys, corpus, "--dev", dev, "--out", tmp_path / "fresh", "--resume")
    assert code == 1 and "no training state to resume" in err


@pytest.mark.parametrize("name", ["vocab.txt", "training.json", "softmax.safetensors",
                                  "options.json"])
def test_a_folder_with_a_file_the_run_writes_is_refused_before_reading(tmp_path, dev, capsys,
                                                                        name):
    """A fourth attack pass: a folder holding the user's own ``vocab.txt`` or ``training.json``
    was written over without ``--force`` (only the options, weights and state were looked
    for), and an ``--out`` that is a file failed only after the corpus was read."""
    corpus = write_corpus(tmp_path / "train.txt", 30, seed=1)
    out = tmp_path / "mine"
    out.mkdir()
    (out / name).write_text("the user's\n", "utf-8")
    code, err = _run(capsys, corpus, "--dev", dev, "--out", out, "--preset", "tiny",
                     "--max-steps", "1")
    assert code == 1 and f"{out / name} exists" in err and "--force" in err
    code, err = _run(capsys, corpus, "--dev", dev, "--out", out, "--preset", "tiny",
                     "--max-steps", "1", "--force")            # not train-lm's: kept
    assert code == 1 and f"{out / name} exists" in err and "replaces only a model" in err
    assert sorted(p.name for p in out.iterdir()) == [name]
    assert (out / name).read_text("utf-8") == "the user's\n"
    notes = tmp_path / "notes"
    notes.write_text("mine\n", "utf-8")
    missing = tmp_path / "missing.txt"              # refused before the corpus is looked at
    for force in ((), ("--force",)):
        code, err = _run(capsys, missing, "--dev", dev, "--out", notes, *force)
        assert code == 1 and "notes: is not a folder" in err, err
    assert notes.read_text("utf-8") == "mine\n"


def test_force_replaces_a_model_train_lm_wrote_and_never_a_published_one(tmp_path, dev, capsys):
    """``--force`` starts afresh in a folder whose ``training.json`` is a run's record (today's,
    with its format, or an older one known by its keys) or whose state is a run's; a published
    model's folder (options and weights, no record) is never replaced."""
    import json
    import shutil

    from elmo_engine.train.names import MODEL_FORMAT, TRAINING_FILE, not_written_by_train_lm

    corpus = write_corpus(tmp_path / "train.txt", 30, seed=1)
    out = tmp_path / "run"
    argv = [corpus, "--dev", dev, "--out", out, "--preset", "tiny", "--max-steps", "1"]
    assert _run(capsys, *argv)[0] == 0
    record = json.loads((out / TRAINING_FILE).read_text("utf-8"))
    assert record["format"] == MODEL_FORMAT and not_written_by_train_lm(out) is None
    code, err = _run(capsys, *argv)
    assert code == 1 and "exists" in err and "--force" in err
    del record["format"]                                  # a record from before the format
    (out / TRAINING_FILE).write_text(json.dumps(record), "utf-8")
    assert not_written_by_train_lm(out) is None
    code, err = _run(capsys, *argv, "--force")
    assert code == 0, err
    assert json.loads((out / TRAINING_FILE).read_text("utf-8"))["format"] == MODEL_FORMAT
    # a run stopped before its export: the training state alone is the mark
    (out / TRAINING_FILE).unlink()
    assert not_written_by_train_lm(out) is None
    # a run killed before its first state: checkpoint/ holds only its vocabulary (a review
    # found --force, --resume and neither all refused such a folder)
    killed = tmp_path / "killed"
    (killed / "checkpoint").mkdir(parents=True)
    shutil.copy(out / "checkpoint" / "vocab.txt", killed / "checkpoint" / "vocab.txt")
    assert not_written_by_train_lm(killed) is None
    (killed / "checkpoint" / "notes.txt").write_text("mine\n", "utf-8")   # not a run's file
    assert "replaces only a model" in not_written_by_train_lm(killed)
    # a published model, and forged or broken records, are not train-lm's
    published = tmp_path / "published"
    published.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(FIXTURES / "allennlp" / name, published / name)
    for record_text in (None, "{", '{"command": "cp -r", "config": {}, "weights_sha256": "0"}',
                        '[1, 2]', '{"format": NaN}'):
        if record_text is not None:
            (published / TRAINING_FILE).write_text(record_text, "utf-8")
        before = {p.name: p.read_bytes() for p in published.iterdir()}
        code, err = _run(capsys, corpus, "--dev", dev, "--out", published, "--preset", "tiny",
                         "--max-steps", "1", "--force")
        assert code == 1 and "replaces only a model that train-lm wrote" in err, err
        assert {p.name: p.read_bytes() for p in published.iterdir()} == before


def test_add_parser_registers_train_lm():
    import argparse

    from elmo_engine.cli import train_lm as cli

    parser = argparse.ArgumentParser(prog="elmo-explorer")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train-lm", "c.txt", "--dev", "d.txt", "--out", "o", "--epochs", "3",
                              "--preset", "small"])
    cfg = cli.build_config(args)
    assert args.command == "train-lm" and cfg.epochs == 3 and cfg.batch_size == 128
    assert cfg.options["lstm"]["dim"] == 1024 and cfg.options["lstm"]["projection_dim"] == 128
