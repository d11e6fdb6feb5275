"""``elmo-explorer export vectors|report``: the app's exports, headless, for batch use.

Examples::

    elmo-explorer export vectors sentences.txt -o out.npz --layers all
    elmo-explorer export vectors sentences.txt -o projector/ --format tsv --layers top --word bank
    elmo-explorer export vectors sentences.txt -o bank.tsv --layers top --word bank   # two files
    elmo-explorer export vectors sentences.txt -o mix.npz --layers mix --mix-weights 0.2,0.3,0.5
    elmo-explorer export report analysis.elmows.json -o report/ --force

``export vectors`` writes the formats other than AllenNLP's ``elmo`` HDF5 layout, which
``elmo-explorer embed`` writes.

``export report`` rebuilds a report from a saved workspace: it embeds the workspace's sentences
with its checkpoint, compares the selected word across its occurrences layer by layer
(tables, the heatmaps and the summary figure, with the workspace's groups), and adds the probe
and layers results stored in the workspace, every figure as PNG and SVG (``--pdf``: and PDF) at
``--width-in`` × ``--dpi`` from the one figure path, with ``report.md`` and ``report.html`` —
the same code path (:func:`elmo_engine.analysis.report.export_report`) as the app's *Export
report…* and ``elmo-explorer report``, so the same workspace gives the same files.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List

from elmo_engine.cli import common
from elmo_engine.cli.common import checkpoint_or_demo
from elmo_engine.errors import InputError
from elmo_engine.io.vector_formats import FORMATS


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``export`` (with ``vectors`` and ``report``) to an argparse subparsers object."""
    p = subparsers.add_parser("export", help="export vectors or a report (headless)",
                              description="Write vectors (npz, HDF5, projector TSV, CSV) or a "
                                          "report folder, as the app's File menu does.")
    sub = p.add_subparsers(dest="export_what", metavar="WHAT", required=True)
    v = sub.add_parser("vectors", help="write vectors as npz, HDF5 arrays, projector TSV "
                                       "or CSV (AllenNLP's layout: embed)",
                       description="Embed INPUT and write its vectors (or one word's "
                                   "occurrences, --word) as npz, HDF5 arrays, TSV for the "
                                   "embedding projector or CSV. For AllenNLP's `elmo` HDF5 "
                                   "layout (one dataset per sentence, sentence_to_index), use "
                                   "`elmo-explorer embed`.")
    v.add_argument("input", type=Path,
                   help="UTF-8 text, one sentence per line (blank lines skipped)")
    common.add_out(v, "file (.npz/.hdf5/.csv/.tsv; '-': stdout with --format npz, hdf5 or "
                      "csv) or folder (TSV, a name without extension)", dest="output",
                   metavar="OUTPUT")
    common.add_checkpoint(v)
    v.add_argument("--format", choices=FORMATS, default=None,
                   help="default: from OUTPUT's extension (a name without one: TSV folder; "
                        "NAME.tsv: NAME.tsv + NAME.metadata.tsv)")
    common.add_layers(v)
    common.add_mix_weights(v)
    v.add_argument("--mix-gamma", type=float, default=1.0, help="the mix's scale γ (default 1)")
    v.add_argument("--pre-softmax", action="store_true",
                   help="--mix-weights are a ScalarMix's scalars s (weights = softmax(s))")
    v.add_argument("--word", default=None,
                   help="only the occurrences of this word (exact spelling)")
    v.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                   help="the vectors' type in npz and hdf5 (default float32; float16 halves "
                        "the file)")
    common.add_split_sentences(v, False, "INPUT (a paragraph per line)")
    common.add_pretokenized(v)
    common.add_device(v)
    common.add_precision(v)
    common.add_force(v, "OUTPUT if it exists")
    v.set_defaults(func=run)
    r = sub.add_parser("report", help="rebuild a report folder from a saved workspace")
    r.add_argument("workspace", type=Path, help="a saved workspace (.elmows.json)")
    common.add_out(r, "the report folder to create", dest="outdir", metavar="DIR")
    r.add_argument("--checkpoint", type=Path, default=None,
                   help="use this checkpoint instead of the one the workspace names")
    r.add_argument("--word", default=None, help="compare this word (default: the selected one)")
    add_figure_options(r)
    common.add_device(r)
    common.add_force(r, "(replace) OUTDIR if it exists")
    r.set_defaults(func=run)
    return p


