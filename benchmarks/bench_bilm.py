"""Speed and memory of the biLM engine against a straightforward baseline, in one run.

Writes random-weight checkpoints of the published sizes (original 2x4096_512_2048cnn_2xhighway and
small 2x1024_128_2048cnn_1xhighway) in the published layout to a temporary folder, then prints for
each: tokens/s on a batch of 64 sentences of ~25 tokens for our engine and for a baseline path
(per-timestep cell computing ``concat(x, h) @ W_0`` every step, char-CNN for every token, no
caches), the ratio, the max |difference|, the latency of one 10-token sentence, and the peak memory
of loading the model (in a fresh process) relative to the weights' size.

It also prints the host (CPU, flags avx512f/avx512_bf16/amx_bf16, torch's capability, threads),
the measured GEMM rates in float32 and bf16, the model's FLOPs per token and the share of the
float32 ceiling (GEMM rate / FLOPs per token) that ``ours`` reaches; and, on a CPU with bf16 units
(or with ``--bf16``), ours in bf16 (``--precision bf16``) against ours in float32 in the same run,
with the per-layer cosine of the two (median, 0.1 % quantile).

    python benchmarks/bench_bilm.py [--models original small] [--threads 2] [--repeats 3]
    python benchmarks/bench_bilm.py --crossover    # directions side by side or one after the other
    python benchmarks/bench_bilm.py --gemm         # GEMMs by one LSTM weight, plain or packed
    python benchmarks/bench_bilm.py --varied 300   # real sentences of 1-59 tokens, default batching
    python benchmarks/bench_bilm.py --profile      # torch.profiler: where the float32 time goes
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hostinfo
from elmo_engine import runtime
from elmo_engine.embed.fidelity import layer_fidelity
from elmo_engine.model.bilm import BiLM
from elmo_engine.model.chars import batch_to_ids
from elmo_engine.model.checkpoint import load_checkpoint, save_published
from elmo_engine.model.flops import flops_per_token
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.options import BiLMOptions
from elmo_engine.model.reference import conv1d_token_layer

FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
MODELS = {
    "original": dict(lstm_dim=4096, projection_dim=512, n_highway=2),
    "small": dict(lstm_dim=1024, projection_dim=128, n_highway=1),
}
WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when if "
         "so no will can more river bank money play music theatre government economy history "
         "society people market trade war world century states political social between during "
         "because through important however example different").split()


def random_checkpoint(name: str, folder: Path) -> Path:
    opts = BiLMOptions(filters=FILTERS, **MODELS[name])
    torch.manual_seed(0)
    model = BiLM(opts)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02 if p.dim() > 1 else 0.1)
    save_published(model, folder / name)
    return folder / name


CORPUS = ROOT.parent / "shared" / "data" / "openstax_prose" / "valid.txt"


def corpus_sentences(n: int, length: int, path: Path = CORPUS, spread: int = 3):
    """The first ``n`` sentences of real prose with ``length`` ± ``spread`` tokens (1B-Word
    tokenized): real text repeats word types far less than a small synthetic vocabulary, so the
    per-type caches save what they would save on a user's text."""
    import re

    from elmo_engine.model.tokenize import tokenize
    found = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("= "):                 # section headings
                continue
            for sent in re.split(r"(?<=[.!?])\s+(?=[A-Z])", line.strip()):
                toks = tokenize(sent)
                if abs(len(toks) - length) <= spread:
                    found.append(toks)
                    if len(found) == n:
                        return found
    raise SystemExit(f"{path} has only {len(found)} sentences of {length} ± {spread} tokens")


def sentences(n: int, length: int, seed: int = 0):
    """Synthetic sentences drawn from a small vocabulary (used without the shared corpus)."""
    rng = np.random.default_rng(seed)
    return [[WORDS[i] for i in rng.integers(0, len(WORDS), int(rng.integers(length - 3, length + 4)))]
            for _ in range(n)]


