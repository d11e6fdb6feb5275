"""The biLM training loop: truncated BPTT over carried-state windows, sampled softmax, dev
perplexity.

``train(corpus, dev, out, cfg)`` reads the corpus, builds (or, resuming, reloads) the vocabulary,
trains, checkpoints, evaluates and exports the inference model into ``out``. It runs in one
process or, under ``torchrun``, data-parallel (:mod:`elmo_engine.train.ddp`). All randomness
after the seed comes from one generator whose state is checkpointed, so ``resume=True``
continues to exactly the result of an uninterrupted run.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from elmo_engine import runtime
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.train import ddp, state_io
from elmo_engine.train.config import RUN_CONTROL, TrainConfig, TrainResult
from elmo_engine.train.data import Streams, epoch_order
from elmo_engine.train.dataset import LMData, prepare_data
from elmo_engine.train.model import BiLanguageModel, LogUniformSampler
from elmo_engine.train.stop_flag import StopFlag
from elmo_engine.progress import TaskState

def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr)
    return torch.optim.Adagrad(model.parameters(), lr=cfg.lr, initial_accumulator_value=1.0)


@torch.no_grad()
# ``model``: a BiLanguageModel, or anything with its ``bilm`` and ``full_nll`` (the exported
# model with a full softmax, elmo_engine.train.evaluate._SoftmaxLM)
def perplexity(model: "BiLanguageModel | Any", framed, type_chars, type2vocab, batch_size: int,
               unroll: int, device: torch.device, path=None,
               progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Full-softmax perplexity per direction of framed sentences (file order, state carried
    across windows): ``fwd``, ``bwd``, their average ``mean`` (as in the ELMo paper), and the
    number of positions per direction."""
    total = sum(len(s) for s in framed)
    bsz = max(1, min(batch_size, (total - 1) // (unroll + 1)))
    streams = Streams(framed, bsz, unroll)
    if streams.n_windows == 0:
        raise InputError(f"the dev set is too small: {total} tokens with framing, need at least "
                         f"{unroll + 1}", path=path)
    carry = model.bilm.lstm.zero_state(bsz, device)
    nll = torch.zeros(2, dtype=torch.float64)
    for w in streams.windows():
        inputs = torch.from_numpy(w.inputs).to(device)
        y = type2vocab[torch.from_numpy(w.targets).to(device)]
        s, carry = model.full_nll(type_chars, inputs, y, carry)
        nll += s.double().cpu()
        if progress is not None:
            progress(w.index + 1, streams.n_windows)
    count = streams.n_windows * bsz * unroll
    fwd, bwd = (math.exp(v / count) for v in nll.tolist())
    return {"fwd": fwd, "bwd": bwd, "mean": (fwd + bwd) / 2, "tokens": count}


def _head(framed, max_tokens: Optional[int]):
    """The leading sentences of ``framed`` holding about ``max_tokens`` tokens (all if None)."""
    if max_tokens is None:
        return framed
    out, n = [], 0
    for s in framed:
        if n >= max_tokens:
            break
        out.append(s)
        n += len(s)
    return out


@torch.no_grad()
def evaluate(model: BiLanguageModel, data: LMData, batch_size: int, unroll: int,
             device: torch.device, max_tokens: Optional[int] = None) -> dict:
    """Full-softmax dev perplexity per direction (file order, state carried across windows).

    ``mean`` is the average of the forward and backward perplexities (as in the ELMo paper).
    With several dev files each is evaluated on its own (``sets``, by name) and ``fwd``,
    ``bwd`` and ``mean`` are the averages over the files (each corpus counts the same, whatever
    its size); ``tokens`` is their sum.
    """
    sets = data.dev_sets or [(str(data.dev_path), data.dev_framed)]
    paths = data.dev_paths or [data.dev_path]
    per = {name: perplexity(model, _head(framed, max_tokens), data.type_chars, data.type2vocab,
                            batch_size, unroll, device, path)
           for (name, framed), path in zip(sets, paths)}
    if len(per) == 1:
        return dict(next(iter(per.values())))
    res = {k: sum(r[k] for r in per.values()) / len(per) for k in ("fwd", "bwd", "mean")}
    res["tokens"] = sum(r["tokens"] for r in per.values())
    res["sets"] = per
    return res


def train(corpus, dev, out, cfg: TrainConfig, resume: bool = False, device: str = "auto",
          task: Optional[TaskState] = None, show_progress: bool = True,
          command: Optional[str] = None, log: Optional[Callable[[str], None]] = None
          ) -> TrainResult:
    """Train (or resume training) a biLM and export it to ``out``.

    Raises
    ------
    InputError : bad corpus/dev file or settings; CheckpointError : unusable state on resume;
    CancelledError : ``task`` was cancelled (after the checkpoint of the current step is written)
    """
    out = Path(out)
    ctx = ddp.setup(device)
    try:
        return _train(corpus, dev, out, cfg, resume, ctx, task, show_progress, command, log)
    finally:
        ddp.cleanup(ctx)


def _train(corpus, dev, out, cfg, resume, ctx, task, show_progress, command, log) -> TrainResult:
    from tqdm import tqdm

    say = (log or (lambda m: print(m, file=sys.stderr, flush=True))) if ctx.is_main else (lambda m: None)
    doc: Optional[dict] = None
    tensors: Dict[str, torch.Tensor] = {}
    if resume:
        doc, tensors = state_io.load_state(out)
        state_io.check_document(doc, Path(out) / state_io.STATE_DIR / state_io.STATE_JSON)
        saved = TrainConfig.from_dict(doc["config"])
        for name in RUN_CONTROL:
            setattr(saved, name, getattr(cfg, name))
        cfg = saved
    cfg.check()
    if cfg.precision == "bf16" and ctx.device.type == "cpu" and not runtime.cpu_bf16().offered:
        raise InputError(runtime.cpu_bf16().refusal())
    if cfg.batch_size % ctx.world_size:
        raise InputError(f"batch size {cfg.batch_size} is not divisible by the {ctx.world_size} "
                         "processes")
    torch.manual_seed(cfg.seed)
    say(f"reading {corpus} and {dev} …")
    data = prepare_data(corpus, dev, out, cfg, ctx.device, doc, write=ctx.is_main)
    say(f"{data.summary()}")
    opts = cfg.bilm_options()
    if doc is not None:            # the state's tensors against its config, before any model
        state_io.check_tensor_shapes(lambda: BiLanguageModel(opts, len(data.vocab),
                                                             fused=cfg.fused),
                                     tensors, Path(out) / state_io.STATE_DIR)
    model = BiLanguageModel(opts, len(data.vocab), fused=cfg.fused).to(ctx.device)
    gen = torch.Generator().manual_seed(cfg.seed)
    with torch.no_grad():
        cpu_model = BiLanguageModel(opts, len(data.vocab))
        cpu_model.reset_parameters(gen)
        model.load_state_dict(cpu_model.state_dict())
    opt = make_optimizer(model, cfg)
    step, epoch, window, tokens, elapsed_before = 0, 0, 0, 0, 0.0
    history: Dict[str, Any] = {"train": [], "dev": []}       # the run's JSON record
    bsz_local = cfg.batch_size // ctx.world_size
    rows = slice(ctx.rank * bsz_local, (ctx.rank + 1) * bsz_local)
    carry = model.bilm.lstm.zero_state(bsz_local, ctx.device)
    if doc is not None:
        state_io.restore_model(model, tensors, out)
        state_io.restore_optimizer(opt, tensors, doc["optimizer"])
        for group in opt.param_groups:    # a cooldown given or dropped on resume applies now
            group["lr"] = cfg.lr_at(doc["train_seconds"])
        gen.set_state(tensors["rng.train"])
        torch.set_rng_state(tensors["rng.torch"])
        step, epoch, window = doc["step"], doc["epoch"], doc["window"]
        tokens, elapsed_before, history = doc["tokens"], doc["train_seconds"], doc["history"]
        saved_carry = state_io.restore_carry(tensors, opts.n_layers)
        if saved_carry is not None:
            carry = [(c[:, rows].to(ctx.device), h[:, rows].to(ctx.device)) for c, h in saved_carry]
        say(f"resuming at step {step} (epoch {epoch + 1}, window {window})")
    first_command = (doc or {}).get("command") or command
    resumed_with = list((doc or {}).get("resumed_with") or []) + ([command] if doc else [])
    net = ddp.wrap(model, ctx)
    sampler = LogUniformSampler(len(data.vocab), cfg.n_negative)
    logq = sampler.log_expected.to(ctx.device)
    n_windows = Streams(data.train_framed, cfg.batch_size, cfg.unroll).n_windows
    if n_windows == 0:
        raise InputError(f"the corpus is too small for one batch of {cfg.batch_size} rows × "
                         f"{cfg.unroll + 1} tokens; lower --batch-size or --unroll",
                         path=data.train_path)
    planned = cfg.epochs * n_windows if cfg.max_steps is None else min(cfg.max_steps,
                                                                        cfg.epochs * n_windows)
    p = opts.output_dim
    t0 = time.monotonic()
    last_ckpt = t0
    stop: Optional[str] = None
    interval = [0.0, 0.0, 0]
    paused = [0.0]                  # seconds spent evaluating: not training time

    def elapsed() -> float:
        return elapsed_before + time.monotonic() - t0 - paused[0]

    last_eval = [elapsed()]

    def periodic_eval() -> Optional[str]:
        """Dev perplexity + a snapshot; "early_stopped" when patience ran out."""
        began = time.monotonic()
        entry = _dev_entry(model, data, cfg, ctx, step, epoch + window / n_windows, say,
                           cfg.eval_tokens)
        history["dev"].append(entry)
        if ctx.is_main:
            snap = out / SNAPSHOT_DIR / f"step-{step:07d}"
            state_io.export_model(model.bilm, snap, data.vocab, {
                "step": step, "tokens": tokens, "train_seconds": round(elapsed(), 1),
                "dev_perplexity": entry, "config": asdict(cfg)}, {},
                softmax=(model.softmax_w, model.softmax_b))
        verdict = _track_best(history, entry, cfg.patience)
        paused[0] += time.monotonic() - began
        last_eval[0] = elapsed()
        return verdict

    def checkpoint() -> None:
        full = [(ddp.gather_rows(c, ctx), ddp.gather_rows(h, ctx)) for c, h in carry]
        if ctx.is_main:
            info = {"command": first_command, "resumed_with": resumed_with,
                    "step": step, "epoch": epoch, "window": window, "tokens": tokens,
                    "train_seconds": elapsed(), "config": asdict(cfg), "history": history,
                    "data": data.fingerprint(), "world_size": ctx.world_size}
            state_io.save_state(out, model, opt, full, gen, info)
        ddp.barrier(ctx)

    bar = tqdm(total=planned * cfg.batch_size * cfg.unroll, initial=min(step, planned) *
               cfg.batch_size * cfg.unroll, unit="tok", unit_scale=True, dynamic_ncols=True,
               disable=not (show_progress and ctx.is_main), mininterval=1.0 if sys.stderr.isatty() else 30.0,
               desc="train-lm")
    spent = cfg.max_minutes is not None and elapsed() >= cfg.max_minutes * 60
    if ddp.broadcast_flag(spent, ctx):      # resuming a run whose time budget is used up
        stop = "time_budget"
    with StopFlag() as sigint:
        while epoch < cfg.epochs and stop is None:
            docs = data.train_doc_starts if cfg.shuffle == "documents" else None
            streams = Streams(data.train_framed, cfg.batch_size, cfg.unroll,
                              epoch_order(len(data.train_framed), cfg.seed, epoch, docs))
            for k in range(window, streams.n_windows):
                if cfg.max_steps is not None and step >= cfg.max_steps:
                    stop = "max_steps"
                    break
                w = streams.window(k)
                neg = sampler.sample(gen)                               # (K',) shared
                masks = None
                if cfg.dropout > 0:
                    keep = torch.rand((2, 2, cfg.batch_size, cfg.unroll, p), generator=gen)
                    masks = ((keep >= cfg.dropout).float() / (1 - cfg.dropout))[:, :, rows]
                    masks = masks.to(ctx.device)                        # (2 masks, 2, b, T, P)
                inputs = torch.from_numpy(w.inputs[:, rows]).to(ctx.device)
                y = data.type2vocab[torch.from_numpy(w.targets[:, rows]).to(ctx.device)]
                neg_d = neg.to(ctx.device)
                with torch.autocast(ctx.device.type, dtype=torch.bfloat16,
                                    enabled=cfg.precision == "bf16"):
                    loss, carry = net(data.type_chars, inputs, y, carry, neg_d, logq[neg_d],
                                      logq[y], None if masks is None else masks[0],
                                      None if masks is None else masks[1])
                opt.zero_grad(set_to_none=True)
                loss.sum().backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
                if cfg.cooldown_minutes is not None:
                    lr_now = cfg.lr_at(elapsed())
                    for group in opt.param_groups:
                        group["lr"] = lr_now
                opt.step()
                carry = [(c.detach(), h.detach()) for c, h in carry]
                step += 1
                window = k + 1
                tokens += cfg.batch_size * cfg.unroll
                lv = ddp.all_mean(loss.detach(), ctx).cpu().tolist()
                interval[0] += lv[0]
                interval[1] += lv[1]
                interval[2] += 1
                bar.update(cfg.batch_size * cfg.unroll)
                bar.set_postfix(fwd=f"{lv[0]:.3f}", bwd=f"{lv[1]:.3f}", refresh=False)
                if task is not None:
                    task.report(step, planned, f"step {step}/{planned}: loss {lv[0]:.3f} / {lv[1]:.3f}")
                if step % cfg.log_every == 0 or step == planned:
                    f, b = interval[0] / interval[2], interval[1] / interval[2]
                    history["train"].append([step, round(f, 5), round(b, 5)])
                    rate = (tokens - (doc or {}).get("tokens", 0)) / max(time.monotonic() - t0, 1e-9)
                    line = (f"step {step}/{planned} epoch {epoch + 1} loss fwd {f:.4f} bwd {b:.4f}"
                            f" | {rate:.0f} tok/s | {elapsed() / 60:.1f} min")
                    if ctx.is_main:
                        (log or bar.write)(line)
                    interval[:] = [0.0, 0.0, 0]
                cancel = task is not None and task.cancelled
                over = cfg.max_minutes is not None and elapsed() >= cfg.max_minutes * 60
                flags = ddp.broadcast_flag(sigint.set or cancel, ctx), ddp.broadcast_flag(over, ctx)
                if flags[0]:
                    stop = "cancelled" if cancel else "interrupted"
                elif flags[1]:
                    stop = "time_budget"
                elif cfg.max_steps is not None and step >= cfg.max_steps:
                    stop = "max_steps"
                if (stop is None and cfg.eval_minutes is not None and ddp.broadcast_flag(
                        elapsed() - last_eval[0] >= cfg.eval_minutes * 60, ctx)):
                    if ddp.broadcast_flag(periodic_eval() is not None, ctx):
                        stop = "early_stopped"
                        checkpoint()
                due = (step % cfg.checkpoint_every == 0
                       or time.monotonic() - last_ckpt >= cfg.checkpoint_minutes * 60)
                if ddp.broadcast_flag(due, ctx) and stop is None:
                    checkpoint()
                    last_ckpt = time.monotonic()
                if stop is not None:
                    break
            if stop is None:
                if cfg.eval_minutes is not None:     # comparable with the periodic evaluations
                    if ddp.broadcast_flag(periodic_eval() is not None, ctx):
                        stop = "early_stopped"
                else:
                    history["dev"].append(_dev_entry(model, data, cfg, ctx, step, epoch + 1, say))
                epoch, window = epoch + 1, 0
                carry = model.bilm.lstm.zero_state(bsz_local, ctx.device)
                checkpoint()
                last_ckpt = time.monotonic()
    bar.close()
    train_seconds = elapsed()
    if stop in ("cancelled", "interrupted"):
        checkpoint()
        say(f"stopped after step {step}; training state saved in {out / state_io.STATE_DIR} "
            "(continue with --resume)")
        if stop == "cancelled":
            raise CancelledError("training cancelled")
        return TrainResult(out, step, tokens, stop, train_seconds, None, history)
    stop = stop or "finished"
    periodic = cfg.eval_minutes is not None
    if not history["dev"] or history["dev"][-1]["step"] != step:
        history["dev"].append(_dev_entry(model, data, cfg, ctx, step, epoch + window / n_windows,
                                         say, cfg.eval_tokens if periodic else None))
        if periodic:
            _track_best(history, history["dev"][-1], None)
    checkpoint()
    dev_result = history["dev"][-1]
    export_model, export_bilm = model, model.bilm
    softmax: Tuple[torch.Tensor, torch.Tensor] = (model.softmax_w, model.softmax_b)
    best = history.get("best")
    if periodic and best is not None and best["step"] != step:
        # the best dev perplexity was reached at an earlier snapshot: that is the model
        from elmo_engine.model.checkpoint import load_checkpoint

        snap = out / SNAPSHOT_DIR / f"step-{best['step']:07d}"
        export_bilm = load_checkpoint(snap)
        softmax = state_io.load_softmax(snap / state_io.SOFTMAX_FILE, len(data.vocab),
                                        opts.output_dim)
        export_model = BiLanguageModel(opts, len(data.vocab), fused=False)
        export_model.bilm = export_bilm.to(ctx.device)
        export_model.softmax_w = torch.nn.Parameter(softmax[0].to(ctx.device), requires_grad=False)
        export_model.softmax_b = torch.nn.Parameter(softmax[1].to(ctx.device), requires_grad=False)
        say(f"exporting the snapshot of step {best['step']}, the best dev perplexity "
            f"({best['mean']:.2f})")
    if periodic and (cfg.eval_tokens is not None or export_model is not model):
        # the exported model on every dev file whole
        dev_result = _dev_entry(export_model, data, cfg, ctx, best["step"] if best else step,
                                dev_result["epoch"], say)
        history["final"] = dev_result
    if ctx.is_main:
        meta = {"command": first_command, "resumed_with": resumed_with, "stopped": stop, "steps": step,
                "tokens": tokens, "epochs_done": round(epoch + window / n_windows, 4),
                "train_seconds": round(train_seconds, 1), "dev_perplexity": dev_result,
                "config": asdict(cfg), "data": data.fingerprint(), "world_size": ctx.world_size,
                "torch": torch.__version__, "threads": torch.get_num_threads(),
                "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "history": history}
        extra = {"n_tokens_vocab": len(data.vocab), "unroll_steps": cfg.unroll,
                 "batch_size": cfg.batch_size, "n_negative_samples_batch": cfg.n_negative,
                 "dropout": cfg.dropout, "all_clip_norm_val": cfg.clip_norm, "bidirectional": True,
                 "n_epochs": cfg.epochs, "n_train_tokens": data.n_train_tokens}
        if export_bilm is not model.bilm and best is not None:
            meta["exported_step"] = best["step"]
        state_io.export_model(export_bilm, out, data.vocab, meta, extra, softmax=softmax)
        say(f"exported {out / 'options.json'} and {out / 'lm_weights.hdf5'}")
    ddp.barrier(ctx)
    return TrainResult(out, step, tokens, stop, train_seconds, dev_result, history)


SNAPSHOT_DIR = "snapshots"


def _track_best(history: dict, entry: dict, patience: Optional[int]) -> Optional[str]:
    """Record ``entry`` as the best dev result if it is; "early_stopped" once ``patience``
    evaluations in a row brought no better one."""
    best = history.get("best")
    if "mean" not in entry:
        return None
    if best is None or entry["mean"] < best["mean"]:
        history["best"] = {"step": entry["step"], "mean": entry["mean"]}
        history["since_best"] = 0
        return None
    history["since_best"] = history.get("since_best", 0) + 1
    if patience is not None and history["since_best"] >= patience:
        return "early_stopped"
    return None


def _dev_entry(model, data, cfg, ctx, step, epoch, say, max_tokens=None) -> dict:
    res = None
    if ctx.is_main:
        part = "" if max_tokens is None else f", the first {max_tokens} tokens of each file"
        say(f"evaluating dev perplexity (full softmax{part}) …")
        res = evaluate(model, data, cfg.batch_size, cfg.unroll, ctx.device, max_tokens)
        say(f"dev perplexity at step {step}: forward {res['fwd']:.2f}, backward "
            f"{res['bwd']:.2f}, mean {res['mean']:.2f} ({res['tokens']} tokens)")
        for name, r in (res.get("sets") or {}).items():
            say(f"  {name}: forward {r['fwd']:.2f}, backward {r['bwd']:.2f}, mean {r['mean']:.2f}")
    ddp.barrier(ctx)
    entry = {"step": step, "epoch": round(float(epoch), 4), **(res or {})}
    if max_tokens is not None:
        entry["eval_tokens"] = max_tokens
    return entry