def run(args) -> int:
    """Dispatch ``export vectors`` / ``export report``."""
    if args.export_what == "vectors":
        return run_vectors(args)
    return run_report(args)


def _embedder(checkpoint, device, precision: str = "fp32"):
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    device = common.resolve_device(device)
    return Embedder(load_checkpoint(checkpoint_or_demo(checkpoint), device=device),
                    device=str(device), precision=precision)


def run_vectors(args) -> int:
    """Embed the input a chunk at a time and write each chunk's vectors before reading on
    (:func:`elmo_engine.io.vectors.export_stream`): memory does not grow with the input. A
    first pass checks the whole file (and counts ``--word``) before anything is written."""
    import collections

    from elmo_engine.io.vector_formats import format_for

    mode = engine_layer_mode(args.layers)
    common.mix_weights(args.mix_weights, args.layers, 1)      # given without mix: refused
    fmt = format_for(args.output, args.format)
    if common.is_stdout(args.output) and fmt == "tsv":
        raise InputError("--out -: TSV writes two files (vectors and metadata) and cannot go to "
                         "stdout; use --format npz, hdf5 or csv, or name a file")
    # at once, before numpy and torch load (a TSV export may name a projector folder)
    common.refuse_existing(args.force, args.output, folders=fmt == "tsv")
    from tqdm import tqdm

    from elmo_engine.cli.embed import EMBED_MAX_INPUT_BYTES, chunk_embedder, early_device
    from elmo_engine.io import embeddings_file as ef
    from elmo_engine.io.datasets.text_input import iter_text_input, scan_text_input
    from elmo_engine.io.vectors import LayerChoice, SentenceVectors, export_stream, output_files
    from elmo_engine.io.datasets.corpus_text import split_sentences

    choice = LayerChoice(mode, None, args.mix_gamma, args.pre_softmax)   # the files' names
    if not common.is_stdout(args.output):
        # the output itself was checked above; here the files a TSV export writes beside it
        common.refuse_existing(args.force, *(p for p in output_files(args.output, fmt, choice)
                                             if p != args.output))
        if args.output.exists() and args.output.resolve() == args.input.resolve():
            raise InputError("OUTPUT is INPUT; name another file", path=args.output)
    if args.dtype != "float32" and fmt not in ("npz", "hdf5"):
        raise InputError(f"--dtype {args.dtype} applies to npz and hdf5 outputs; {fmt} is text")
    device = early_device(args)
    split = split_sentences if args.split_sentences else None
    scan = scan_text_input(args.input, args.pretokenized, split, EMBED_MAX_INPUT_BYTES,
                           word=args.word)
    if scan.blank:
        common.log(f"note: {scan.blank_note()}")

    def read():
        return iter_text_input(args.input, args.pretokenized, scan.grouped, split,
                               EMBED_MAX_INPUT_BYTES)

    word = args.word
    if word is not None and not scan.occurrences:
        raise common.absent_word(word, (toks for _, toks in read()), "the sentences",
                                 path=args.input)
    from elmo_engine.model.checkpoint import load_checkpoint      # torch: after the input

    device = device or common.resolve_device(args.device)
    model = load_checkpoint(checkpoint_or_demo(args.checkpoint), device=device)
    n = model.opts.n_output_layers
    choice = LayerChoice(mode, common.mix_weights(args.mix_weights, args.layers, n),
                         args.mix_gamma, args.pre_softmax)
    choice.validate(n)                                  # before the (long) embedding
    n_vectors = scan.tokens if word is None else scan.occurrences
    per_value = None if fmt in ("npz", "hdf5") else TEXT_BYTES_PER_VALUE
    warning = ef.size_warning(ef.expected_output_bytes(
        n_vectors, n, 2 * model.opts.output_dim, "all" if mode == "each" else "top",
        args.dtype, per_value))
    if warning:
        common.log(f"elmo-explorer: warning: {warning}")
    emb = chunk_embedder(model, device, args.precision, scan.longest)
    # --word: only the sentences that hold it are embedded (each sentence is its own context);
    # their numbers in the file wait in a queue while their chunk is embedded
    numbers: collections.deque = collections.deque()

    def wanted():
        for i, (_, toks) in enumerate(read()):
            if word is None or word in toks:
                numbers.append(i)
                yield toks

    total = scan.tokens if word is None else None
    bar = tqdm(total=total, unit="tok", desc="embedding", file=sys.stderr,
               disable=(total or 0) < 2000 and not sys.stderr.isatty())

    def items():
        for toks, arr in ef.embedded(wanted(), emb, on_tokens=lambda d: bar.update(d - bar.n)):
            pos = None if word is None else [t for t, w in enumerate(toks) if w == word]
            yield SentenceVectors(numbers.popleft(), toks, arr, pos)

    try:
        with common.output_file(args.output, "." + fmt) as output:
            summary = export_stream(output, items(), fmt, choice,
                                    n_selected=None if word is None else scan.occurrences,
                                    overwrite=args.force or common.is_stdout(args.output),
                                    dtype=args.dtype)
    finally:
        bar.close()
    files = ["stdout"] if common.is_stdout(args.output) else [str(f) for f in summary.files]
    common.log(f"wrote {summary.n_vectors} vectors of {summary.n_sentences} sentences "
               f"({choice.label()}, {summary.fmt}) to " + ", ".join(files))
    return 0


