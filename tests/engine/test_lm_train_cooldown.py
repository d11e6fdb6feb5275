"""The learning-rate cooldown of ``train-lm --cooldown-minutes``: linear over the last minutes of
the time budget, applied to the optimizer, and changeable on ``--resume``."""
from __future__ import annotations

import pytest
from lm_train_helpers import quiet, tiny_config, write_corpus

from elmo_engine.errors import InputError
from elmo_engine.train import state_io
from elmo_engine.train.config import COOLDOWN_FLOOR
from elmo_engine.train.trainer import train


def test_lr_schedule_values():
    cfg = tiny_config(lr=0.01, max_minutes=10.0, cooldown_minutes=4.0)
    assert cfg.lr_at(0.0) == pytest.approx(0.01)
    assert cfg.lr_at(6 * 60) == pytest.approx(0.01)
    assert cfg.lr_at(8 * 60) == pytest.approx(0.01 * (COOLDOWN_FLOOR + (1 - COOLDOWN_FLOOR) * 0.5))
    assert cfg.lr_at(10 * 60) == pytest.approx(0.01 * COOLDOWN_FLOOR)
    assert cfg.lr_at(11 * 60) == pytest.approx(0.01 * COOLDOWN_FLOOR)
    assert tiny_config(lr=0.01, max_minutes=10.0).lr_at(9.9 * 60) == 0.01


def test_cooldown_needs_a_time_budget_and_a_positive_length():
    with pytest.raises(InputError, match="max-minutes"):
        tiny_config(cooldown_minutes=3.0).check()
    with pytest.raises(InputError, match="cooldown_minutes"):
        tiny_config(max_minutes=5.0, cooldown_minutes=0.0).check()


def test_cooldown_reaches_the_optimizer_and_can_be_dropped_on_resume(tmp_path):
    train_txt = write_corpus(tmp_path / "train.txt", 40, seed=1)
    dev_txt = write_corpus(tmp_path / "dev.txt", 6, seed=2)
    out = tmp_path / "run"
    # a half-minute budget cooling over a whole minute: every step is inside the cooldown
    cfg = tiny_config(lr=0.01, max_steps=6, max_minutes=0.5, cooldown_minutes=1.0)
    res = train(train_txt, dev_txt, out, cfg, device="cpu", show_progress=False, log=quiet)
    assert res.steps == 6
    doc, _ = state_io.load_state(out)
    lrs = {g["lr"] for g in doc["optimizer"]["param_groups"]}
    expected = cfg.lr_at(doc["train_seconds"])
    assert len(lrs) == 1
    lr = lrs.pop()
    assert 0.01 * COOLDOWN_FLOOR <= lr <= 0.01 * (COOLDOWN_FLOOR + (1 - COOLDOWN_FLOOR) * 0.5) + 1e-12
    assert lr == pytest.approx(expected, rel=0.05)
    assert doc["config"]["cooldown_minutes"] == 1.0
    # resumed without a cooldown: back to the run's learning rate
    again = tiny_config(lr=0.01, max_steps=8, max_minutes=30.0)
    train(train_txt, dev_txt, out, again, resume=True, device="cpu", show_progress=False, log=quiet)
    doc, _ = state_io.load_state(out)
    assert doc["step"] == 8
    assert {g["lr"] for g in doc["optimizer"]["param_groups"]} == {0.01}
    assert doc["config"]["cooldown_minutes"] is None
