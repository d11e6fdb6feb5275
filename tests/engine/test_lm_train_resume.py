"""Resumable training: a cancelled run resumed with --resume ends exactly where an uninterrupted
run ends (weights, optimizer, loss curve, dev perplexity); Ctrl-C stops after the current step."""
from __future__ import annotations

import os
import signal

import h5py
import numpy as np
import pytest
from lm_train_helpers import quiet, tiny_config, write_corpus

from elmo_engine.errors import CancelledError
from elmo_engine.train import state_io
from elmo_engine.train.trainer import train
from elmo_engine.progress import TaskState


def _datasets(path):
    out = {}
    with h5py.File(path, "r") as fh:
        fh.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    return write_corpus(d / "train.txt", 40, seed=1), write_corpus(d / "dev.txt", 6, seed=2)


def test_resume_after_cancel_equals_uninterrupted(corpus, tmp_path):
    train_txt, dev_txt = corpus
    # 40 sentences × 9 framed tokens / 4 rows = 90 per row → 17 windows per epoch;
    # 22 steps cross an epoch boundary (dev evaluation, state reset, new order)
    cfg = dict(dropout=0.1, epochs=3, max_steps=22)
    full = train(train_txt, dev_txt, tmp_path / "full", tiny_config(**cfg), device="cpu",
                 show_progress=False, log=quiet)
    task = TaskState()
    task._on_progress = lambda done, total, msg: task.cancel() if done == 9 else None
    with pytest.raises(CancelledError):
        train(train_txt, dev_txt, tmp_path / "part", tiny_config(**cfg), device="cpu", task=task,
              show_progress=False, log=quiet)
    doc, _ = state_io.load_state(tmp_path / "part")
    assert doc["step"] == 9 and not (tmp_path / "part" / "lm_weights.hdf5").exists()
    resumed = train(train_txt, dev_txt, tmp_path / "part", tiny_config(**cfg), resume=True,
                    device="cpu", show_progress=False, log=quiet)
    assert full.steps == resumed.steps == 22
    assert resumed.history["train"] == full.history["train"]
    assert resumed.history["dev"] == full.history["dev"]
    a = _datasets(tmp_path / "full" / "lm_weights.hdf5")
    b = _datasets(tmp_path / "part" / "lm_weights.hdf5")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    _, ta = state_io.load_state(tmp_path / "full")
    _, tb = state_io.load_state(tmp_path / "part")
    assert ta.keys() == tb.keys() and any(k.startswith("optim.") for k in ta)
    for k in ta:
        assert (ta[k] == tb[k]).all(), k


def test_ctrl_c_stops_after_the_current_step(corpus, tmp_path):
    train_txt, dev_txt = corpus
    task = TaskState(lambda done, total, msg: os.kill(os.getpid(), signal.SIGINT) if done == 3 else None)
    handler = signal.getsignal(signal.SIGINT)
    res = train(train_txt, dev_txt, tmp_path / "run", tiny_config(max_steps=10), device="cpu",
                task=task, show_progress=False, log=quiet)
    assert res.stopped == "interrupted" and res.steps == 3
    doc, tensors = state_io.load_state(tmp_path / "run")
    assert doc["step"] == 3 and doc["window"] == 3
    assert tensors["carry.0.c"].shape == (2, 4, 32)
    assert signal.getsignal(signal.SIGINT) is handler


def test_resume_refuses_a_changed_corpus(corpus, tmp_path):
    from elmo_engine.errors import CheckpointError

    train_txt, dev_txt = corpus
    train(train_txt, dev_txt, tmp_path / "run", tiny_config(max_steps=2), device="cpu",
          show_progress=False, log=quiet)
    other = write_corpus(tmp_path / "other.txt", 40, seed=5)
    with pytest.raises(CheckpointError, match="corpus differs"):
        train(other, dev_txt, tmp_path / "run", tiny_config(max_steps=4), resume=True,
              device="cpu", show_progress=False, log=quiet)
