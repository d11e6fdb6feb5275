"""``elmo-explorer embed INPUT -o OUTPUT``: vectors for a file with one sentence per line, in
AllenNLP's ``elmo`` HDF5 layout (or npz); ``export vectors`` writes the other formats.

Streams (:mod:`elmo_engine.io.embeddings_file`): a first pass counts the sentences and tokens
(:func:`~elmo_engine.io.datasets.text_input.scan_text_input`: every input error is found before
anything is written; the count gives the progress total and the expected output size, warned
about on stderr above 1 GB), then the sentences are read again one at a time and written chunk
by chunk, so that peak memory does not depend on the input's length.
"""
from __future__ import annotations

import sys
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.errors import InputError

#: the largest input (decompressed) ``embed`` reads: memory is bounded but for the sentence
#: index the AllenNLP layout keeps (one JSON string of every sentence, about the text's size)
EMBED_MAX_INPUT_BYTES = 256 << 20
#: the most sentences in one batch of the streaming commands (``embed``, ``export vectors``);
#: the chunk's budget of padded tokens bounds a batch first from 16 tokens a sentence on, so
#: memory does not grow. More rows per LSTM step spread each step's recurrent weight (32 MB in
#: float32) over more products, and a GPU's per-step launches over more tokens; on a 2-core
#: AVX-512 CPU the full-size ``embed`` was within run-to-run noise of 64 rows, never slower
#: beyond it (docs/performance.md, "Rows per batch")
STREAM_BATCH_ROWS = 256


def early_device(args):
    """The device, and the precision checked on it, before the input is read when a precision
    other than fp32 or a device other than auto/cpu is asked (whether it exists and offers the
    precision); else None: the input is read first and torch is imported after it, so that a
    bad input answers at once."""
    if args.precision == "fp32" and args.device in (None, "auto", "cpu"):
        return None
    device = common.resolve_device(args.device)
    common.resolve_precision(args.precision, device)
    return device


