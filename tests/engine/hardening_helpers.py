"""Shared helpers of the hardening tests: the in-process CLI runner of round three (issue 25)
that asserts one line and no traceback, a copied checkpoint (rounds two and three), a folder
snapshot, a workspace naming a checkpoint."""
from __future__ import annotations

import shutil
from pathlib import Path

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
