"""A unit's top contexts over a corpus index (``units top --index``) against the same sentences
held in memory (``units top FILE``'s way): the index's sentences read from its token table a
batch at a time (``index.search.open_sentences`` → ``contexts.scan_units``) against
``unit_values`` over the file's sentences and one ``UnitTop`` fed the whole. The bundled model,
the first ``--tokens`` words of the reference corpus, indexed one sentence per line first (in a
temporary folder, or ``--index FOLDER`` built so), alternating rounds in one process.

    python benchmarks/bench_units_index.py [--tokens 30000] [--threads 2] [--rounds 2]

Prints the host, the best time of each way, the ratio (the index's overhead: reading SQLite,
the batches' bookkeeping), words/s, and whether the two rankings are the same (they must be).
docs/guide/units.md ("What a unit does") has the whole-command numbers.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=30_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--index", type=Path, help="an index of the same words, built before")
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostinfo

    from elmo_engine import runtime
    from elmo_engine.analysis.layers import reference_corpus_path
    from elmo_engine.analysis.units.contexts import UnitTop, scan_units, unit_values
    from elmo_engine.analysis.units.corpus import read_units_corpus
    from elmo_engine.cli.main import main as cli
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.search import open_sentences
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.lstm_states import StateKind

    runtime.configure()
    torch.set_num_threads(args.threads)
    print(hostinfo.host_line())
    demo = REPO / "resources" / "demo_model"
    corpus = read_units_corpus(reference_corpus_path(), args.tokens)
    sents = corpus.sentences
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.index
        if folder is None:
            text = Path(tmp) / "corpus.txt"
            text.write_text("\n".join(" ".join(s) for s in sents) + "\n", "utf-8")
            folder = Path(tmp) / "ix"
            t0 = time.perf_counter()
            assert cli(["index", str(text), "-o", str(folder), "--checkpoint", str(demo),
                        "--layer", "1", "--no-split-sentences", "--pretokenized",
                        "--device", "cpu"]) == 0
            print(f"indexed in {time.perf_counter() - t0:.1f} s")
        model = load_checkpoint(demo).eval()
        vectors = Embedder(model, device="cpu").token_vectors
        n = sum(len(s) for s in sents)
        print(f"the bundled model, {n:,} words of the reference corpus ({len(sents):,} "
              f"sentences), layer 1 forward c unit 78, {args.threads} threads, best of "
              f"{args.rounds} alternating rounds")
        unit_values(model, sents[:64], 1, 0, StateKind.C, 78, vectors)     # warm up
        best = {"held": float("inf"), "index": float("inf")}
        got = {}
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            top = UnitTop(20)
            top.add(0, sents, unit_values(model, sents, 1, 0, StateKind.C, 78, vectors))
            best["held"] = min(best["held"], time.perf_counter() - t0)
            got["held"] = (top.contexts(), top.words())
            t0 = time.perf_counter()
            top = UnitTop(20)
            with open_sentences(folder) as source:
                scan = scan_units(model, source, 1, 0, StateKind.C, {78: [top]},
                                  token_vectors=vectors)
            best["index"] = min(best["index"], time.perf_counter() - t0)
            got["index"] = (top.contexts(), top.words())
            assert scan.tokens == n, (scan.tokens, n)
        same = got["held"] == got["index"]
        print(f"held in memory {best['held']:6.2f} s, from the index {best['index']:6.2f} s: "
              f"{best['index'] / best['held']:.2f}x the held time; {n / best['index']:,.0f} "
              f"words/s from the index; the same ranking: {same}")


if __name__ == "__main__":
    main()
