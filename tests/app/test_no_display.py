"""Start-up with no display (issue 16, item 6), as a user meets it: a fresh process, no
``DISPLAY``, no ``QT_QPA_PLATFORM``: one line naming ``QT_QPA_PLATFORM=offscreen`` and
``--screenshot``, exit status 2, no Qt abort and no xcb messages."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_the_app_without_a_display_says_how_to_run_headless(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    if not sys.platform.startswith("linux"):
        pytest.skip("the check is for X11 platforms")
    r = subprocess.run([sys.executable, "-m", "elmo_explorer.entry", "--settings-dir",
                        str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "QT_QPA_PLATFORM=offscreen" in lines[0] and "--screenshot" in lines[0]
    assert "xcb" not in r.stderr and r.stdout == ""
