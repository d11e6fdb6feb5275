"""`elmo-explorer probe` end to end on tiny data with the small fixture model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from support import DATA, FIXTURES, need
from elmo_engine.analysis.probes.tasks import TaskFiles, load_task_data
from elmo_engine.cli import probe as probe_cli

torch.set_num_threads(1)

FIXTURE = FIXTURES / "allennlp"
WSD = DATA / "wsd_eval_raganato2017" / "semeval2007"


def _main(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="elmo-explorer")
    probe_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


CONLLU_WORDS = [("the", "DET"), ("dog", "NOUN"), ("runs", "VERB"), ("a", "DET"), ("cat", "NOUN"),
                ("sleeps", "VERB"), ("big", "ADJ"), ("red", "ADJ"), ("bird", "NOUN"), ("sings", "VERB")]


def _write_conllu(path: Path, n: int, offset: int) -> None:
    lines = []
    for s in range(n):
        words = [CONLLU_WORDS[(s + offset + j) % len(CONLLU_WORDS)] for j in range(5)]
        lines.append(f"# sent_id = s{s}")
        for i, (form, upos) in enumerate(words, start=1):
            lines.append(f"{i}\t{form}\t{form}\t{upos}\t_\t_\t0\tdep\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_pos_cli_writes_documented_json(tmp_path, capsys):
    train, test, out = tmp_path / "train.conllu", tmp_path / "test.conllu", tmp_path / "r.json"
    _write_conllu(train, 40, 0)
    _write_conllu(test, 10, 3)
    rc = _main(["probe", "--checkpoint", str(FIXTURE), "--task", "pos", "--train", str(train),
                "--test", str(test), "--control", "--epochs", "8", "--seeds", "2",
                "--mix-min-epochs", "3", "--out", str(out)])
    assert rc == 0
    d = json.loads(out.read_text("utf-8"))
    assert d["description"] and d["task"] == "pos" and d["label"] == "upos"
    assert [e["layer"] for e in d["layers"]] == [0, 1, 2]     # fixture: 2 LSTM layers + tokens
    for e in d["layers"]:
        assert 0 <= e["dev"] <= 1 and 0 <= e["test"] <= 1
        assert e["selectivity"] == pytest.approx(e["test"] - e["control_test"])
    assert len(d["mix"]["weights"]) == 3 and abs(sum(d["mix"]["weights"]) - 1) < 1e-9
    assert d["counts"]["test"] == 50 and d["counts"]["dim"] == 32
    # four balanced-ish tags: the majority baseline is a real fraction
    assert 0.2 <= d["baselines"]["majority"] <= 0.5
    assert d["seeds"] == [0, 1] and len(d["layers"][1]["test_per_seed"]) == 2
    assert "test_sd" in d["layers"][0] and "weights_sd" in d["mix"]
    assert d["command"].startswith("elmo-explorer probe --checkpoint ")
    assert "--seeds 2" in d["command"] and f"--out {out}" in d["command"]
    assert set(d["timings"]) == {"reading_s", "embedding_s", "training_s", "scoring_s"}
    printed = capsys.readouterr()               # the table is the result (stdout), the rest a log
    assert "mix weights" in printed.out and "wrote" not in printed.out
    err = printed.err
    assert f"wrote {out}" in err and "time: " in err and "reading" in err and "embedding" in err and "scoring" in err


def test_the_control_task_runs_by_default_as_in_the_probes_view(tmp_path):
    """The Probes view trains the control task by default, ``probe`` did only with
    ``--control``: the same data gave results with and without selectivity. One default
    (``settings.CONTROL_BY_DEFAULT``), ``--no-control`` to leave it out."""
    import argparse

    from elmo_engine.analysis.probes.settings import CONTROL_BY_DEFAULT

    parser = argparse.ArgumentParser()
    probe_cli.add_parser(parser.add_subparsers(dest="command"))
    assert CONTROL_BY_DEFAULT is True
    assert parser.parse_args(["probe", "--task", "demo-pos"]).control is True
    assert parser.parse_args(["probe", "--task", "demo-pos", "--no-control"]).control is False
    train, test, out = tmp_path / "train.conllu", tmp_path / "test.conllu", tmp_path / "r.json"
    _write_conllu(train, 30, 0)
    _write_conllu(test, 8, 3)
    assert _main(["probe", "--checkpoint", str(FIXTURE), "--task", "pos", "--train", str(train),
                  "--test", str(test), "--epochs", "2", "--seeds", "1", "--mix-min-epochs", "1", "--out",
                  str(out)]) == 0
    assert "selectivity" in json.loads(out.read_text("utf-8"))["layers"][0]


def test_wsd_cli_on_semeval2007(tmp_path):
    xml = need(WSD / "semeval2007.data.xml")
    keys = WSD / "semeval2007.gold.key.txt"
    out = tmp_path / "wsd.json"
    rc = _main(["probe", "--checkpoint", str(FIXTURE), "--task", "wsd", "--train", str(xml),
                "--train-keys", str(keys), "--test", str(xml), "--test-keys", str(keys),
                "--max-sentences", "60", "--epochs", "3", "--seeds", "1", "--mix-min-epochs", "2",
                "--control", "--out", str(out)])
    assert rc == 0
    d = json.loads(out.read_text("utf-8"))
    assert set(d["baselines"]) == {"majority", "first_sense"}
    assert d["reference_baseline"] == "first_sense"
    assert any("WSD control task" in n for n in d["notes"])   # what the control means
    assert d["counts"]["test"] == 455                          # every SemEval-2007 instance
    for e in d["layers"]:
        assert 0 <= e["centroid_test"] <= 1 and 0 <= e["test"] <= 1
    # the test set overlaps the training subset, so known lemmas dominate: well above 0
    assert d["layers"][0]["centroid_test"] > 0.3
    assert 0 <= d["mix"]["centroid_test"] <= 1
    # the word-sense defaults, with the options given on the command line kept
    assert (d["config"]["lr"], d["config"]["batch_size"]) == (1e-3, 1024)
    assert d["config"]["mix_min_epochs"] == 2


def test_task_defaults_fill_only_what_the_user_left():
    from dataclasses import replace

    from elmo_engine.analysis.probes.experiment import TASK_DEFAULTS, ProbeConfig

    base = ProbeConfig()
    wsd = base.for_task("wsd")
    assert (wsd.lr, wsd.batch_size, wsd.mix_min_epochs, wsd.min_delta) == (1e-3, 1024, 3, 0.005)
    assert TASK_DEFAULTS["wsd"]["lr"] != base.lr
    assert base.for_task("pos") == replace(base, lr=1e-3) == base.for_task("demo-pos")
    assert base.for_task("tsv") == base and base.for_task("demo-wsd") == base
    mine = ProbeConfig(lr=5e-3, mix_min_epochs=7).for_task("wsd")
    assert (mine.lr, mine.batch_size, mine.mix_min_epochs) == (5e-3, 1024, 7)


def test_missing_arguments_are_clear_errors(tmp_path):
    from elmo_engine.errors import InputError

    with pytest.raises(InputError, match="--task pos needs --train"):
        _main(["probe", "--checkpoint", str(FIXTURE), "--task", "pos",
               "--out", str(tmp_path / "x.json")])
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tdog\tdog\tNOUN\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.conllu:1"):
        _main(["probe", "--checkpoint", str(FIXTURE), "--task", "pos", "--train", str(bad),
               "--test", str(bad), "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


def test_demo_tasks_load_and_run(tmp_path):

    from elmo_engine.io.datasets.records import WsdSentence

    try:
        wsd = load_task_data(TaskFiles("demo-wsd"))
    except Exception as e:  # the demo files are part of the repo; say so if they are missing
        pytest.fail(f"demo tasks not loadable: {e}")
    assert isinstance(wsd.train[0], WsdSentence) and wsd.train[0].instances[0].candidates
    inst = wsd.test[0].instances[0]
    assert wsd.first_sense_fn(inst.lemma, inst.pos) == inst.candidates[0]
    assert wsd.label == "sense" and wsd.dev is not None
    out = tmp_path / "demo.json"
    assert _main(["probe", "--checkpoint", str(FIXTURE), "--task", "demo-pos",
                  "--max-sentences", "80", "--epochs", "2", "--seeds", "1",
                  "--mix-min-epochs", "2", "--out", str(out)]) == 0
    d = json.loads(out.read_text("utf-8"))
    assert d["task"] == "demo-pos" and d["counts"]["labels"] >= 12     # UPOS of every token
    assert d["counts"]["train_sentences"] == 80 and d["counts"]["dev_sentences"] == 200
    assert d["config"]["max_train_sentences"] == 80
    assert d["reference_baseline"] == "word_majority"
    out = tmp_path / "demo_wsd.json"
    assert _main(["probe", "--checkpoint", str(FIXTURE), "--task", "demo-wsd", "--epochs", "2",
                  "--seeds", "1", "--mix-min-epochs", "2", "--out", str(out)]) == 0
    d = json.loads(out.read_text("utf-8"))
    assert d["counts"]["test"] == 288 and d["reference_baseline"] == "majority"
    per = d["layers"][2]["per_lemma"]
    assert len(per) == 20 and sum(v["support"] for v in per.values()) == 288
    assert d["layers"][2]["test"] == pytest.approx(sum(v["accuracy"] for v in per.values()) / 20)
    # balanced senses: each lemma's most frequent sense is right 1/2 or 1/3 of the time
    assert 1 / 3 < d["baselines"]["majority"] < 1 / 2


def test_progress_bars_count_sentences_while_embedding_and_epochs_while_training():
    from elmo_engine.cli.probe import _Bars

    assert _Bars.unit("embedding training") == "sentence"
    assert [_Bars.unit(p) for p in ("layers", "mix", "control layers", "control mix")] == \
        ["epoch"] * 4
    assert _Bars.unit("scoring") == "step"
