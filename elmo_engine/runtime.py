"""Process-wide settings, in one place, set once at start-up.

Three things in this project change the whole process rather than one object; they are all set
here, by :func:`configure`, and nowhere else:

* **torch's float32 matmul mode**: strict float32 — no TF32 on CUDA (``matmul`` and cuDNN), and
  ``set_float32_matmul_precision("highest")``. The conformance bounds (docs/checkpoint-format.md
  §13) need true float32; fp16/bf16 stay available as an explicit ``Embedder`` precision.
* **torch's intra-op thread count**: left to torch unless a caller asks (``--threads`` of
  ``probe`` and ``train-lm``; the app keeps one core for its GUI thread).
* **Python's GIL switch interval** (the app only): the app's worker thread runs pure-Python
  stretches (tokenizing a big file) that would otherwise keep the GUI thread waiting for the GIL
  for up to 5 ms at a time (see ``elmo_explorer.startup``).

Who calls it: :func:`elmo_engine.cli.main` (every headless command), ``elmo_explorer.startup``
(the app), ``python -m elmo_engine.train`` (through its CLI module), the test suite
(``tests/conftest.py``) and the benchmarks. A library user who builds an ``Embedder`` in their
own program calls ``configure()`` once first to get the same numbers.
"""
from __future__ import annotations

import sys
from typing import Optional


def configure(threads: Optional[int] = None, gil_switch_s: Optional[float] = None) -> None:
    """Set the process-wide settings (safe to call again: later calls only change what they name).

    Parameters
    ----------
    threads : torch's intra-op threads; None keeps the current count
    gil_switch_s : the longest GIL switch interval to allow (seconds); None keeps Python's
    """
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if threads is not None:
        torch.set_num_threads(threads)
    if gil_switch_s is not None:
        sys.setswitchinterval(min(sys.getswitchinterval(), gil_switch_s))
