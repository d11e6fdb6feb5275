"""Training speed of ``train-lm``: the fused trainer against the trainer it replaced, in one run.

Both run the same training step as ``elmo_engine.train.trainer`` (sampled softmax, backward,
gradient clipping, Adam) on windows of real text (the two shipped corpora's dev files, so that
the word types per window are realistic) with the same architecture:

- baseline: the biLM's autograd LSTM path and the sampled softmax as first written (negatives'
  logits concatenated to the true logit, accidental hits found by comparing every target with
  every negative), at the batch size of the preset it was tuned with (32 rows);
- fused: :mod:`elmo_engine.train.fused_lstm` and the current softmax, at the preset's batch
  size; also at the baseline's batch size, to show what the batch size alone gives.

Rounds alternate (baseline, fused, fused at the old batch, …) so that a change in the machine's
load hits all alike; the median of the rounds is reported, with the ratio.

    python benchmarks/bench_train.py [--preset demo] [--steps 20] [--rounds 3] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elmo_engine import runtime  # noqa: E402
from elmo_engine.train.data import Streams  # noqa: E402
from elmo_engine.train.dataset import prepare_data  # noqa: E402
from elmo_engine.train.model import BiLanguageModel, LogUniformSampler  # noqa: E402
from elmo_engine.train.presets import preset  # noqa: E402
from elmo_engine.train.trainer import TrainConfig, make_optimizer  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
TEXTS = [SHARED / "pd_fiction" / "valid.txt", SHARED / "openstax_prose" / "valid.txt"]
BASELINE_BATCH = 32


def baseline_loss(model, type_chars, inputs, targets, state, negatives, neg_logq, target_logq):
    """The trainer's loss before the fused path: autograd LSTM, concatenated sampled softmax."""
    h, new_state = BiLanguageModel.top(model, type_chars, inputs, state)
    h = h.reshape(2, -1, h.shape[-1])
    y = targets.reshape(2, -1)
    true_logit = (h * model.softmax_w[y]).sum(-1) + model.softmax_b[y] - target_logq.reshape(2, -1)
    neg_logit = h @ model.softmax_w[negatives].t() + (model.softmax_b[negatives] - neg_logq)
    neg_logit = neg_logit.masked_fill(y[..., None] == negatives[None, None, :], float("-inf"))
    logits = torch.cat([true_logit[..., None], neg_logit], -1)
    return (torch.logsumexp(logits, -1) - true_logit).mean(1), new_state


class Runner:
    """One model, optimizer, window stream and carried state; ``run(n)`` times n steps."""

    def __init__(self, data, cfg: TrainConfig, batch: int, fused: bool):
        self.data, self.cfg, self.fused = data, cfg, fused
        opts = cfg.bilm_options()
        self.model = BiLanguageModel(opts, len(data.vocab), fused=fused)
        self.model.reset_parameters(torch.Generator().manual_seed(0))
        self.opt = make_optimizer(self.model, cfg)
        self.gen = torch.Generator().manual_seed(0)
        self.sampler = LogUniformSampler(len(data.vocab), cfg.n_negative)
        self.streams = Streams(data.train_framed, batch, cfg.unroll)
        self.state = self.model.bilm.lstm.zero_state(batch)
        self.batch, self.k = batch, 0

    def step(self) -> None:
        w = self.streams.window(self.k % self.streams.n_windows)
        self.k += 1
        neg = self.sampler.sample(self.gen)
        logq = self.sampler.log_expected
        inputs = torch.from_numpy(w.inputs)
        y = self.data.type2vocab[torch.from_numpy(w.targets)]
        args = (self.data.type_chars, inputs, y, self.state, neg, logq[neg], logq[y])
        loss, state = self.model(*args) if self.fused else baseline_loss(self.model, *args)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        self.opt.step()
        self.state = [(c.detach(), h.detach()) for c, h in state]

    def run(self, steps: int) -> float:
        """tokens/s over ``steps`` steps (a window of batch × unroll tokens each)."""
        t = time.perf_counter()
        for _ in range(steps):
            self.step()
        return steps * self.batch * self.cfg.unroll / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--steps", type=int, default=20, help="steps per round and variant")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    runtime.configure(threads=args.threads)
    cfg = TrainConfig.from_dict(preset(args.preset))
    missing = [p for p in TEXTS if not p.is_file()]
    if missing:
        sys.exit(f"needs ../shared/data beside the checkout (missing {missing[0]})")
    data = prepare_data(TEXTS[:1], TEXTS[1:], Path("/nonexistent"), cfg, torch.device("cpu"),
                        write=False)
    runners = {
        f"baseline (autograd LSTM, batch {BASELINE_BATCH})": Runner(data, cfg, BASELINE_BATCH, False),
        f"fused (batch {cfg.batch_size})": Runner(data, cfg, cfg.batch_size, True),
    }
    if cfg.batch_size != BASELINE_BATCH:
        runners[f"fused (batch {BASELINE_BATCH})"] = Runner(data, cfg, BASELINE_BATCH, True)
    print(f"preset {args.preset}: {cfg.bilm_options().lstm_dim} cells, projection "
          f"{cfg.bilm_options().projection_dim}, {cfg.bilm_options().n_filters} filters; "
          f"unroll {cfg.unroll}, {cfg.n_negative} negatives; {args.threads} threads; "
          f"{args.rounds} rounds of {args.steps} steps each")
    for r in runners.values():                                       # warm-up
        r.run(2)
    rates = {name: [] for name in runners}
    for i in range(args.rounds):
        for name, r in runners.items():
            rates[name].append(r.run(args.steps))
        print(f"round {i + 1}: " + ", ".join(f"{v[-1]:.0f}" for v in rates.values())
              + " tokens/s", flush=True)
    base = statistics.median(next(iter(rates.values())))
    for name, v in rates.items():
        med = statistics.median(v)
        print(f"{name:45s} {med:7.0f} tokens/s   ratio {med / base:.2f}")


if __name__ == "__main__":
    main()
