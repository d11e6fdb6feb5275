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


#: a wrapper whose only child is the command after it: prints the child's peak resident memory
#: (kB, ``RUSAGE_CHILDREN`` of a process that has no other child) and its wall seconds
_MEASURE = ("import resource, subprocess, sys, time\n"
            "t = time.monotonic()\n"
            "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
            "seconds = time.monotonic() - t\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, seconds)\n"
            "sys.exit(code)\n")


def test_sentences_with_a_token_of_500_000_characters(tmp_path):
    """Issue 44: one 1 MB line, a letter and 500,000 combining marks (one token), peaked at
    1,027 MB once Qt and matplotlib laid the token out (a megabyte of one letter: 21 GB). The
    sentence reader refuses a token longer than any model reads (1,024 characters) before Qt
    starts: one line naming the file and the line, exit 1, no window, no screenshot."""
    f = tmp_path / "marks.txt"
    f.write_text("a" + "\u0301" * 500_000 + "\n", encoding="utf-8")
    shot = tmp_path / "shot.png"
    e = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m",
                          "elmo_explorer.entry", "--sentences", str(f), "--screenshot", str(shot),
                          "--settings-dir", str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=e)
    peak_kb, seconds = (float(v) for v in out.stdout.split()[-2:])
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{f}:1: a token of 500,000 characters" in lines[0], out.stderr
    assert peak_kb / 1024 < 1024 and seconds < 60, (peak_kb, seconds)
    assert not shot.exists()
