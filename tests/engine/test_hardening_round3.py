"""Issue 25 ("hardening, round three"): each case of the attack table as a regression test.

Every CLI case ends with status 0 or 1, one line on stderr naming the file or the option, no
traceback, and leaves its inputs as they were. Big inputs are generated here; nothing is timed:
the tokenizer's linearity is checked by counting the regex engine's work structurally (the
pattern has no nested unbounded repetition that can rescan) and by a deterministic count of
characters examined; memory by running commands in a subprocess under ``RLIMIT_AS``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_engine.cli.main import main

from conftest import FIXTURES

SOURCE = FIXTURES / "allennlp"
ROOT = Path(__file__).resolve().parents[2]


def cli(argv, capsys):
    """Run the CLI in-process: (status, stderr). One line on stderr, no traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code in (0, 1), (code, err)
    assert "Traceback" not in err, err
    if code:
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("note:")]
        assert len(lines) == 1, err
    return code, err


def ckpt(tmp_path, name="ck") -> Path:
    d = tmp_path / name
    d.mkdir()
    shutil.copy(SOURCE / "options.json", d / "options.json")
    shutil.copy(SOURCE / "lm_weights.hdf5", d / "lm_weights.hdf5")
    return d


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def workspace(tmp_path, checkpoint: Path, name="w.elmows.json") -> Path:
    from elmo_engine.io.workspace_file import CheckpointRef, WorkspaceData, save_workspace

    data = WorkspaceData(sentences=["the bank of the river", "the bank lends money"],
                         checkpoint=CheckpointRef(path=str(checkpoint)))
    return save_workspace(tmp_path / name, data)


# ---- outputs vs inputs ------------------------------------------------------------------------
def test_report_never_replaces_the_workspace_checkpoint_folder(tmp_path, capsys):
    ck = ckpt(tmp_path)
    (ck / "NOTES.txt").write_text("my notes\n", encoding="utf-8")
    before = snapshot(ck)
    ws = workspace(tmp_path, ck)
    code, err = cli(["export", "report", ws, ck, "--force"], capsys)
    assert code == 1 and str(ck) in err
    assert snapshot(ck) == before


def test_report_never_replaces_a_model_folder_or_the_current_folder(tmp_path, capsys,
                                                                     monkeypatch):
    ck = ckpt(tmp_path)
    other = ckpt(tmp_path, "other")                  # a model the workspace does not name
    before = snapshot(other)
    ws = workspace(tmp_path, ck)
    code, err = cli(["export", "report", ws, other, "--force"], capsys)
    assert code == 1 and "holds" in err and str(other) in err
    assert snapshot(other) == before
    here = tmp_path / "here"
    here.mkdir()
    (here / "keep.txt").write_text("keep\n", encoding="utf-8")
    monkeypatch.chdir(here)
    code, err = cli(["export", "report", ws, ".", "--force"], capsys)
    assert code == 1 and "current folder" in err
    code, err = cli(["export", "report", ws, tmp_path, "--force"], capsys)
    assert code == 1 and ("current folder" in err or "holds an input" in err)
    code, err = cli(["export", "report", ws, "."], capsys)
    assert code == 1 and ("exists" in err or "current folder" in err)
    assert (here / "keep.txt").read_text(encoding="utf-8") == "keep\n"


def test_report_still_replaces_an_old_report(tmp_path, capsys):
    ck = ckpt(tmp_path)
    ws = workspace(tmp_path, ck)
    out = tmp_path / "report"
    for _ in range(2):
        code, err = cli(["export", "report", ws, out, "--force", "--word", "bank"], capsys)
        assert code == 0, err
    assert (out / "report.md").is_file()


def test_train_lm_list_inputs_are_guarded(tmp_path, capsys):
    out = tmp_path / "OUT"
    out.mkdir()
    corpus = out / "vocab.txt"
    corpus.write_text("the cat sat .\n" * 5, encoding="utf-8")
    dev = tmp_path / "dev.txt"
    dev.write_text("the cat sat .\n", encoding="utf-8")
    code, err = cli(["train-lm", corpus, "--dev", dev, "--out", out], capsys)
    assert code == 1 and "holds an input" in err
    code, err = cli(["train-lm", dev, "--dev", corpus, "--out", out, "--force"], capsys)
    assert code == 1 and "holds an input" in err
    assert corpus.read_text(encoding="utf-8") == "the cat sat .\n" * 5


def test_export_vectors_implied_metadata_file_is_guarded(tmp_path, capsys):
    src = tmp_path / "X.metadata.tsv"
    src.write_text("the bank\nthe river bank\n", encoding="utf-8")
    code, err = cli(["export", "vectors", src, tmp_path / "X.tsv", "--force", "--layers", "top",
                     "--checkpoint", SOURCE], capsys)
    assert code == 1 and "is also an input" in err and "X.metadata.tsv" in err
    src2 = tmp_path / "Y.layer1.tsv"
    src2.write_text("the bank\n", encoding="utf-8")
    code, err = cli(["export", "vectors", src2, tmp_path / "Y.tsv", "--force",
                     "--checkpoint", SOURCE], capsys)
    assert code == 1 and "is also an input" in err
    assert src.read_text(encoding="utf-8") == "the bank\nthe river bank\n"


@pytest.mark.parametrize("argv", [
    ["contexts", "--word", "bank", "--json", "{demo}", "--force"],
    ["layers", "--json", "{ref}", "--force"],
    ["probe", "--task", "demo-pos", "--out", "{task}", "--force"],
])
def test_bundled_inputs_are_never_written(capsys, argv):
    from elmo_engine.analysis.layers_run import reference_corpus_path
    from elmo_engine.resources import demo_sentences_path, demo_tasks_dir

    task = sorted((demo_tasks_dir() / "pos").iterdir())[0]
    paths = {"demo": demo_sentences_path(), "ref": reference_corpus_path(), "task": task}
    before = {k: p.read_bytes() for k, p in paths.items()}
    code, err = cli([a.format(**paths) for a in argv], capsys)
    assert code == 1 and "bundled resources" in err
    assert {k: p.read_bytes() for k, p in paths.items()} == before
