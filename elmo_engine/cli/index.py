"""``elmo-explorer index CORPUS… --out DIR``: embed a corpus once and store it for search.

Also under ``torchrun --nproc-per-node N`` (each process embeds its share of the shards; rank 0
joins them), and ``index --merge PART… --out DIR`` to join the folders other nodes wrote.
See docs/guide/corpus-index.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from elmo_engine.cli import common
from elmo_engine.errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "index", help="embed a corpus once into a searchable index (resumable; torchrun)",
        description="Embed CORPUS files (UTF-8 text, plain or .gz; '= … =' header lines "
                    "skipped; paragraphs split into sentences as train-lm does) into the index "
                    "folder DIR: float16 vectors per layer, a SQLite token table, an HNSW "
                    "index per layer. A rerun resumes a stopped build. Under torchrun each "
                    "process embeds its share. With --merge, CORPUS names index folders whose "
                    "shards are joined into DIR.")
    p.add_argument("corpus", type=Path, nargs="*", help="corpus files (with --merge: folders)")
    common.add_out(p, "the index folder", metavar="DIR")
    common.add_checkpoint(p)
    p.add_argument("--layer", default=None, metavar="L[,L…]",
                   help="the output layers to index, comma-separated (0 = the context-free token "
                        "layer; default: every biLSTM layer, 1 to L: 1,2 for the published "
                        "models; a rerun resumes with the layers of the build it finds)")
    p.add_argument("--shard-size", type=int, default=2000,
                   help="sentences per shard, the unit of resuming (default 2000)")
    common.add_split_sentences(p, True, "the corpus")
    p.add_argument("--no-split", dest="split_sentences", action="store_false",
                   help=argparse.SUPPRESS)               # the name before issue 39
    common.add_pretokenized(p)
    p.add_argument("--token-budget", type=int, default=4096,
                   help="padded tokens per embedding batch (default 4096)")
    p.add_argument("--ann-threads", type=int, default=1,
                   help="threads building the HNSW graphs (default 1: reproducible; more is "
                        "faster but the graph then depends on thread timing)")
    p.add_argument("--ann-quantizer", choices=["fp16", "sq8"], default="fp16",
                   help="how the HNSW graphs store vectors: fp16 (default) or sq8, a byte per "
                        "dimension, for ~10^7 tokens in less memory (a little less recall)")
    p.add_argument("--ann-m", type=int, default=32, help="HNSW links per node (default 32)")
    p.add_argument("--keep-shards", action="store_true",
                   help="keep the shards once the index is complete (default: remove them; "
                        "they hold the same vectors again)")
    p.add_argument("--merge", action="store_true",
                   help="join the shards of the index folders given as CORPUS into --out")
    common.add_device(p)
    common.add_precision(p, ("fp32", "bf16"))
    common.add_force(p, "an index of another corpus, model or settings in --out")
    p.set_defaults(func=run)


def parse_layers(text: Optional[str], n_layers: int) -> tuple:
    """The output layers ``--layer`` names, each checked against the model's ``n_layers``
    output layers; None (the default): every biLSTM layer, 1 to ``n_layers - 1`` (the token
    layer alone for a model without one)."""
    if text is None:
        return tuple(range(1, n_layers)) or (0,)
    try:
        layers = tuple(sorted({int(v) for v in text.replace(",", " ").split()}))
    except ValueError:
        raise InputError(f"--layer must be comma-separated layer numbers, got {text!r}") \
            from None
    bad = [v for v in layers if not 0 <= v < n_layers]
    if not layers or bad:
        raise InputError(f"--layer: this model has layers 0–{n_layers - 1}, got {text!r}")
    return layers


def run(args) -> int:
    if args.shard_size < 1 or args.token_budget < 1 or args.ann_threads < 1:
        raise InputError("--shard-size, --token-budget and --ann-threads must be at least 1")
    if args.ann_m < 4:
        raise InputError("--ann-m must be at least 4")
    common.refuse_stdout(args.out, "the index")
    if not args.merge:
        # the model's layers from its options file, before torch loads
        parse_layers(args.layer, common.checkpoint_options(args.checkpoint).n_output_layers)

    from elmo_engine.index import dist
    from elmo_engine.index.ann import AnnSettings
    from elmo_engine.index.build import finalize, merge

    settings = AnnSettings(m=args.ann_m, threads=args.ann_threads, quantizer=args.ann_quantizer)
    if args.merge:
        merge(args.corpus, args.out, force=args.force)
        _finalize(args.out, settings, finalize, args.keep_shards)
        return 0
    if not args.corpus:
        raise InputError("give at least one corpus file")
    ranks = dist.setup()
    try:
        return _build(args, ranks, settings)
    finally:
        dist.cleanup(ranks)


def _build(args, ranks, settings) -> int:
    import torch

    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index import dist
    from elmo_engine.index.build import (check_model, embed_shards, finalize, missing_shards,
                                         new_manifest, prepare, resumed_layers)
    from elmo_engine.index.corpus import CorpusReader, count_corpus
    from elmo_engine.index.store import read_manifest
    from elmo_engine.model.checkpoint import load_checkpoint

    main = ranks.rank == 0
    device = common.resolve_device(args.device)
    if device.type == "cuda" and ranks.distributed:
        device = torch.device("cuda", ranks.local_rank)
    common.resolve_precision(args.precision, device)
    ckpt = common.checkpoint_or_demo(args.checkpoint)
    model = load_checkpoint(ckpt, device=device)
    resumed = None if args.layer is not None or args.force else \
        resumed_layers(args.out, model.info.checksum)   # a rerun: the build's own layers
    layers = resumed or parse_layers(args.layer, model.opts.n_output_layers)
    sentences = CorpusReader.of(args.corpus, args.pretokenized, args.split_sentences)
    count = count_corpus(sentences, args.shard_size)   # a first pass: nothing held
    wanted = new_manifest(model, str(ckpt), count, layers, args.corpus, sentences.reading(),
                          args.precision)
    # rank 0 prepares the folder (or every rank, when they do not share a file system)
    ok, error = True, None
    if main or not (args.out / "index.json").exists():
        try:
            prepare(args.out, wanted, args.force and main)
        except InputError as e:
            ok, error = False, e
    if not dist.all_ok(ranks, ok):
        if error is not None:
            raise error
        return 1
    dist.barrier(ranks)
    manifest = read_manifest(args.out)
    check_model(args.out, wanted.checksum)
    if manifest.identity() != wanted.identity():
        raise InputError("holds an index of another corpus or settings", path=args.out)
    if manifest.complete:
        if main:
            common.log(f"{args.out}: the index is already complete ({manifest.n_tokens} tokens); "
                       "pass --force to rebuild it")
        return 0
    emb = Embedder(model, device=str(device), precision=args.precision,
                   token_budget=args.token_budget, cache_size=0)
    if main:
        common.log(f"indexing {count.n_sentences} sentences ({wanted.n_tokens} tokens) in "
                   f"{manifest.n_shards} shards of {args.shard_size}, layers "
                   f"{','.join(map(str, layers))}"
                   + (f", {ranks.world_size} processes" if ranks.distributed else ""))
    _embed(args.out, sentences, count, manifest, emb, ranks, embed_shards, missing_shards,
           settings)
    dist.barrier(ranks)
    if main:
        missing = missing_shards(args.out, manifest)
        if missing:
            common.log(f"{len(missing)} shards were written elsewhere (no shared folder): copy "
                       "the other nodes' folders here and run 'elmo-explorer index --merge "
                       f"PART… --out {args.out}'")
            return 0
        _finalize(args.out, settings, finalize, args.keep_shards)
    return 0


def _embed(out, sentences, count, manifest, emb, ranks, embed_shards, missing_shards,
           settings=None) -> None:
    from tqdm import tqdm

    from elmo_engine.progress import TaskState

    bar = tqdm(total=0, unit="tok", unit_scale=True, desc=f"rank {ranks.rank}"
               if ranks.distributed else "embedding", file=sys.stderr, position=ranks.rank,
               disable=manifest.n_tokens < 20_000 and not sys.stderr.isatty())

    def on_progress(done: int, total: int, message: str) -> None:
        bar.total = total
        bar.set_postfix_str(message, refresh=False)
        bar.update(done - bar.n)

    try:
        embed_shards(out, sentences, manifest, emb, ranks.rank, ranks.world_size,
                     TaskState(on_progress), count, settings)
    except KeyboardInterrupt:
        bar.close()
        left = len(missing_shards(out, manifest))
        common.log(f"stopped: {manifest.n_shards - left} of {manifest.n_shards} shards are "
                   "complete; run the same command again to resume")
        raise
    bar.close()


def _finalize(out: Path, settings, finalize, keep_shards: bool = False) -> None:
    from tqdm import tqdm

    from elmo_engine.progress import TaskState

    bar: Optional[tqdm] = None

    def stage(name: str) -> None:
        nonlocal bar
        if bar is not None:
            bar.close()
        common.log(name)
        bar = tqdm(total=0, unit="vec", unit_scale=True, desc=name[:30], file=sys.stderr,
                   disable=None)

    def on_progress(done: int, total: int, message: str) -> None:
        if bar is not None:
            bar.total = total
            bar.update(done - bar.n)

    try:
        m = finalize(out, settings, TaskState(on_progress), on_stage=stage,
                     keep_shards=keep_shards)
    finally:
        if bar is not None:
            bar.close()
    common.log(f"wrote the index of {m.n_sentences} sentences ({m.n_tokens} tokens), layers "
               f"{','.join(map(str, m.layers))}, to {out}")