def chunk_embedder(model, device, precision: str, longest: int, rows: int = STREAM_BATCH_ROWS):
    """The embedder of the streaming commands: no sentence cache, a small word-type cache, and
    batches of at most ``rows`` sentences and one chunk's padded tokens
    (:data:`~elmo_engine.io.embeddings_file.CHUNK_TOKENS`; a sentence of ``longest`` tokens is
    always one batch), so that memory stays that of one chunk whatever the input's length or
    its longest line."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.io.embeddings_file import CHUNK_TOKENS

    width = longest + 2                                  # framed: <S> … </S>
    return Embedder(model, device=str(device), precision=precision, cache_size=0,
                    max_types=10_000, token_budget=max(min(rows * width, CHUNK_TOKENS), width),
                    max_batch_rows=rows)


#: ``--stateful``'s default batch: the state streams of the reference protocol (AllenNLP's
#: ``elmo`` command batches 64); a sentence's vectors depend on its row, so this stays
STATEFUL_BATCH_ROWS = 64


def batch_rows(args) -> int:
    """``--batch-size``, or its default: 64 streams with ``--stateful``, else
    :data:`STREAM_BATCH_ROWS`."""
    if args.batch_size is not None:
        return args.batch_size
    return STATEFUL_BATCH_ROWS if args.stateful else STREAM_BATCH_ROWS


def add_parser(sub) -> None:
    p = sub.add_parser("embed", help="write ELMo vectors in AllenNLP's HDF5 layout (other "
                                     "formats: export vectors)",
                       description="Embed INPUT (one sentence per line, tokenized like typed "
                                   "text; blank lines skipped) into OUTPUT in the AllenNLP "
                                   "`elmo` layout: HDF5 (or npz), one dataset per sentence, "
                                   "keys counting the sentences from 0, and sentence_to_index. "
                                   "Streams: memory does not grow with INPUT. For plain npz "
                                   "or HDF5 arrays, TSV for the embedding projector, CSV or "
                                   "one word's occurrences, use "
                                   "`elmo-explorer export vectors`.")
    p.add_argument("input", type=Path, help="UTF-8 text (plain or .gz), one sentence per line")
    common.add_out(p, "output .hdf5 or .npz ('-': stdout)", dest="output", metavar="OUTPUT")
    common.add_checkpoint(p)
    common.add_layers(p)
    common.add_mix_weights(p)
    p.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                   help="the vectors' type in OUTPUT (default float32; float16 halves the file)")
    common.add_split_sentences(p, False, "INPUT (a paragraph per line)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="sentences per batch (default 256, within 4,096 padded tokens; with "
                        "--stateful 64, the reference protocol's streams)")
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
    # the checks that need no model come first, before torch is loaded: they answer at once
    rows = batch_rows(args)
    if rows < 1:
        raise InputError("--batch-size must be at least 1")
    fmt = args.format or ("npz" if args.output.suffix.lower() == ".npz" else "hdf5")
    common.refuse_existing(args.force, args.output)
    common.mix_weights(args.mix_weights, args.layers, 1)      # given without mix: refused
    if not common.is_stdout(args.output) and args.output.exists() \
            and args.output.resolve() == args.input.resolve():
        raise InputError("OUTPUT is INPUT; name another file", path=args.output)
    from tqdm import tqdm

    from elmo_engine.io import embeddings_file as ef
    from elmo_engine.io.vectors import LayerChoice
    from elmo_engine.io.datasets.text_input import iter_text_input, scan_text_input
    from elmo_engine.io.datasets.corpus_text import split_sentences

    device = early_device(args)
    split = split_sentences if args.split_sentences else None
    scan = scan_text_input(args.input, args.pretokenized, split, EMBED_MAX_INPUT_BYTES)
    if scan.blank:
        common.log(f"note: {scan.blank_note()}")
    from elmo_engine.model.checkpoint import load_checkpoint      # torch: after the input

    device = device or common.resolve_device(args.device)
    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint), device=device)
    opts = model.opts
    layers = args.layers
    choice = None
    if layers == "mix":
        n = opts.n_output_layers
        choice = LayerChoice("mix", common.mix_weights(args.mix_weights, "mix", n))
        choice.validate(n)
    expected = ef.expected_output_bytes(scan.tokens, opts.n_output_layers, 2 * opts.output_dim,
                                        "average" if layers == "mix" else layers, args.dtype)
    warning = ef.size_warning(expected)
    if warning:
        common.log(f"elmo-explorer: warning: {warning}")
    # no sentence cache (each sentence is written once), the smallest type cache and batches
    # of at most a chunk's tokens (or one sentence): memory stays that of one chunk, whatever
    # the input's length or its longest line
    emb = chunk_embedder(model, device, args.precision, scan.longest, rows)
    source: object = emb
    if choice is not None:
        source, layers = _Mixed(emb, choice), "all"
    bar = tqdm(total=scan.tokens, unit="tok", desc="embedding", file=sys.stderr,
               disable=scan.tokens < 2000 and not sys.stderr.isatty())
    sentences = (toks for _, toks in iter_text_input(args.input, args.pretokenized, scan.grouped,
                                                     split, EMBED_MAX_INPUT_BYTES))
    try:
        with common.output_file(args.output, "." + fmt) as output:
            summary = ef.write_embeddings(output, sentences, source, fmt, layers, args.stateful,
                                          rows, dtype=args.dtype,
                                          on_tokens=lambda done: bar.update(done - bar.n))
    finally:
        bar.close()
    where = "stdout" if common.is_stdout(args.output) else args.output
    common.log(embed_summary(summary.sentences, summary.tokens, args.layers, args.dtype,
                             args.precision, where))
    return 0


def embed_summary(sentences: int, tokens: int, layers: str, dtype: str, precision: str,
                  where: object) -> str:
    """The last line of ``embed``: what was written and how it was computed (the model's
    precision is not the vectors' type: bf16 activations are stored as float32)."""
    return (f"wrote {sentences} sentences ({tokens} tokens, {layers}, {dtype} vectors computed "
            f"in {precision}) to {where}")


class _Mixed:
    """An embedder whose arrays are the scalar mix of ``choice``, ``(n, D)`` (``--layers mix``)."""

    def __init__(self, embedder, choice):
        self.embedder, self.choice = embedder, choice

    def embed(self, sentences, state=None):
        return [self.choice.apply(a) for a in self.embedder.embed(sentences, state=state)]

    def embed_stateful(self, sentences, batch_size, state=None):
        return [self.choice.apply(a) for a in
                self.embedder.embed_stateful(sentences, batch_size=batch_size, state=state)]
