"""Kill-test jobs for workspace saves and training-state saves (``test_hardening_workspace.py``).

Adds two jobs to the fork server of :mod:`helpers_kill` and serves them the same way:
``workspace`` rewrites a workspace (JSON + an npz of arrays) with :func:`save_workspace`, and
``state`` writes a training state with :func:`elmo_engine.train.state_io.save_state`. Both
build their content from a seed, so the test can tell the old file from the new one.

Run as ``python tests/helpers_kill_state.py serve``; :class:`StateForkServer` does that.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import helpers_kill
from helpers_kill import REPO, ForkServer

WS_ROWS = 1_500_000                    # float32 (WS_ROWS, 4): ~24 MB of npz per save


def workspace_data(seed: int):
    """The workspace content for ``seed`` (the same in every process)."""
    import numpy as np

    from elmo_engine.io.workspace_file import WorkspaceData

    return WorkspaceData(
        sentences=[f"sentence {seed} number {i} ." for i in range(200)],
        selection={"sentence": seed % 5, "token": 1, "word": str(seed)},
        views={"projection": {"seed": seed, "method": "pca"}},
        probe_runs=[{"seed": seed, "accuracy": 0.5}],
        arrays={"points": np.arange(WS_ROWS * 4, dtype=np.float32).reshape(WS_ROWS, 4) * seed,
                "labels": np.arange(seed, seed + 1000, dtype=np.int64)},
        notes=f"seed {seed}", saved_at="2026-01-01T00:00:00Z")


def state_parts(seed: int):
    """Model, optimizer (with Adam moments), carried LSTM state and generator for ``seed``.

    Filled cheaply (no random init) so that most of a job's time is the save itself: ~4.2M
    parameters, ~50 MB of state with the Adam moments.
    """
    import torch

    model = torch.nn.Module()
    for name, shape in (("proj", (2048, 1536)), ("out", (512, 2048)), ("bias", (512,))):
        n = int(torch.tensor(shape).prod())
        model.register_parameter(name, torch.nn.Parameter(
            torch.arange(n, dtype=torch.float32).reshape(shape) * (1e-7 * seed)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = p.detach() * 0.5 + seed
    opt.step()
    carry = [(torch.full((2, 512), float(seed)), torch.full((2, 128), -float(seed)))
             for _ in range(2)]
    return model, opt, carry, torch.Generator().manual_seed(seed)


def job_workspace(args: dict) -> int:
    from elmo_engine.io.workspace_file import save_workspace

    save_workspace(args["path"], workspace_data(args["seed"]))
    return 0


def job_state(args: dict) -> int:
    from elmo_engine.train.state_io import save_state

    model, opt, carry, gen = state_parts(args["seed"])
    save_state(Path(args["out"]), model, opt, carry, gen, {"step": args["seed"]})
    return 0


helpers_kill.JOBS.update(workspace=job_workspace, state=job_state)


class StateForkServer(ForkServer):
    """:class:`helpers_kill.ForkServer` serving this module (its jobs included)."""

    def __init__(self, log_path: Path, timeout: float = 240.0):
        self.timeout = timeout
        self.log = open(log_path, "w")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]),
                   OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve"],
                                     cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1, env=env)
        self._read()                                 # {"ready": pid}


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python tests/helpers_kill_state.py serve")
    import elmo_engine.train.state_io  # noqa: F401  (imported once, before any fork)
    import elmo_engine.io.workspace_file  # noqa: F401
    import safetensors.torch  # noqa: F401

    import tempfile

    import numpy as np

    from elmo_engine.io.workspace_file import WorkspaceData, save_workspace

    state_parts(0)            # warm up once (optimizer, lazy imports) so a job is mostly its save
    with tempfile.TemporaryDirectory() as warm:
        save_workspace(Path(warm) / "warm.elmows.json", WorkspaceData(arrays={"a": np.ones(2)}))
    helpers_kill.serve()
