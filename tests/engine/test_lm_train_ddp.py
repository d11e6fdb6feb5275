"""Data-parallel training: two CPU processes under torchrun (gloo) follow the same loss curve as
one process with the same global batch, and write exactly one checkpoint and one export."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from lm_train_helpers import quiet, tiny_config, write_corpus

import torch.distributed as dist

from elmo_engine.train.trainer import train

from support import REPO



@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="torch.distributed with gloo is not available in this build")
def test_two_processes_match_one(tmp_path):
    train_txt = write_corpus(tmp_path / "train.txt", 40, seed=1)
    dev_txt = write_corpus(tmp_path / "dev.txt", 6, seed=2)
    steps = 6
    single = train(train_txt, dev_txt, tmp_path / "one", tiny_config(max_steps=steps, dropout=0.1),
                   device="cpu", show_progress=False, log=quiet)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", "2", "-m", "elmo_engine.train", str(train_txt), "--dev",
           str(dev_txt), "--out", str(tmp_path / "two"), "--preset", "tiny", "--batch-size", "4",
           "--unroll", "5", "--max-steps", str(steps), "--dropout", "0.1", "--log-every", "1",
           "--device", "cpu", "--threads", "1", "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads((tmp_path / "two" / "training.json").read_text("utf-8"))
    assert meta["world_size"] == 2 and meta["steps"] == steps
    two_curve = np.array(meta["history"]["train"])
    one_curve = np.array(single.history["train"])
    assert two_curve.shape == one_curve.shape == (steps, 3)
    np.testing.assert_allclose(two_curve, one_curve, rtol=0, atol=2e-4)
    assert meta["dev_perplexity"]["mean"] == pytest.approx(single.dev["mean"], rel=1e-3)
    # one checkpoint, one export, no stray temporary files from a second writer
    files = sorted(p.relative_to(tmp_path / "two").as_posix()
                   for p in (tmp_path / "two").rglob("*") if p.is_file())
    assert files == ["checkpoint/state.json", "checkpoint/state.safetensors",
                     "checkpoint/vocab.txt", "lm_weights.hdf5", "options.json",
                     "softmax.safetensors", "training.json", "vocab.txt"]
