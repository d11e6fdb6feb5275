"""``elmo-explorer embed INPUT -o OUTPUT``: vectors for a file with one sentence per line, in
AllenNLP's ``elmo`` HDF5 layout (or npz); ``export vectors`` writes the other formats."""
from __future__ import annotations

import sys
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser("embed", help="write ELMo vectors in AllenNLP's HDF5 layout (other "
                                     "formats: export vectors)",
                       description="Embed INPUT (one sentence per line, tokenized like typed "
                                   "text; blank lines skipped) into OUTPUT in the AllenNLP "
                                   "`elmo` layout: HDF5 (or npz), one dataset per sentence, "
                                   "keys counting the sentences from 0, and sentence_to_index. "
                                   "For plain npz or HDF5 arrays, TSV for the embedding "
                                   "projector, CSV or one word's occurrences, use "
                                   "`elmo-explorer export vectors`.")
    p.add_argument("input", type=Path, help="UTF-8 text (plain or .gz), one sentence per line")
    common.add_out(p, "output .hdf5 or .npz ('-': stdout)", dest="output", metavar="OUTPUT")
    common.add_checkpoint(p)
    common.add_layers(p)
    common.add_mix_weights(p)
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
    from elmo_engine.io.vectors import LayerChoice
    from elmo_engine.model.checkpoint import load_checkpoint

    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    fmt = args.format or ("npz" if args.output.suffix.lower() == ".npz" else "hdf5")
    common.refuse_existing(args.force, args.output)
    common.mix_weights(args.mix_weights, args.layers, 1)      # given without mix: refused
    device = common.resolve_device(args.device)
    common.resolve_precision(args.precision, device)
    sentences = common.read_text(args.input, args.pretokenized, unlimited=True).tokens
    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint), device=device)
    width = max(len(s) for s in sentences) + 2
    emb = Embedder(model, device=str(device), precision=args.precision,
                   token_budget=max(args.batch_size * width, width), max_batch_rows=args.batch_size)
    layers = args.layers
    if layers == "mix":
        n = model.opts.n_output_layers
        choice = LayerChoice("mix", common.mix_weights(args.mix_weights, "mix", n))
        choice.validate(n)
        emb, layers = _Mixed(emb, choice), "all"
    total = sum(len(s) for s in sentences)
    bar = tqdm(total=total, unit="tok", desc="embedding", file=sys.stderr,
               disable=total < 2000 and not sys.stderr.isatty())
    try:
        with common.output_file(args.output, "." + fmt) as output:
            write_embeddings(output, sentences, emb, fmt, layers, args.stateful,
                             args.batch_size, on_tokens=lambda done: bar.update(done - bar.n))
    finally:
        bar.close()
    where = "stdout" if common.is_stdout(args.output) else args.output
    common.log(f"wrote {len(sentences)} sentences ({total} tokens) to {where}")
    return 0


class _Mixed:
    """An embedder whose arrays are the scalar mix of ``choice``, ``(n, D)`` (``--layers mix``)."""

    def __init__(self, embedder, choice):
        self.embedder, self.choice = embedder, choice

    def embed(self, sentences, state=None):
        return [self.choice.apply(a) for a in self.embedder.embed(sentences, state=state)]

    def embed_stateful(self, sentences, batch_size, state=None):
        return [self.choice.apply(a) for a in
                self.embedder.embed_stateful(sentences, batch_size=batch_size, state=state)]
