"""``runtime.reuse_freed_blocks`` (what ``train-lm`` sets): a loop that allocates and frees the
same large buffers every step stops faulting their pages in again; only ``train-lm`` asks for
it (docs/performance.md, "The trainer's buffers")."""
from __future__ import annotations

import subprocess
import sys

import pytest

from support import REPO
from elmo_engine import runtime
from elmo_engine.cli.main import main

# the trainer's pattern in small: a step's buffers (10 MB and a few of 1-3 MB, as an LSTM layer's
# gates and states at the demo size), some temporaries, two steps alive at once, then freed
LOOP = """
import resource, sys
import numpy as np
sys.path.insert(0, {repo!r})
from elmo_engine import runtime
applied = runtime.reuse_freed_blocks() if sys.argv[1] == "reuse" else None

def step():
    bufs = [np.empty(n, np.float32) for n in (2_621_440, 655_360, 655_360, 327_680, 655_360)]
    for b in bufs:
        b.fill(1.0)
    tmp = [np.ones(n, np.float32) for n in (655_360, 2_621_440, 327_680)]
    del tmp
    return bufs

def loop(n):
    for _ in range(n):
        a = step()
        b = step()
        del a, b

loop(3)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
loop(20)
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 20)
"""


def faults_per_step(mode: str):
    out = subprocess.run([sys.executable, "-c", LOOP.format(repo=str(REPO)), mode],
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return out[0], float(out[1])


@pytest.mark.skipif(runtime._glibc() is None, reason="glibc's mallopt only (Linux)")
def test_reusing_freed_blocks_stops_a_loop_refaulting_its_pages():
    applied, reused = faults_per_step("reuse")
    _, default = faults_per_step("default")
    assert applied == "True"
    # glibc's defaults map the 10 MB blocks afresh or give the heap's top back: thousands of
    # faults a step (8,236 measured on glibc 2.36); reused, the pages stay (0 measured)
    assert reused <= 0.1 * default + 50, (reused, default)


def test_only_train_lm_asks_for_it(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(runtime, "reuse_freed_blocks", lambda: calls.append(1) or True)
    missing = tmp_path / "none.txt"
    assert main(["train-lm", str(missing), "--dev", str(missing), "--out",
                 str(tmp_path / "m")]) == 1
    assert calls == [1] and "none.txt" in capsys.readouterr().err
    assert main(["embed", str(missing), "-o", str(tmp_path / "v.h5")]) == 1
    assert main(["eval-lm", str(missing), "--checkpoint", str(tmp_path / "m")]) == 1
    assert calls == [1]
