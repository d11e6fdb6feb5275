"""``elmo-explorer embed INPUT OUTPUT``: vectors for a file with one sentence per line."""
from __future__ import annotations

import sys
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser("embed", help="write ELMo vectors for a file of sentences",
                       description="Embed INPUT (one sentence per line, tokenized like typed "
                                   "text; blank lines skipped) into OUTPUT (HDF5 in the "
                                   "AllenNLP `elmo` layout, or npz). Keys count the sentences "
                                   "from 0.")
    p.add_argument("input", type=Path, help="UTF-8 text (plain or .gz), one sentence per line")
    p.add_argument("output", type=Path, help="output .hdf5 or .npz")
    common.add_checkpoint(p)
    p.add_argument("--layers", choices=["all", "top", "average"], default="all")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--stateful", action="store_true",
                   help="reference protocol: lines in order, each batch row keeps its LSTM state")
    common.add_device(p)
    common.add_precision(p)
    p.add_argument("--format", choices=["hdf5", "npz"], default=None,
                   help="default: from OUTPUT's extension (hdf5 unless .npz)")
    common.add_pretokenized(p)
    common.add_force(p, "OUTPUT if it exists")
    p.set_defaults(func=run)


def run(args) -> int:
    from tqdm import tqdm

    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.io.embeddings_file import write_embeddings
    from elmo_engine.model.checkpoint import load_checkpoint

    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    fmt = args.format or ("npz" if args.output.suffix.lower() == ".npz" else "hdf5")
    common.refuse_existing(args.force, args.output)
    device = common.resolve_device(args.device)
    common.resolve_precision(args.precision, device)
    sentences = common.read_text(args.input, args.pretokenized, unlimited=True).tokens
    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint), device=device)
    width = max(len(s) for s in sentences) + 2
    emb = Embedder(model, device=str(device), precision=args.precision,
                   token_budget=max(args.batch_size * width, width), max_batch_rows=args.batch_size)
    total = sum(len(s) for s in sentences)
    bar = tqdm(total=total, unit="tok", desc="embedding", file=sys.stderr,
               disable=total < 2000 and not sys.stderr.isatty())
    try:
        write_embeddings(args.output, sentences, emb, fmt, args.layers, args.stateful,
                         args.batch_size, on_tokens=lambda done: bar.update(done - bar.n))
    finally:
        bar.close()
    common.log(f"wrote {len(sentences)} sentences ({total} tokens) to {args.output}")
    return 0
