"""Issue 25: the app's start-up paths (``--screenshot``, ``--settings-dir``, a read-only home)
are checked before Qt starts: one line on stderr naming the option and the path, exit 1, and
the process never waits on its own screenshot timeout. Run as a subprocess (no Qt in-process)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_explorer.shell.startup import startup_problem

ROOT = Path(__file__).resolve().parents[2]


def run_app(args, env=None, timeout=60):
    e = dict(os.environ, QT_QPA_PLATFORM="offscreen", **(env or {}))
    out = subprocess.run([sys.executable, "-m", "elmo_explorer.entry", *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=e)
    return out.returncode, out.stderr


@pytest.mark.parametrize("make, words", [
    (lambda t: (t / "shots").mkdir() or t / "shots", "is a folder"),
    (lambda t: (t / "afile").write_text("x") and t / "afile" / "deeper" / "x.png", "is a file"),
])
def test_screenshot_paths_are_one_line_and_exit_1(tmp_path, make, words):
    target = make(tmp_path)
    code, err = run_app(["--screenshot", target, "--settings-dir", tmp_path / "s",
                         "--timeout", "600"])
    assert code == 1 and "--screenshot" in err and words in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_settings_dir_that_is_a_file(tmp_path):
    f = tmp_path / "settings"
    f.write_text("x")
    code, err = run_app(["--settings-dir", f])
    assert code == 1 and "--settings-dir" in err and "is a file" in err
    assert len(err.strip().splitlines()) == 1


def test_an_unusable_home(tmp_path):
    home = tmp_path / "file-home"
    home.write_text("not a folder")
    env = {"HOME": str(home), "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "",
           "ELMO_EXPLORER_SETTINGS_DIR": ""}
    code, err = run_app([], env=env)
    assert code == 1 and "--settings-dir" in err and str(home) in err
    assert len(err.strip().splitlines()) == 1


def test_read_only_folders_are_named(tmp_path, monkeypatch):
    """Permissions do not bind root, so the access check is simulated."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if ro in (Path(p), *Path(p).parents)
                        else real(p, m))
    assert "read-only" in startup_problem(str(ro / "x.png"), str(tmp_path / "s"), {})
    assert "not writable" in startup_problem(None, str(ro), {})
    env = {"HOME": str(ro)}
    problem = startup_problem(None, None, env)
    assert problem is not None and "--settings-dir" in problem
    assert startup_problem(str(tmp_path / "new" / "x.png"), str(tmp_path / "s"), {}) is None