@torch.no_grad()
def baseline(model: BiLM, sents):
    """Straightforward batched biLM: every token through the char-CNN, W_0 on concat(x, h)."""
    o = model.opts
    ids = torch.from_numpy(batch_to_ids(sents))
    bsz, steps, m = ids.shape
    mask = (ids > 0).any(-1)
    lengths = mask.sum(1)
    tok = conv1d_token_layer(model.char_cnn, ids.reshape(-1, m)).reshape(bsz, steps, -1)
    tok = tok * mask[..., None]
    outs = [torch.cat([tok, tok], -1)]
    dir_outputs = []
    for d in range(2):
        rev = torch.stack([torch.cat([torch.arange(n - 1, -1, -1), torch.arange(n, steps)])
                           for n in lengths.tolist()])
        x = tok if d == 0 else tok.gather(1, rev[..., None].expand_as(tok))
        layer_outs = []
        for layer in range(o.n_layers):
            w0 = torch.cat([model.lstm.w_in[layer][d], model.lstm.w_rec[layer][d]], 0)
            b = model.lstm.b[layer][d].clone()
            b[2 * o.lstm_dim:3 * o.lstm_dim] += 1.0
            c = torch.zeros(bsz, o.lstm_dim)
            h = torch.zeros(bsz, o.output_dim)
            hs = []
            for t in range(steps):
                z = torch.cat([x[:, t], h], 1) @ w0 + b
                i, j, f, og = z.chunk(4, 1)
                c_new = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)).clamp(-3, 3)
                h_new = (torch.sigmoid(og) * torch.tanh(c_new)) @ model.lstm.wp[layer][d]
                h_new = h_new.clamp(-3, 3)
                live = (t < lengths)[:, None].float()
                c = live * c_new + (1 - live) * c
                h = live * h_new + (1 - live) * h
                hs.append(h_new * live)
            out = torch.stack(hs, 1)
            if o.use_skip_connections and layer > 0:
                out = out + x
            layer_outs.append(out)
            x = out
        if d == 1:
            layer_outs = [lo.gather(1, rev[..., None].expand_as(lo)) for lo in layer_outs]
        dir_outputs.append(layer_outs)
    for layer in range(o.n_layers):
        outs.append(torch.cat([dir_outputs[0][layer], dir_outputs[1][layer]], -1))
    full = torch.stack(outs)
    return [full[:, r, 1:len(s) + 1].numpy() for r, s in enumerate(sents)]


def profile(args) -> None:
    """torch.profiler over the full model's float32 embed of the benchmark batch: the top
    operators by self CPU time, with their input shapes (the LSTM's GEMMs, the char-CNN's, the
    highway's, the elementwise gate arithmetic). The directions run one after the other in the
    calling thread here (the profiler does not follow the side-by-side worker threads), so the
    total is not the timed runs' wall time; the shares are what to read."""
    import dataclasses

    from torch.profiler import ProfilerActivity, profile as torch_profile

    sents = corpus_sentences(args.batch, args.length) if args.text == "corpus" else \
        sentences(args.batch, args.length)
    with tempfile.TemporaryDirectory() as tmp:
        model = load_checkpoint(random_checkpoint("original", Path(tmp)))
        for precision in (["fp32", "bf16"] if args.bf16 else ["fp32"]):
            emb = Embedder(model, device="cpu", token_budget=10 ** 6, precision=precision)
            emb.model.fast_path = dataclasses.replace(emb.model.fast_path,
                                                      parallel_min_rows=10 ** 9)
            emb.embed(sentences(4, 8, seed=1))
            emb.clear_cache()
            with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                emb.embed(sents)
            print(f"[original] {precision}, {sum(len(s) for s in sents)} tokens, "
                  f"{args.threads} threads (the directions' worker threads included)")
            print(prof.key_averages(group_by_input_shape=True).table(
                sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=40,
                max_shapes_column_width=60))


def timed_pair(ours, base, repeats):
    """Best-of-``repeats`` wall time of each, the two runs alternating so that both see the same
    share of a shared machine's slow and fast moments. Returns ((t, result), (t, result))."""
    best = [float("inf"), float("inf")]
    results = [None, None]
    for _ in range(repeats):
        for i, fn in enumerate((ours, base)):
            t0 = time.perf_counter()
            results[i] = fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return (best[0], results[0]), (best[1], results[1])


@torch.no_grad()
def weight_streaming_ms(model: BiLM, steps: int, repeats: int) -> float:
    """Best time of the two GEMVs alone (h·W_rec, m·W_proj) for ``steps`` steps of every layer
    and direction of one sentence, in the order the engine runs them: a floor for the latency
    of one sentence, set by how fast the cores can stream each step's weights."""
    lstm = model.lstm
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for d in range(2):
            for layer in range(model.opts.n_layers):
                w_rec, wp = lstm.w_rec[layer][d], lstm.wp[layer][d]
                h = torch.zeros(1, w_rec.shape[0])
                z = torch.zeros(1, w_rec.shape[1])
                m = torch.zeros(1, wp.shape[0])
                for _ in range(steps):
                    z.addmm_(h, w_rec)
                    h = m @ wp
        best = min(best, time.perf_counter() - t0)
    return 1000 * best


