"""The Layers analyses against the issue's targets, and against plain implementations.

Targets (issue 19, on 2 cores with the bundled model): contextuality over 20,000 sentences in
at most 3 minutes, embedding included; CKA over 50,000 tokens in at most 10 s; one MDL probe run
(every layer and the mix) on EWT UPOS in at most 3 minutes, embedding included.

Each part also times a plain, straightforward implementation on a subset small enough for it
and the fast code on the same subset, and prints the ratio and the largest difference:

* contextuality — each word's full cosine matrix, an SVD per word, a loop per sentence, and the
  cosine matrix of every pair of tokens for the baseline (``O(n²)``);
* CKA — the ``n × n`` kernels and ``tr(KHLH)`` / Song et al.'s formula with matrix products;
* MDL — the same online code with each probe trained on its own, plainly.

Sentences come from the training splits in ``../shared/data`` (OpenStax and public-domain
fiction, split into sentences), else from the shipped reference corpus (then fewer than 20,000).

    python benchmarks/bench_layers.py [--sentences 20000] [--cka-tokens 50000] [--threads 2]
    python benchmarks/bench_layers.py --quick          # a small run that checks the script works
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
_SPLIT = re.compile(r"(?<=[.!?])[\"”’')\]]*\s+(?=[\"“‘(\[]?[A-Z])")


def corpus_sentences(n: int):
    """Up to ``n`` tokenized sentences and where they came from."""
    from elmo_engine.analysis.layers.run import reference_corpus_path
    from elmo_engine.analysis.layers.sample import read_sample
    from elmo_engine.model.tokenize import tokenize

    files = [SHARED / "openstax_prose" / "train.txt.gz", SHARED / "pd_fiction" / "train.txt.gz"]
    if all(f.is_file() for f in files):
        out, per = [], (n + 1) // 2
        for f in files:
            got = 0
            with gzip.open(f, "rt", encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("= ") or not line.strip():
                        continue
                    for s in _SPLIT.split(line.strip()):
                        toks = tokenize(s)
                        if 3 <= len(toks) <= 60:
                            out.append(toks)
                            got += 1
                    if got >= per:
                        break
        return out[:n], "shared OpenStax + pd_fiction training text"
    sents = read_sample(reference_corpus_path()).tokens
    return sents[:n], "the shipped reference corpus (../shared not found)"


def load_embedder():
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.resources import demo_checkpoint_path

    return Embedder(load_checkpoint(demo_checkpoint_path()), device="cpu", cache_size=256)


# ---- plain implementations -------------------------------------------------------------------
def plain_contextuality(acts, tokens, layer, sl, min_count=5):
    """The definitions directly: each word's full cosine matrix, an SVD per word, a loop per
    sentence, and the cosine matrix of every pair of tokens for the baseline."""
    def cosines(v):
        u = v / np.linalg.norm(v, axis=1, keepdims=True)
        return u @ u.T
    occ = {}
    for si, s in enumerate(tokens):
        for ti, t in enumerate(s):
            occ.setdefault(t, []).append(acts[si][layer, ti, sl].astype(np.float64))
    ss, mev = [], []
    for vs in occ.values():
        n = len(vs)
        if n < min_count:
            continue
        c = cosines(np.array(vs))
        ss.append((c.sum() - np.trace(c)) / (n * n - n))
        sv = np.linalg.svd(np.array(vs), compute_uv=False)
        mev.append(sv[0] ** 2 / np.sum(sv ** 2))
    intra = []
    for a in acts:
        v = a[layer][:, sl].astype(np.float64)
        if len(v) >= 2:
            m = v.mean(axis=0)
            intra.append(np.mean(v @ m / (np.linalg.norm(v, axis=1) * np.linalg.norm(m))))
    flat = np.concatenate([a[layer][:, sl] for a in acts]).astype(np.float64)
    sent = np.concatenate([np.full(a.shape[1], i) for i, a in enumerate(acts)])
    base = cosines(flat)[sent[:, None] != sent[None, :]].mean()
    return np.mean(ss), np.mean(intra), np.mean(mev), base


def plain_cka(x, y, unbiased=True):
    def hsic(k, m):
        n = k.shape[0]
        if not unbiased:
            h = np.eye(n) - 1.0 / n
            return np.trace(k @ h @ m @ h) / (n - 1) ** 2
        kt, lt = k - np.diag(np.diag(k)), m - np.diag(np.diag(m))
        one = np.ones(n)
        return (np.trace(kt @ lt) + one @ kt @ one * (one @ lt @ one) / ((n - 1) * (n - 2))
                - 2.0 / (n - 2) * one @ kt @ lt @ one) / (n * (n - 3))
    k, m = x @ x.T, y @ y.T
    return hsic(k, m) / math.sqrt(hsic(k, k) * hsic(m, m))


def plain_mdl(feats, labels, n_classes, cfg, seed=0):
    """The same online code, written plainly: each layer's probe (and the mix's) on its own, a
    fresh model per block, an epoch = one pass, early stopping on the last 10 % of the block's
    training data, the best epoch kept."""
    import copy

    import torch

    from elmo_engine.analysis.layers.mdl import block_boundaries

    n = len(labels)
    order = np.random.default_rng(seed).permutation(n)
    y = torch.from_numpy(np.asarray(labels)[order])
    x = feats[:, order].astype(np.float64)
    x = (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-6)
    x = torch.from_numpy(x.astype(np.float32))                                     # (K, N, D)
    bounds = block_boundaries(n)

    class Mix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = torch.nn.Parameter(torch.zeros(x.shape[0]))
            self.gamma = torch.nn.Parameter(torch.ones(1))
            self.out = torch.nn.Linear(x.shape[2], n_classes)

        def forward(self, xb):                                                     # (K, B, D)
            w = torch.softmax(self.s, 0)
            return self.out(self.gamma * (w[:, None, None] * xb).sum(0))

    def make(which):
        if which == "mix":
            return Mix(), lambda m, idx: m(x[:, idx])
        lin = torch.nn.Linear(x.shape[2], n_classes)
        torch.nn.init.zeros_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        return lin, lambda m, idx: m(x[which, idx])

    out = []
    for which in [*range(x.shape[0]), "mix"]:
        bits = bounds[0] * math.log2(n_classes)
        for t, t_next in zip(bounds, bounds[1:]):
            torch.manual_seed(seed)
            model, run = make(which)
            opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
            n_hold = int(t * cfg.holdout)
            n_tr = t - n_hold
            best, best_state, bad = float("inf"), copy.deepcopy(model.state_dict()), 0
            for _ in range(cfg.max_epochs):
                perm = torch.randperm(n_tr)
                for a in range(0, n_tr, cfg.batch_size):
                    idx = perm[a:a + cfg.batch_size]
                    loss = torch.nn.functional.cross_entropy(run(model, idx), y[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                if n_hold:
                    with torch.no_grad():
                        held = torch.arange(n_tr, t)
                        h = float(torch.nn.functional.cross_entropy(run(model, held), y[held]))
                    if h < best:
                        best, best_state, bad = h, copy.deepcopy(model.state_dict()), 0
                    else:
                        bad += 1
                        if bad >= cfg.patience:
                            break
            if n_hold:
                model.load_state_dict(best_state)
            with torch.no_grad():
                nxt = torch.arange(t, t_next)
                logp = torch.log_softmax(run(model, nxt), -1)
                bits -= float(logp.gather(1, y[nxt, None]).sum()) / math.log(2)
        out.append(bits)
    return out


# ---- parts -----------------------------------------------------------------------------------
def bench_contextuality(args, report):
    from elmo_engine.analysis.activations import iter_embedded
    from elmo_engine.analysis.layers.contextuality import ContextualityAccumulator, contextuality

    tokens, source = corpus_sentences(args.sentences)
    emb = load_embedder()
    k, dim = emb.opts.n_output_layers, 2 * emb.opts.output_dim
    n_tok = sum(map(len, tokens))
    t0 = time.perf_counter()
    acc = ContextualityAccumulator(tokens, k, dim)
    t_embed = t_add = 0.0
    keep, budget = [], args.cka_tokens
    t1 = time.perf_counter()
    for _, arrays in iter_embedded(emb, tokens):
        t2 = time.perf_counter()
        t_embed += t2 - t1
        acc.add(arrays)
        for a in arrays:                              # the CKA part reuses these activations
            if budget > 0:
                keep.append(a[:, :budget])
                budget -= keep[-1].shape[1]
        t1 = time.perf_counter()
        t_add += t1 - t2
    res = acc.result()
    total = time.perf_counter() - t0
    print(f"contextuality: {len(tokens)} sentences ({source}), {n_tok} tokens, {len(res.words)} "
          f"words with >= 5 occurrences: embedding {t_embed:.1f} s + measures "
          f"{total - t_embed:.1f} s = {total:.1f} s (target <= 180 s for 20,000 sentences)")
    import hostinfo
    from elmo_engine.model.flops import flops_per_token

    print(f"  embedding: the model's nominal FLOPs at "
          f"{hostinfo.share_line(flops_per_token(emb.opts).total * n_tok, t_embed)}")
    report["contextuality"] = {"sentences": len(tokens), "tokens": n_tok, "embedding_s": t_embed,
                               "measures_s": total - t_embed, "total_s": total}
    sub, n_sub = tokens[:args.naive_sentences], args.naive_sentences
    acts = emb.embed(sub)
    t0 = time.perf_counter()
    fast = contextuality(acts, sub)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    worst = 0.0
    for row in fast.rows:
        sl = {"both": slice(0, dim), "forward": slice(0, dim // 2),
              "backward": slice(dim // 2, dim)}[row.direction]
        ref = plain_contextuality(acts, sub, row.layer, sl)
        got = (row.self_similarity.value, row.intra_sentence_similarity.value,
               row.max_explainable_variance.value, row.self_similarity.baseline)
        worst = max(worst, max(abs(a - b) for a, b in zip(got, ref)))
    t_plain = time.perf_counter() - t0
    print(f"  plain vs fast on {n_sub} sentences ({sum(map(len, sub))} tokens): plain "
          f"{t_plain:.2f} s, fast {t_fast:.3f} s, ratio {t_plain / t_fast:.0f}x, largest "
          f"difference {worst:.1e}")
    report["contextuality"].update(plain_subset_s=t_plain, fast_subset_s=t_fast,
                                   ratio=t_plain / t_fast, largest_difference=worst)
    return np.concatenate(keep, axis=1)


def bench_cka(layers, args, report):
    from elmo_engine.analysis.layers.cka import cka_matrix, linear_cka

    t0 = time.perf_counter()
    m = cka_matrix(layers)
    t = time.perf_counter() - t0
    print(f"cka: {layers.shape[1]} tokens x {layers.shape[0]} layers (dim {layers.shape[2]}), "
          f"unbiased: {t:.2f} s (target <= 10 s for 50,000); layer 1 vs 2: {m[1, 2]:.3f}")
    n = min(args.naive_tokens, layers.shape[1])
    sub = layers[:, :n].astype(np.float64)
    t0 = time.perf_counter()
    fast = [linear_cka(sub[a], sub[b]) for a in range(len(sub)) for b in range(a + 1, len(sub))]
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain = [plain_cka(sub[a], sub[b]) for a in range(len(sub)) for b in range(a + 1, len(sub))]
    t_plain = time.perf_counter() - t0
    diff = max(abs(a - b) for a, b in zip(fast, plain))
    print(f"  plain (n x n kernels) vs fast on {n} tokens: plain {t_plain:.2f} s, fast "
          f"{t_fast:.3f} s, ratio {t_plain / t_fast:.0f}x, largest difference {diff:.1e}")
    report["cka"] = {"tokens": int(layers.shape[1]), "s": t, "plain_subset_s": t_plain,
                     "fast_subset_s": t_fast, "subset_tokens": n, "ratio": t_plain / t_fast,
                     "largest_difference": diff}


def bench_mdl(args, report):
    from elmo_engine.analysis.layers.mdl import MDLConfig, online_codelength
    from elmo_engine.io.datasets.conllu import read_conllu
    from elmo_engine.analysis.layers.run import gather_rows as _gather_rows

    path = Path(args.conllu)
    if not path.is_file():
        print(f"mdl: skipped ({path} not found)")
        return
    sents = list(read_conllu(path, label="upos", limit=args.mdl_sentences))
    emb = load_embedder()
    t0 = time.perf_counter()
    tokens = [list(s.tokens) for s in sents]
    feats = _gather_rows(emb, tokens, np.arange(len(tokens)), None, "EWT")
    labels = [lab for s in sents for lab in s.labels]
    t_embed = time.perf_counter() - t0
    keep = np.array([lab is not None for lab in labels])
    feats, labels = feats[:, keep], [lab for lab in labels if lab is not None]
    res = online_codelength(feats, labels, config=MDLConfig())
    total = time.perf_counter() - t0
    print(f"mdl: {path.name}, {len(sents)} sentences, {len(labels)} tokens, {len(res.classes)} "
          f"labels: embedding {t_embed:.1f} s + probes {res.wall_time_s:.1f} s = {total:.1f} s "
          "(target <= 180 s); compression " + ", ".join(
              f"{c.name} {c.compression:.2f}" for c in res.layers + [res.mix]))
    report["mdl"] = {"sentences": len(sents), "tokens": len(labels), "embedding_s": t_embed,
                     "probes_s": res.wall_time_s, "total_s": total,
                     "compression": {c.name: c.compression for c in res.layers + [res.mix]}}
    n = min(args.naive_examples, len(labels))
    cfg = MDLConfig()
    t0 = time.perf_counter()
    fast = online_codelength(feats[:, :n], labels[:n], config=cfg)
    t_fast = time.perf_counter() - t0
    ids = {c: i for i, c in enumerate(sorted(set(labels[:n])))}
    t0 = time.perf_counter()
    plain = plain_mdl(feats[:, :n], [ids[v] for v in labels[:n]], len(ids), cfg)
    t_plain = time.perf_counter() - t0
    print(f"  plain (each probe alone, an epoch = one pass) vs fast (layers and mix side by side) "
          f"on {n} tokens: plain {t_plain:.1f} s, fast {t_fast:.1f} s, ratio "
          f"{t_plain / t_fast:.1f}x; online kbit plain / fast: " + ", ".join(
              f"{p / 1000:.1f}/{c.online_bits / 1000:.1f}" for p, c in zip(plain, fast.layers
                                                                           + [fast.mix])))
    report["mdl"].update(plain_subset_s=t_plain, fast_subset_s=t_fast, subset_tokens=n,
                         ratio=t_plain / t_fast)


def main(argv=None) -> int:
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--cka-tokens", type=int, default=50_000)
    ap.add_argument("--conllu", default=str(SHARED / "ud_english_ewt" / "en_ewt-ud-train.conllu.gz"))
    ap.add_argument("--mdl-sentences", type=int, default=None, help="default: all of EWT train")
    ap.add_argument("--naive-sentences", type=int, default=200)
    ap.add_argument("--naive-tokens", type=int, default=2000)
    ap.add_argument("--naive-examples", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=2, help="torch and BLAS threads (default 2)")
    ap.add_argument("--skip", action="append", default=[], choices=["contextuality", "cka", "mdl"])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes: checks that the script works, measures nothing useful")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.sentences, args.cka_tokens, args.mdl_sentences = 600, 5000, 300
        args.naive_sentences, args.naive_tokens, args.naive_examples = 60, 500, 2000
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    report = {"threads": args.threads, "quick": args.quick}
    with threadpool_limits(args.threads):
        layers = None
        if "contextuality" not in args.skip or "cka" not in args.skip:
            layers = bench_contextuality(args, report)
        if "cka" not in args.skip:
            bench_cka(layers, args, report)
        if "mdl" not in args.skip:
            bench_mdl(args, report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
