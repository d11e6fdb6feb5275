"""A fork server for the kill tests (``tests/engine/test_hardening_faults.py``).

Starting Python and importing torch takes seconds on a busy machine, so the server imports the
engine once and forks one worker process per trial. The test kills that worker with SIGKILL at
a random moment — the kernel stops it exactly as it would stop the app — and then checks what is
left on disk. Protocol, one JSON object per line: the test writes ``{"job": NAME, "args": {...}}``;
the server answers ``{"pid": N}`` right after the fork and ``{"pid": N, "status": ..., "seconds":
...}`` when the worker has ended (``status`` is the exit code, or ``-SIGNAL``).

Run as ``python tests/engine/helpers_kill.py serve``; :class:`ForkServer` does that for the tests.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]

# the model the "save" job writes: ~2.5M parameters (~10 MB of float32), big enough that a
# random kill often lands inside the write
SAVE_OPTIONS = dict(filters=((1, 32), (2, 32), (3, 64)), char_embed_dim=16, n_highway=1,
                    projection_dim=128, lstm_dim=512, n_layers=2)


def make_model(seed: int, options: Optional[dict] = None):
    """A random biLM, the same for the same seed in every process."""
    import torch

    from elmo_engine.model.bilm import BiLM
    from elmo_engine.model.options import BiLMOptions

    model = BiLM(BiLMOptions(**(options or SAVE_OPTIONS)))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    return model


def cache_sentences(start: int, count: int) -> list:
    return [[f"k{i}", "the", "river", f"bank{i % 7}", "."][: 2 + i % 4] for i in range(start, start + count)]


# ---- jobs (run in the forked worker) ----------------------------------------------------------
def job_embed(args: dict) -> int:
    from elmo_engine.cli.main import main

    return main(["embed", args["input"], "-o", args["output"], "--checkpoint", args["checkpoint"],
                 "--force"])


def job_save(args: dict) -> int:
    from elmo_engine.model.checkpoint import save_native, save_published

    model = make_model(args["seed"])
    (save_native if args["format"] == "native" else save_published)(model, args["folder"])
    return 0


def job_cache(args: dict) -> int:
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder

    emb = Embedder(load_checkpoint(args["checkpoint"]), device="cpu", cache_dir=args["cache_dir"])
    for sent in cache_sentences(args["start"], args["count"]):
        emb.embed([sent])                           # one disk-cache write per call
    return 0


JOBS = {"embed": job_embed, "save": job_save, "cache": job_cache}


def serve() -> None:
    import torch

    torch.set_num_threads(1)
    import h5py  # noqa: F401  (imported once, before any fork)

    import elmo_engine.model.checkpoint  # noqa: F401
    import elmo_engine.cli.main  # noqa: F401
    import elmo_engine.embed.embedder  # noqa: F401

    out = sys.stdout
    print(json.dumps({"ready": os.getpid()}), file=out, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:                                 # the worker
            code = 1
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)                  # keep the protocol pipe clean
                code = int(JOBS[request["job"]](request["args"]) or 0)
            except BaseException as e:               # reported through the exit code
                print(f"worker error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            finally:
                os._exit(code)
        print(json.dumps({"pid": pid}), file=out, flush=True)
        status, killed = _wait(pid, request.get("kill_after"))
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"pid": pid, "status": code, "killed": killed,
                          "seconds": time.monotonic() - start}), file=out, flush=True)


def _wait(pid: int, kill_after: Optional[float]):
    """Wait for the worker; SIGKILL it after ``kill_after`` s if it is still running. Only this
    process reaps the worker, so the pid cannot belong to anyone else when it is killed."""
    if kill_after is not None:
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status, False
            time.sleep(min(0.005, max(0.0, deadline - time.monotonic())))
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        os.kill(pid, signal.SIGKILL)
        return os.waitpid(pid, 0)[1], True
    return os.waitpid(pid, 0)[1], False


# ---- the test side ------------------------------------------------------------------------------
class ForkServer:
    """Start the server; :meth:`run` one job, optionally killing it after ``kill_after`` s."""

    def __init__(self, log_path: Path, timeout: float = 240.0):
        self.timeout = timeout
        self.log = open(log_path, "w")
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve"],
                                     cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1, env=env)
        self._read()                                 # {"ready": pid}

    def _read(self) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            raise TimeoutError(f"fork server silent for {self.timeout} s (see {self.log.name})")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server ended (see {self.log.name})")
        return json.loads(line)

    def run(self, job: str, args: dict, kill_after: Optional[float] = None) -> dict:
        """Run one job in a fresh worker; the server kills it after ``kill_after`` seconds."""
        request = {"job": job, "args": args, "kill_after": kill_after}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        pid = self._read()["pid"]
        result = self._read()
        assert result["pid"] == pid
        return result

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python tests/engine/helpers_kill.py serve")
    serve()