def peak_load_memory(path: Path) -> tuple:
    """(high-water RSS before, after loading) in a fresh process, in bytes.

    Reads VmHWM from /proc (ru_maxrss would carry the parent's high-water mark across exec).
    """
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import torch, h5py, numpy\n"
            "from elmo_engine.model.checkpoint import load_checkpoint\n"
            "torch.nn.Linear(4, 4)(torch.zeros(2, 4)).sum()  # torch's own one-time set-up\n"
            "def hwm():\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('VmHWM:'):\n"
            "            return int(line.split()[1]) * 1024\n"
            "base = hwm()\n"
            "m = load_checkpoint(%r)\n"
            "print(base, hwm())\n") % (str(ROOT), str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, peak = map(int, out.stdout.split())
    return base, peak


def crossover(args) -> None:
    """Time the full model on batches of 1..64 sentences of ~12 tokens, both ways."""
    import dataclasses

    with tempfile.TemporaryDirectory() as tmp:
        model = load_checkpoint(random_checkpoint("original", Path(tmp)))
        emb = Embedder(model, device="cpu", token_budget=10 ** 6)
        emb.embed(sentences(4, 8, seed=1))
        for rows in (1, 2, 4, 8, 16, 32, 64):
            sents = sentences(rows, 12, seed=3)
            emb.embed(sents)                               # word types cached
            best = {}
            for _ in range(args.repeats + 2):
                for mode, threshold in (("side by side", 0), ("one after the other", 10 ** 9)):
                    model.fast_path = dataclasses.replace(model.fast_path,
                                                          parallel_min_rows=threshold)
                    emb.sentence_cache.clear()
                    t0 = time.perf_counter()
                    emb.embed(sents)
                    best[mode] = min(best.get(mode, float("inf")), time.perf_counter() - t0)
            print(f"{rows:3d} rows: " + ", ".join(f"{m} {1000 * t:.1f} ms" for m, t in best.items()),
                  flush=True)


@torch.no_grad()
def gemm(args) -> None:
    """The full model's GEMMs by a 512 × 16,384 weight, plain against the weight pre-packed for
    oneDNN (what the engine uses on the CPU), on one core and on all: one step's recurrent GEMM
    with the step's input projection added (``z + h·W_rec``), and an input projection with its
    bias (``b + x·W_in``)."""
    from elmo_engine.model.cpu_fast import onednn_packing
    if not onednn_packing():
        raise SystemExit("this torch build cannot pre-pack weights for oneDNN")
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(512, 16384, generator=gen) * 0.02
    bias = torch.randn(16384, generator=gen)
    t0 = time.perf_counter()
    packed = torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous())
    print(f"packing the weight once: {1000 * (time.perf_counter() - t0):.0f} ms")
    for threads in sorted({1, args.threads}):
        torch.set_num_threads(threads)
        for rows in (1, 2, 4, 8, 11, 16, 32, 64, 128, 256):
            h = torch.randn(rows, 512, generator=gen)
            z = torch.randn(rows, 16384, generator=gen)
            (t_plain, _), (t_packed, _) = timed_pair(
                lambda: torch.addmm(z, h, w),
                lambda: torch.ops.mkldnn._linear_pointwise.binary(h, z, packed, None, "add"),
                args.repeats + 7)
            (t_in, _), (t_in_packed, _) = timed_pair(
                lambda: torch.addmm(bias, h, w),
                lambda: torch.ops.mkldnn._linear_pointwise(h, packed, bias, "none", [], ""),
                args.repeats + 7)
            print(f"{threads} thread(s) {rows:4d} rows: recurrent step plain {1000 * t_plain:6.2f}"
                  f" ms, packed {1000 * t_packed:6.2f} ms ({t_plain / t_packed:.2f}x); input "
                  f"projection plain {1000 * t_in:6.2f} ms, packed {1000 * t_in_packed:6.2f} ms "
                  f"({t_in / t_in_packed:.2f}x)", flush=True)


