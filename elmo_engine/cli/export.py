"""``elmo-explorer export vectors|report``: the app's exports, headless, for batch use.

Examples::

    elmo-explorer export vectors sentences.txt out.hdf5 --layers each
    elmo-explorer export vectors sentences.txt projector/ --format tsv --layers top --word bank
    elmo-explorer export vectors sentences.txt bank.tsv --layers top --word bank   # two files
    elmo-explorer export vectors sentences.txt mix.npz --layers mix --mix-weights 0.2,0.3,0.5
    elmo-explorer export report analysis.elmows.json report/ --force

``export report`` rebuilds a report from a saved workspace: it embeds the workspace's sentences
with its checkpoint, compares the selected word across its occurrences layer by layer
(tables, the heatmaps and the summary figure, with the workspace's groups), and adds the probe
results stored in the workspace (table, scores and scalar-mix weights), every figure as PNG, SVG
and PDF from the one figure path (``elmo_engine.io.figures.contexts``), with ``report.md``
and ``report.html``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List

from elmo_engine.cli import common
from elmo_engine.cli.common import checkpoint_or_demo, parse_floats
from elmo_engine.errors import InputError
from elmo_engine.io.report import write_report
from elmo_engine.io.vectors import FORMATS, LAYER_MODES, LayerChoice, export_vectors


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``export`` (with ``vectors`` and ``report``) to an argparse subparsers object."""
    p = subparsers.add_parser("export", help="export vectors or a report (headless)",
                              description="Write vectors (npz, HDF5, projector TSV, CSV) or a "
                                          "report folder, as the app's File menu does.")
    sub = p.add_subparsers(dest="export_what", metavar="WHAT", required=True)
    v = sub.add_parser("vectors", help="embed a file of sentences and write their vectors")
    v.add_argument("input", type=Path,
                   help="UTF-8 text, one sentence per line (blank lines skipped)")
    v.add_argument("output", type=Path,
                   help="file (.npz/.hdf5/.csv/.tsv) or folder (TSV, a name without extension)")
    common.add_checkpoint(v)
    v.add_argument("--format", choices=FORMATS, default=None,
                   help="default: from OUTPUT's extension (a name without one: TSV folder; "
                        "NAME.tsv: NAME.tsv + NAME.metadata.tsv)")
    v.add_argument("--layers", choices=LAYER_MODES, default="each",
                   help="each layer, the top one, their plain average, or a scalar mix")
    v.add_argument("--mix-weights", default=None, metavar="W0,W1,…",
                   help="with --layers mix: one weight per layer (normalised to sum 1)")
    v.add_argument("--mix-gamma", type=float, default=1.0, help="the mix's scale γ (default 1)")
    v.add_argument("--pre-softmax", action="store_true",
                   help="--mix-weights are a ScalarMix's scalars s (weights = softmax(s))")
    v.add_argument("--word", default=None,
                   help="only the occurrences of this word (exact spelling)")
    v.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                   help="the vectors' type in npz and hdf5 (default float32; float16 halves "
                        "the file)")
    common.add_pretokenized(v)
    common.add_device(v)
    common.add_precision(v)
    common.add_force(v, "OUTPUT if it exists")
    v.set_defaults(func=run)
    r = sub.add_parser("report", help="rebuild a report folder from a saved workspace")
    r.add_argument("workspace", type=Path, help="a saved workspace (.elmows.json)")
    r.add_argument("outdir", type=Path, help="the report folder to create")
    r.add_argument("--checkpoint", type=Path, default=None,
                   help="use this checkpoint instead of the one the workspace names")
    r.add_argument("--word", default=None, help="compare this word (default: the selected one)")
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
    from elmo_engine.io.vectors import format_for, output_files

    if args.layers == "mix" and args.mix_weights is None:
        raise InputError("--layers mix needs --mix-weights (one weight per layer)")
    if args.layers != "mix" and args.mix_weights is not None:
        raise InputError("--mix-weights only applies with --layers mix")
    weights = parse_floats(args.mix_weights, "--mix-weights")
    choice = LayerChoice(args.layers, tuple(weights) if weights else None, args.mix_gamma,
                         args.pre_softmax)
    fmt = format_for(args.output, args.format)
    if args.dtype != "float32" and fmt not in ("npz", "hdf5"):
        raise InputError(f"--dtype {args.dtype} applies to npz and hdf5 outputs; {fmt} is text")
    common.refuse_existing(args.force, args.output, *output_files(args.output, fmt, choice))
    common.resolve_precision(args.precision, common.resolve_device(args.device))
    tokens = common.read_text(args.input, args.pretokenized, unlimited=True).tokens
    refs = None
    if args.word is not None:
        refs = [(s, t) for s, toks in enumerate(tokens) for t, w in enumerate(toks) if w == args.word]
        if not refs:
            raise common.absent_word(args.word, tokens, "the sentences", path=args.input)
    emb = _embedder(args.checkpoint, args.device, args.precision)
    choice.validate(emb.opts.n_output_layers)          # before the (long) embedding
    acts = emb.embed(tokens)
    summary = export_vectors(args.output, tokens, acts, fmt, choice, refs,
                             overwrite=args.force, dtype=args.dtype)
    common.log(f"wrote {summary.n_vectors} vectors of {summary.n_sentences} sentences "
               f"({choice.label()}, {summary.fmt}) to "
               + ", ".join(str(f) for f in summary.files))
    return 0


# ---- report --------------------------------------------------------------------------------
def run_report(args) -> int:
    from elmo_engine.analysis.report import build_report_spec
    from elmo_engine.io.workspace_file import load_workspace

    common.refuse_existing(args.force, args.outdir)
    loaded = load_workspace(args.workspace, verify_checksum=args.checkpoint is None)
    data = loaded.data
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
            print(f"elmo-explorer export report: warning: {msg}", file=sys.stderr)
            notes.append("Warning: " + msg + ".")
    args.outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp_figures = Path(tempfile.mkdtemp(prefix=f".{args.outdir.name}.figures-",
                                        dir=args.outdir.parent))
    try:
        spec = build_report_spec(loaded, _embedder(checkpoint, args.device), args.word, notes,
                                 tmp_figures)
        files = write_report(args.outdir, spec, overwrite=args.force)
    finally:
        shutil.rmtree(tmp_figures, ignore_errors=True)
    print(f"wrote a report with {len(spec.tables)} tables and {len(spec.figures)} figures "
          f"({len(files)} files) to {args.outdir}", file=sys.stderr)
    return 0
