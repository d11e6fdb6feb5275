"""Shared helpers of the hardening tests: the in-process CLI runner of round three (issue 25)
that asserts one line and no traceback, the measured CLI runner of its replay (issue 44: peak
memory and seconds of a command in a fresh process), a copied checkpoint (rounds two and three),
a folder snapshot, a workspace naming a checkpoint."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Tuple

from elmo_engine.cli.main import main

from support import FIXTURES

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


#: a wrapper whose only child is the command after it: prints the child's peak resident memory
#: (kB, ``RUSAGE_CHILDREN`` of a process that has no other child) and its wall seconds
_MEASURE = ("import resource, subprocess, sys, time\n"
            "t = time.monotonic()\n"
            "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
            "seconds = time.monotonic() - t\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, seconds)\n"
            "sys.exit(code)\n")


def run_measured(argv, timeout: int = 120) -> Tuple[int, str, float, float]:
    """Run ``python -m elmo_engine.cli ARGV`` in a fresh process: (status, stderr, peak resident
    memory in MB, wall seconds). Asserts status 0 or 1 and, on 1, one line, no traceback."""
    cmd = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "elmo_engine.cli",
           *map(str, argv)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                         env=dict(os.environ))
    peak_kb, seconds = out.stdout.split()[-2:]
    err = out.stderr
    assert out.returncode in (0, 1), (out.returncode, err)
    assert "Traceback" not in err, err
    if out.returncode:
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("note:")]
        assert len(lines) == 1, err
    return out.returncode, err, int(peak_kb) / 1024, float(seconds)


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