def varied(args) -> None:
    """The app's kind of job: real sentences of 1-59 tokens through the embedder with its default
    batching (a token budget, so batches of many different row counts), every cache emptied
    before each timed call."""
    sents = corpus_sentences(args.varied, 30, spread=29)
    n_tok = sum(len(s) for s in sents)
    with tempfile.TemporaryDirectory() as tmp:
        model = load_checkpoint(random_checkpoint("original", Path(tmp)))
        emb = Embedder(model, device="cpu")
        emb.embed(sents[:3])
        best = float("inf")
        for _ in range(args.repeats):
            emb.clear_cache()
            t0 = time.perf_counter()
            emb.embed(sents)
            best = min(best, time.perf_counter() - t0)
        batches = len(list(emb._batches(sorted((tuple(s) for s in sents), key=len, reverse=True))))
    print(f"[original] {len(sents)} corpus sentences of 1-59 tokens, {n_tok} tokens, {batches} "
          f"batches (token budget {emb.token_budget}), {args.threads} threads: "
          f"{n_tok / best:.0f} tokens/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["original", "small"], choices=list(MODELS))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=25)
    ap.add_argument("--text", choices=("corpus", "synthetic"),
                    default="corpus" if CORPUS.exists() else "synthetic",
                    help=f"real sentences from {CORPUS.relative_to(ROOT.parent)} (default when "
                         "present) or random draws from a small vocabulary")
    ap.add_argument("--crossover", action="store_true",
                    help="only time batches of 1-64 rows with the directions side by side "
                         "and one after the other (sets the model's FastPath.parallel_min_rows)")
    ap.add_argument("--gemm", action="store_true",
                    help="only time the GEMMs by one LSTM weight, plain and with the weight "
                         "pre-packed for oneDNN")
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                    help="also time ours in bf16 (default: where the CPU has bf16 units)")
    ap.add_argument("--profile", action="store_true",
                    help="only profile the full model's embed (torch.profiler, top operators)")
    ap.add_argument("--varied", type=int, metavar="N",
                    help="only time N real sentences of 1-59 tokens with the embedder's default "
                         "batching")
    args = ap.parse_args()
    runtime.configure(threads=args.threads)
    if args.bf16 is None:
        args.bf16 = runtime.cpu_bf16().offered
    print(hostinfo.host_line(), flush=True)
    if args.profile:
        profile(args)
        return
    if args.crossover:
        crossover(args)
        return
    if args.gemm:
        gemm(args)
        return
    if args.varied:
        varied(args)
        return
    if args.text == "corpus":
        pool = corpus_sentences(args.batch + 1, args.length)
        batch_sents, one = pool[:args.batch], [pool[-1][:10]]
    else:
        batch_sents = sentences(args.batch, args.length)
        one = sentences(1, 10, seed=2)
        one[0] = one[0][:10]
    rates, fp32_rate, bf16_rate = hostinfo.rates_line()
    print(rates, flush=True)
    results = {"host": hostinfo.host_line(), "gemm_gflops_fp32": fp32_rate,
               "gemm_gflops_bf16": bf16_rate}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path = random_checkpoint(name, Path(tmp))
            weights_bytes = (path / "lm_weights.hdf5").stat().st_size
            base_rss, peak_rss = peak_load_memory(path)
            model = load_checkpoint(path)
            sents = batch_sents
            n_tok = sum(len(s) for s in sents)
            emb = Embedder(model, device="cpu", token_budget=10 ** 6)
            emb.embed(sentences(4, 8, seed=1))              # warm-up (allocator, threads)

            def ours():
                emb.clear_cache()
                return emb.embed(sents)

            (t_ours, out_ours), (t_base, out_base) = timed_pair(
                ours, lambda: baseline(model, sents), args.repeats)
            diff = max(float(np.abs(a - b).max()) for a, b in zip(out_ours, out_base))

            def single():
                emb.clear_cache()
                return emb.embed(one)

            (t_one, _), (t_one_base, _) = timed_pair(single, lambda: baseline(model, one),
                                                     args.repeats + 2)
            emb.embed(one)

            def single_known_words():                   # the app's case: types already seen
                emb.sentence_cache.clear()
                return emb.embed(one)

            (t_one_warm, _), _ = timed_pair(single_known_words, lambda: None, args.repeats + 2)
            floor_ms = weight_streaming_ms(model, len(one[0]) + 1, args.repeats + 2)
            r = {
                "tokens": n_tok,
                "ours_tokens_per_s": n_tok / t_ours,
                "baseline_tokens_per_s": n_tok / t_base,
                "speedup": t_base / t_ours,
                "max_abs_diff": diff,
                "one_sentence_ms": 1000 * t_one,
                "one_sentence_baseline_ms": 1000 * t_one_base,
                "one_sentence_known_words_ms": 1000 * t_one_warm,
                "one_sentence_weight_streaming_ms": floor_ms,
                "weights_mb": weights_bytes / 1e6,
                "load_peak_over_weights": (peak_rss - base_rss) / weights_bytes,
            }
            results[name] = r
            n_types = len({t for s in sents for t in s})
            nominal = flops_per_token(model.opts)
            engine = flops_per_token(model.opts, (n_types + 2) / n_tok)
            ceiling = fp32_rate * 1e9 / nominal.total
            r.update(flops_per_token=nominal.total, flops_per_token_engine=engine.total,
                     fp32_ceiling_tokens_per_s=ceiling,
                     share_of_fp32_ceiling=hostinfo.ceiling_share(nominal.total * n_tok, t_ours))
            if args.bf16:
                emb16 = Embedder(load_checkpoint(path), device="cpu", token_budget=10 ** 6,
                                 precision="bf16")
                emb16.embed(sentences(4, 8, seed=1))

                def ours16():
                    emb16.clear_cache()
                    return emb16.embed(sents)

                (t32, out32), (t16, out16) = timed_pair(ours, ours16, args.repeats)
                fid = layer_fidelity(out32, out16)
                r.update(fp32_tokens_per_s=n_tok / t32, bf16_tokens_per_s=n_tok / t16,
                         bf16_over_fp32=t32 / t16,
                         share_of_bf16_ceiling=hostinfo.ceiling_share(
                             nominal.total * n_tok, t16, "bf16") if bf16_rate else None,
                         bf16_cosine=[{"layer": f.layer, "median": f.median, "q001": f.q001,
                                       "min": f.minimum} for f in fid])
                del emb16
            print(f"[{name}] batch of {args.batch} {args.text} sentences, {n_tok} tokens "
                  f"({n_types} types), {args.threads} threads")
            print(f"  FLOPs per token: {nominal.total / 1e6:.0f} M nominal (LSTM "
                  f"{nominal.lstm / 1e6:.0f} M, char CNN {nominal.char_cnn / 1e6:.0f} M, "
                  f"highway {nominal.highway / 1e6:.0f} M, projection "
                  f"{nominal.projection / 1e6:.1f} M); {engine.total / 1e6:.0f} M with the "
                  "token layer once per type")
            print(f"  ours      {r['ours_tokens_per_s']:8.0f} tokens/s = "
                  f"{100 * r['share_of_fp32_ceiling']:.0f} % of the float32 ceiling "
                  f"({ceiling:.0f} tokens/s at {fp32_rate:.0f} GFLOP/s); the FLOPs it computes "
                  f"run at {100 * r['ours_tokens_per_s'] * engine.total / 1e9 / fp32_rate:.0f} "
                  "% of the GEMM rate")
            print(f"  baseline  {r['baseline_tokens_per_s']:8.0f} tokens/s   ratio {r['speedup']:.2f}x")
            print(f"  max |ours - baseline| = {diff:.2e}")
            print(f"  one 10-token sentence: ours {r['one_sentence_ms']:.1f} ms, baseline "
                  f"{r['one_sentence_baseline_ms']:.1f} ms; ours with its word types cached "
                  f"{r['one_sentence_known_words_ms']:.1f} ms")
            print(f"    of which streaming each step's LSTM weights alone (the two GEMVs of "
                  f"{len(one[0]) + 1} steps x {2 * model.opts.n_layers} layer-directions): "
                  f"{floor_ms:.1f} ms")
            if args.bf16:
                print(f"  bf16      {r['bf16_tokens_per_s']:8.0f} tokens/s against float32 "
                      f"{r['fp32_tokens_per_s']:.0f} in the same rounds: {r['bf16_over_fp32']:.2f}x"
                      + (f"; {100 * r['share_of_bf16_ceiling']:.0f} % of the bf16 ceiling"
                         if r["share_of_bf16_ceiling"] is not None else ""))
                print("  bf16 vs float32 cosine per layer (median / 0.1 % quantile): " + ", ".join(
                    f"L{c['layer']} {c['median']:.6f} / {c['q001']:.6f}"
                    for c in r["bf16_cosine"]))
            print(f"  load: peak RSS above interpreter = {r['load_peak_over_weights']:.2f} x weights "
                  f"({(peak_rss - base_rss) / 1e6:.0f} MB for {r['weights_mb']:.0f} MB of weights)")
            model = emb = None                              # free it before the next model loads
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
