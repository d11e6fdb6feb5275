"""Training speed of ``train-lm``: the fused trainer against the trainer it replaced, in one run.

Both run the same training step as ``elmo_engine.train.trainer`` (sampled softmax, backward,
gradient clipping, Adam) on windows of real text (the two shipped corpora's dev files, so that
the word types per window are realistic) with the same architecture:

- baseline: the biLM's autograd LSTM path and the sampled softmax as first written (negatives'
  logits concatenated to the true logit, accidental hits found by comparing every target with
  every negative), at the batch size of the preset it was tuned with (32 rows);
- fused: :mod:`elmo_engine.train.fused_lstm` and the current softmax, at the preset's batch
  size; also at the baseline's batch size, to show what the batch size alone gives;
- fused bf16 (where the CPU has bf16 units, or with ``--bf16`` forced): the same step as
  ``train-lm --precision bf16``, under ``torch.autocast(bf16)`` (bf16 GEMMs, float32 master
  weights, optimizer and loss).

Rounds alternate (baseline, fused, fused at the old batch, …) so that a change in the machine's
load hits all alike; the median of the rounds is reported, with the ratio.

Then the ceiling: the step's arithmetic per token, counted from the architecture (LSTM gates,
cell projections, the char-CNN, highway and projection once per distinct type of a window, the
sampled softmax over the batch's distinct negatives; backward = twice forward), against this
CPU's fp32 (and bf16) matrix-multiply rate measured in the same run on the step's own GEMM
shapes. It says what fraction of the machine each variant uses and the most tokens/s — and so
the largest ratio — fp32 (bf16) arithmetic allows here. The host line says the CPU, its flags
and bf16 units, torch's capability and the threads.

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

import hostinfo
from elmo_engine import runtime
from elmo_engine.train.data import Streams
from elmo_engine.train.dataset import prepare_data
from elmo_engine.train.model import BiLanguageModel, LogUniformSampler
from elmo_engine.train.presets import preset
from elmo_engine.train.trainer import TrainConfig, make_optimizer

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

    def __init__(self, data, cfg: TrainConfig, batch: int, fused: bool, bf16: bool = False):
        self.data, self.cfg, self.fused, self.bf16 = data, cfg, fused, bf16
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
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
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


def forward_macs(opts, types_per_token: float, negatives: float) -> float:
    """Multiply-adds of one token's forward pass (both directions)."""
    p, d = opts.projection_dim, opts.lstm_dim
    lstm = 2 * opts.n_layers * (4 * d * (p + p) + (d * p if opts.has_lstm_projection else 0))
    m, c, n = opts.max_characters_per_token, opts.char_embed_dim, opts.n_filters
    cnn = sum((m - w + 1) * w * c * k for w, k in opts.filters)
    token = cnn + opts.n_highway * n * 2 * n + (n * p if opts.has_token_projection else 0)
    softmax = 2 * (negatives + 1) * p              # both directions' outputs
    return lstm + types_per_token * token + softmax


def step_shapes(opts, batch: int):
    """The step's main GEMM shapes (m, k, n): recurrent, input projection, cell projection."""
    p, d = opts.projection_dim, opts.lstm_dim
    return [(batch, p, 4 * d), (batch * 20, p, 4 * d), (batch * 20, d, p)]


def window_shape(runner: "Runner", n: int = 20):
    """Mean distinct types per token and distinct negatives per step over ``n`` windows."""
    types = negs = 0.0
    gen = torch.Generator().manual_seed(1)
    for i in range(n):
        w = runner.streams.window(i % runner.streams.n_windows)
        types += len(torch.unique(torch.from_numpy(w.inputs))) / w.inputs[0].size
        negs += len(runner.sampler.sample(gen))
    return types / n, negs / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--steps", type=int, default=20, help="steps per round and variant")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                    help="add the bf16 row (default: where the CPU has bf16 units)")
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
    bf16_name = f"fused bf16 (batch {cfg.batch_size})"
    if args.bf16 if args.bf16 is not None else runtime.cpu_bf16().offered:
        runners[bf16_name] = Runner(data, cfg, cfg.batch_size, True, bf16=True)
    print(hostinfo.host_line())
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
    opts = cfg.bilm_options()
    shape = {name: window_shape(r) for name, r in runners.items()}
    shapes = step_shapes(opts, cfg.batch_size)
    peak = hostinfo.gemm_rate(torch.float32, shapes)
    peak16 = hostinfo.gemm_rate(torch.bfloat16, shapes) if bf16_name in runners else 0.0
    for name, v in rates.items():
        med = statistics.median(v)
        gflop = 6 * forward_macs(opts, *shape[name]) * med / 1e9
        rate, kind = (peak16, "bf16") if name == bf16_name else (peak, "fp32")
        print(f"{name:45s} {med:7.0f} tokens/s   ratio {med / base:.2f}   "
              f"{gflop:5.0f} GFLOP/s ({100 * gflop / rate:.0f} % of the {kind} GEMM rate)")
    per_token = 6 * forward_macs(opts, *shape[f"fused (batch {cfg.batch_size})"])
    ceiling = peak * 1e9 / per_token
    types, negs = shape[f"fused (batch {cfg.batch_size})"]
    print(f"arithmetic per token (fused batch {cfg.batch_size}: {types:.2f} distinct types per "
          f"token, {negs:.0f} distinct negatives): {per_token / 1e6:.1f} MFLOP; "
          f"this CPU's fp32 GEMM rate on the step's shapes: {peak:.0f} GFLOP/s"
          + (f", bf16 {peak16:.0f} GFLOP/s" if peak16 else ""))
    print(f"ceiling at that rate: {ceiling:.0f} tokens/s = ratio {ceiling / base:.2f} "
          f"(3x the baseline would need {3 * base * per_token / 1e9:.0f} GFLOP/s)")
    fused_name = f"fused (batch {cfg.batch_size})"
    for name in (fused_name, bf16_name):
        if name in rates:                  # the share of the host's 2048² mm ceiling reached
            precision = "bf16" if name == bf16_name else "fp32"
            med = statistics.median(rates[name])
            print(f"{name}: " + hostinfo.share_line(6 * forward_macs(opts, *shape[name]) * med,
                                                    1.0, precision))
    if peak16:
        c16 = peak16 * 1e9 / per_token
        bf16_rate = statistics.median(rates[bf16_name])
        fused_rate = statistics.median(rates[f"fused (batch {cfg.batch_size})"])
        print(f"bf16 ceiling: {c16:.0f} tokens/s = ratio {c16 / base:.2f}; bf16 row against "
              f"the baseline {bf16_rate / base:.2f}x, against fused fp32 "
              f"{bf16_rate / fused_rate:.2f}x")


if __name__ == "__main__":
    main()
