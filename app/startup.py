"""The app's process-wide settings, set once at start-up by :func:`elmo_explorer.main.main`.

They go through :func:`elmo_engine.runtime.configure`, the one place that sets process-wide
state (see its docstring); here is what the desktop app asks of it:

* **torch threads**: one fewer than the cores, so that the GUI thread keeps a core while the
  worker runs the model (unless ``OMP_NUM_THREADS`` says otherwise);
* **GIL switch interval** at most :data:`GIL_SWITCH_S`: the worker's pure-Python stretches
  (tokenizing a big file) hold the GIL for Python's switch interval, 5 ms by default, every
  time the GUI thread needs it, and painting one table calls into Python a hundred times: a
  5 ms interval froze the window for up to a second while a 2 MB file was tokenized
  (tests/app/test_app_window.py). At 0.5 ms the GUI waits a tenth as long; the worker loses
  nothing while the GUI does not ask;
* strict float32 for torch (as every entry point).
"""
from __future__ import annotations

import os
from typing import Optional

GIL_SWITCH_S = 0.0005  # how long the worker may keep the GIL while the GUI thread waits for it


def gui_threads() -> Optional[int]:
    """Torch threads for the app: the cores but one, or None when ``OMP_NUM_THREADS`` is set."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, (os.cpu_count() or 2) - 1)


def configure_process() -> None:
    """Set the app's process-wide settings (call once, before the window is built)."""
    from elmo_engine import runtime

    runtime.configure(threads=gui_threads(), gil_switch_s=GIL_SWITCH_S)