#: about the bytes a value takes in CSV and TSV ("%.7g" and a separator), for the size warning
TEXT_BYTES_PER_VALUE = 12


# ---- report --------------------------------------------------------------------------------
def engine_layer_mode(layers: str) -> str:
    """``--layers`` (all, top, average, mix) → :class:`LayerChoice`'s mode (``all`` is the
    engine's ``each``)."""
    return "each" if layers == "all" else layers


def run_report(args) -> int:
    from elmo_engine.analysis.report import export_report, layers_result_problem
    from elmo_engine.io.report import check_report_folder
    from elmo_engine.io.workspace_file import load_workspace

    common.refuse_stdout(args.outdir, "a report")
    common.refuse_existing(args.force, args.outdir, folders=True)
    check_report_folder(args.outdir, args.force)       # never a folder of the user's
    style = figure_style(args)
    loaded = load_workspace(args.workspace, verify_checksum=args.checkpoint is None)
    data = loaded.data
    problem = layers_result_problem(data)
    if problem:
        raise InputError(problem, path=args.workspace)
    notes: List[str] = []
    checkpoint = args.checkpoint
    if checkpoint is None:
        if data.checkpoint is None:
            raise InputError("the workspace names no checkpoint; pass --checkpoint",
                             path=args.workspace)
        if loaded.checkpoint_missing:
            raise InputError(f"the workspace's checkpoint {data.checkpoint.path} was not found "
                             "(moved?); pass --checkpoint", path=args.workspace)
        checkpoint = loaded.checkpoint_path
        if loaded.checksum_mismatch:
            msg = (f"the checkpoint at {checkpoint} differs from the one the workspace was saved "
                   "with (checksum mismatch): numbers may differ from the saved analysis")
            common.log(f"elmo-explorer: warning: {msg}")
            notes.append("Warning: " + msg + ".")
    # the precision the workspace was computed in, as the app reopens it (fp32 where this
    # machine cannot run it, said)
    from elmo_engine.runtime import usable_precision

    device = common.resolve_device(args.device)
    saved = data.checkpoint.precision if data.checkpoint is not None else "fp32"
    precision, why = usable_precision(saved, device.type == "cuda")
    if why:
        common.log(f"elmo-explorer: warning: the workspace's {why}")
        notes.append(f"The workspace was computed in {saved}; {why}.")
    spec, files = export_report(data, str(args.workspace),
                                _embedder(checkpoint, str(device), precision), args.outdir,
                                style, args.word, notes, overwrite=args.force)
    common.log(f"wrote a report with {len(spec.tables)} tables and {len(spec.figures)} "
               f"figure files ({len(files)} files) to {args.outdir}")
    return 0


def add_figure_options(p: argparse.ArgumentParser) -> None:
    """``--width-in``, ``--dpi`` and ``--pdf``: the report's figure style."""
    p.add_argument("--width-in", type=float, default=6.5, metavar="W",
                   help="figure width in inches, exactly (default 6.5: a full text width)")
    p.add_argument("--dpi", type=int, default=300, metavar="D",
                   help="PNG resolution (default 300: 6.5 in → 1950 px)")
    p.add_argument("--pdf", action="store_true", help="also write every figure as PDF")


def figure_style(args):
    """The :class:`~elmo_engine.io.figures.FigureStyle` of ``--width-in``/``--dpi``/``--pdf``."""
    from elmo_engine.io.figures import FigureStyle

    return FigureStyle(args.width_in, args.dpi,
                       ("png", "svg", "pdf") if args.pdf else ("png", "svg"))
