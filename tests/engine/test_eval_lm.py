"""``eval-lm``: perplexity of a model written by train-lm; published files say they cannot."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from lm_train_helpers import quiet, tiny_config, write_corpus

from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.cli import main as cli_main
from elmo_engine.errors import CheckpointError
from elmo_engine.train import state_io
from elmo_engine.train.evaluate import evaluate_text
from elmo_engine.train.trainer import train

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "elmo" / "allennlp"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("evallm")
    corpus = write_corpus(root / "train.txt", 400, seed=1)
    dev_a = write_corpus(root / "dev_a.txt", 40, seed=2)
    dev_b = write_corpus(root / "dev_b.txt", 30, seed=3)
    cfg = tiny_config(max_steps=30, epochs=5)
    res = train(corpus, [dev_a, dev_b], root / "model", cfg, device="cpu", show_progress=False,
                log=quiet)
    return root, res


def test_two_dev_files_are_scored_apart_and_averaged(trained):
    _, res = trained
    sets = res.dev["sets"]
    assert sorted(n.split("/")[-1] for n in sets) == ["dev_a.txt", "dev_b.txt"]
    for k in ("fwd", "bwd", "mean"):
        assert res.dev[k] == pytest.approx(sum(s[k] for s in sets.values()) / 2)
    assert res.dev["tokens"] == sum(s["tokens"] for s in sets.values())


def test_eval_lm_matches_the_trainers_dev_perplexity(trained, capsys):
    root, res = trained
    model = root / "model"
    assert (model / state_io.SOFTMAX_FILE).is_file()
    name = next(n for n in res.dev["sets"] if n.endswith("dev_a.txt"))
    want = res.dev["sets"][name]
    got = evaluate_text(model, root / "dev_a.txt", batch_size=4, unroll=5)
    # the same positions, the softmax stored in float16: within 0.1 %
    assert got["tokens"] == want["tokens"]
    for k in ("fwd", "bwd", "mean"):
        assert got[k] == pytest.approx(want[k], rel=1e-3), k
    assert 0.0 <= got["oov_rate"] < 0.05 and got["vocab_size"] > 10
    code = cli_main(["eval-lm", str(root / "dev_a.txt"), "--checkpoint", str(model), "--json", "--no-progress",
                     "--batch-size", "4", "--unroll", "5", "--device", "cpu"])
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert code == 0 and doc["mean"] == pytest.approx(got["mean"], rel=1e-9)
    assert math.isclose(doc["mean"], (doc["fwd"] + doc["bwd"]) / 2)
    code = cli_main(["eval-lm", str(root / "dev_a.txt"), "--checkpoint", str(model), "--no-progress",
                     "--batch-size", "4", "--unroll", "5", "--device", "cpu"])
    line = capsys.readouterr().out.strip()
    assert code == 0 and line.count("\n") == 0 and f"mean {got['mean']:.2f}" in line


def test_published_files_have_no_softmax(tmp_path, capsys):
    text = write_corpus(tmp_path / "t.txt", 5, seed=1)
    code = cli_main(["eval-lm", str(text), "--checkpoint", str(FIXTURE), "--no-progress", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0
    assert "no softmax" in err and "published" in err and "allennlp" in err


def test_a_native_model_without_its_softmax_says_what_train_lm_writes(trained, tmp_path, capsys):
    """An attack pass: a train-lm model copied without its softmax said "published ELMo weights
    carry none", and `lm` gave no hint that the reach matrix needs none."""
    from elmo_engine.model.softmax import OWN_SOFTMAX, OWN_VOCAB

    root, _ = trained
    copy = tmp_path / "model"
    shutil.copytree(root / "model", copy)
    (copy / OWN_SOFTMAX).unlink()
    (copy / OWN_VOCAB).unlink()
    text = write_corpus(tmp_path / "t.txt", 3, seed=1)
    code = cli_main(["eval-lm", str(text), "--checkpoint", str(copy), "--no-progress",
                     "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and "published" not in err
    assert f"no softmax: missing {OWN_SOFTMAX} and {OWN_VOCAB} beside training.json" in err
    assert "--reach" not in err                         # eval-lm has no such way out
    code = cli_main(["lm", str(text), "--checkpoint", str(copy), "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0
    assert "beside training.json" in err and err.endswith(
        "without one, --reach --no-predictions gives the reach matrix")
    assert cli_main(["lm", str(text), "--checkpoint", str(copy), "--device", "cpu", "--reach",
                     "--no-predictions", "--json"]) == 0
    from elmo_engine.model.softmax import missing_softmax_message

    native = tmp_path / "native"
    native.mkdir()
    (native / "bilm.json").write_text("{}", "utf-8")
    assert "beside bilm.json (train-lm writes" in missing_softmax_message(native)
    assert "published ELMo weights carry none" in missing_softmax_message(tmp_path)


def test_a_softmax_that_does_not_fit_is_refused(trained, tmp_path):
    root, _ = trained
    copy = tmp_path / "model"
    shutil.copytree(root / "model", copy)
    state_io.save_softmax(copy / state_io.SOFTMAX_FILE, torch.zeros(7, 16), torch.zeros(7))
    with pytest.raises(CheckpointError, match="does not match"):
        evaluate_text(copy, root / "dev_a.txt", batch_size=4, unroll=5)
    (copy / state_io.SOFTMAX_FILE).write_bytes(b"\x00" * 100)
    with pytest.raises(CheckpointError, match="softmax"):
        evaluate_text(copy, root / "dev_a.txt", batch_size=4, unroll=5)


def test_periodic_evaluation_snapshots_and_best_export(tmp_path):
    corpus = write_corpus(tmp_path / "train.txt", 300, seed=1)
    dev = write_corpus(tmp_path / "dev.txt", 30, seed=2)
    cfg = tiny_config(max_steps=6, epochs=5, eval_minutes=1e-9)      # evaluate after every step
    res = train(corpus, dev, tmp_path / "m", cfg, device="cpu", show_progress=False, log=quiet)
    snaps = sorted((tmp_path / "m" / "snapshots").iterdir())
    # a snapshot after every step but the last (the final export is that one)
    assert [p.name for p in snaps] == [f"step-{i:07d}" for i in range(1, 6)]
    best = res.history["best"]
    means = {e["step"]: e["mean"] for e in res.history["dev"]}
    assert best["mean"] == min(means.values()) and means[best["step"]] == best["mean"]
    exported = json.loads((tmp_path / "m" / "training.json").read_text())
    assert exported["dev_perplexity"]["mean"] == pytest.approx(best["mean"])
    if best["step"] < 6:
        # the exported weights are the best snapshot's
        snap = tmp_path / "m" / "snapshots" / f"step-{best['step']:07d}"
        got, want = load_checkpoint(tmp_path / "m").state_dict(), load_checkpoint(snap).state_dict()
        assert all(torch.equal(got[k], want[k]) for k in want)
        assert exported["exported_step"] == best["step"]


def test_periodic_evaluations_read_the_head_of_each_dev_file(tmp_path):
    corpus = write_corpus(tmp_path / "train.txt", 300, seed=1)
    dev = write_corpus(tmp_path / "dev.txt", 60, seed=2)
    cfg = tiny_config(max_steps=3, epochs=5, eval_minutes=1e-9, eval_tokens=60)
    res = train(corpus, dev, tmp_path / "m", cfg, device="cpu", show_progress=False, log=quiet)
    periodic = res.history["dev"]
    assert [e["step"] for e in periodic] == [1, 2, 3]
    assert all(e["eval_tokens"] == 60 and e["tokens"] <= 60 for e in periodic)
    final = res.history["final"]
    assert "eval_tokens" not in final and final["tokens"] > 200      # every dev file whole
    assert res.dev == final and final["step"] == res.history["best"]["step"]


def test_epoch_end_evaluation_matches_the_periodic_ones(tmp_path):
    # periodic evaluation on: the end of an epoch is evaluated like the periodic ones (the head
    # of each dev file, with a snapshot), so that the best is chosen among comparable numbers
    corpus = write_corpus(tmp_path / "train.txt", 12, seed=1)
    dev = write_corpus(tmp_path / "dev.txt", 60, seed=2)
    cfg = tiny_config(epochs=2, eval_minutes=1e9, eval_tokens=60)     # only at epoch ends
    res = train(corpus, dev, tmp_path / "m", cfg, device="cpu", show_progress=False, log=quiet)
    entries = res.history["dev"]
    assert len(entries) == 2 and [e["epoch"] for e in entries] == [1.0, 2.0]
    assert all(e["eval_tokens"] == 60 and e["tokens"] <= 60 for e in entries)
    first = tmp_path / "m" / "snapshots" / f"step-{entries[0]['step']:07d}"
    assert (first / "lm_weights.hdf5").is_file() and (first / "softmax.safetensors").is_file()
    assert res.history["best"]["mean"] == min(e["mean"] for e in entries)
    assert "eval_tokens" not in res.history["final"]
