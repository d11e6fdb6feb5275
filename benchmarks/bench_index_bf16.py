"""``index --precision bf16`` against float32 on the same corpus: build time (same run) and what
bf16 changes in the answers — the stored vectors' cosine to float32 per layer (median, 0.1 %
quantile) and how often a query's top hit is float32's.

Run by hand::

    python benchmarks/bench_index_bf16.py resources/reference_corpus/sentences.txt --work bench-bf16

Builds (or reuses, when complete) ``WORK/fp32`` and ``WORK/bf16`` with the bundled model (layers
0,1,2, shards of 500; the build times are printed only for folders built in this run), then
queries every ``--every``-th sentence's longest token, embedded in float32 as ``search`` does,
in layers 1 and 2, same word (exact) and any word (HNSW), for its nearest other occurrence (the
query itself excluded: it is trivially first in both). Needs a CPU with bf16 units (or a GPU);
elsewhere ``index`` refuses bf16 in one line. Results: docs/guide/corpus-index.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import hostinfo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", type=Path, nargs="+")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--every", type=int, default=10, help="query every N-th sentence")
    args = ap.parse_args()
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.cli.main import main as cli
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.search import CorpusIndex, query_vectors
    from elmo_engine.model.checkpoint import load_checkpoint

    from elmo_engine.index.store import read_manifest
    from elmo_engine.model.flops import flops_per_token

    print(hostinfo.host_line())
    flops = flops_per_token(load_checkpoint(checkpoint_or_demo(None)).opts).total
    for precision in ("fp32", "bf16"):
        out = args.work / precision
        t = time.perf_counter()
        code = cli(["index", *map(str, args.corpus), "--out", str(out), "--layer", "0,1,2",
                    "--shard-size", "500", "--precision", precision])
        if code != 0:
            return code
        took, tokens = time.perf_counter() - t, read_manifest(out).n_tokens
        print(f"{precision}: index built in {took:.1f} s (whole command; a second or so if it "
              f"was already complete): {tokens:,} tokens, the model's nominal FLOPs at "
              f"{hostinfo.share_line(flops * tokens, took, precision)}")
    ia, ib = CorpusIndex(args.work / "fp32"), CorpusIndex(args.work / "bf16")
    for layer in ia.layers:
        a = np.asarray(ia.vectors[layer], np.float32)
        b = np.asarray(ib.vectors[layer], np.float32)
        cos = (a * b).sum(1)                                             # unit vectors
        print(f"layer {layer}: stored vectors bf16 vs fp32 cosine median {np.median(cos):.6f}, "
              f"0.1 % quantile {np.quantile(cos, 0.001):.6f} ({len(cos):,} tokens)")
    emb = Embedder(load_checkpoint(checkpoint_or_demo(None)), device="cpu")
    same, total, near_ties = {}, {}, 0
    for sid in range(0, ia.manifest.n_sentences, args.every):
        toks = ia.sentence(sid)
        pos = max(range(len(toks)), key=lambda i: len(toks[i]))
        vecs = query_vectors(emb, toks, pos, (1, 2))
        row = ia.row_of(sid, pos)                      # itself excluded: its nearest other
        for layer in (1, 2):
            for mode, word in (("same word", toks[pos]), ("any word", None)):
                ha = ia.search(vecs[layer], layer, 2, word, exclude_row=row)
                hb = ib.search(vecs[layer], layer, 2, word, exclude_row=row)
                if not ha:
                    continue                           # the word's only occurrence
                key = (layer, mode)
                total[key] = total.get(key, 0) + 1
                same[key] = same.get(key, 0) + ((ha[0].sentence_id, ha[0].position)
                                                == (hb[0].sentence_id, hb[0].position))
                near_ties += len(ha) > 1 and ha[0].cosine - ha[1].cosine < 2e-3
    for key in sorted(total):
        print(f"layer {key[0]}, {key[1]}: nearest other occurrence as fp32's in "
              f"{same[key]}/{total[key]} queries")
    print(f"(queries whose fp32 top two are within 2e-3: {near_ties})")
    ia.close()
    ib.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
