"""``elmo-explorer export vectors|report``: the app's exports, headless, for batch use.

Examples::

    elmo-explorer export vectors sentences.txt out.hdf5 --layers each
    elmo-explorer export vectors sentences.txt projector/ --format tsv --layers top --word bank
    elmo-explorer export vectors sentences.txt mix.npz --layers mix --mix-weights 0.2,0.3,0.5
    elmo-explorer export report analysis.elmows.json report/ --force

``export report`` rebuilds a report from a saved workspace: it embeds the workspace's sentences
with its checkpoint, compares the selected word across its occurrences layer by layer
(tables and an SVG heatmap), and adds the probe results stored in the workspace (table and an SVG
chart of the scalar-mix weights), with ``report.md`` and ``report.html``.
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from elmo_engine.cli import parse_floats
from elmo_engine.errors import InputError
from elmo_engine.report import ReportFigure, ReportSpec, ReportTable, write_report
from elmo_engine.vectors_export import FORMATS, LAYER_MODES, LayerChoice, export_vectors

#: at most this many occurrences get a per-layer similarity table shown on the report pages
MAX_SHOWN_OCCURRENCES = 12


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``export`` (with ``vectors`` and ``report``) to an argparse subparsers object."""
    p = subparsers.add_parser("export", help="export vectors or a report (headless)",
                              description="Write vectors (npz, HDF5, projector TSV, CSV) or a "
                                          "report folder, as the app's File menu does.")
    sub = p.add_subparsers(dest="export_what", metavar="WHAT", required=True)
    v = sub.add_parser("vectors", help="embed a file of sentences and write their vectors")
    v.add_argument("input", type=Path, help="UTF-8 text, one sentence per line")
    v.add_argument("output", type=Path, help="file (.npz/.hdf5/.csv) or folder (TSV)")
    v.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint folder or file (default: the bundled demo model)")
    v.add_argument("--format", choices=FORMATS, default=None,
                   help="default: from OUTPUT's extension (a name without one: TSV folder)")
    v.add_argument("--layers", choices=LAYER_MODES, default="each",
                   help="each layer, the top one, their plain average, or a scalar mix")
    v.add_argument("--mix-weights", default=None, metavar="W0,W1,…",
                   help="with --layers mix: one weight per layer (normalised to sum 1)")
    v.add_argument("--mix-gamma", type=float, default=1.0, help="the mix's scale γ (default 1)")
    v.add_argument("--pre-softmax", action="store_true",
                   help="--mix-weights are a ScalarMix's scalars s (weights = softmax(s))")
    v.add_argument("--word", default=None,
                   help="only the occurrences of this word (exact spelling)")
    v.add_argument("--tokenize", action="store_true",
                   help="tokenize typed text instead of splitting on spaces")
    v.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    v.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    v.set_defaults(func=run)
    r = sub.add_parser("report", help="rebuild a report folder from a saved workspace")
    r.add_argument("workspace", type=Path, help="a saved workspace (.elmows.json)")
    r.add_argument("outdir", type=Path, help="the report folder to create")
    r.add_argument("--checkpoint", type=Path, default=None,
                   help="use this checkpoint instead of the one the workspace names")
    r.add_argument("--word", default=None, help="compare this word (default: the selected one)")
    r.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    r.add_argument("--force", action="store_true", help="replace OUTDIR if it exists")
    r.set_defaults(func=run)
    return p


def run(args) -> int:
    """Dispatch ``export vectors`` / ``export report``."""
    if args.export_what == "vectors":
        return run_vectors(args)
    return run_report(args)


def _embedder(checkpoint, device):
    from elmo_engine.checkpoint import load_checkpoint
    from elmo_engine.embedder import Embedder

    if checkpoint is None:
        try:
            from elmo_engine.resources import demo_checkpoint_path
        except ImportError:
            raise InputError("no demo model is installed; pass --checkpoint") from None
        checkpoint = demo_checkpoint_path()
    return Embedder(load_checkpoint(checkpoint), device=device)


def run_vectors(args) -> int:
    from elmo_engine.cli import read_sentence_lines

    if args.layers == "mix" and args.mix_weights is None:
        raise InputError("--layers mix needs --mix-weights (one weight per layer)")
    if args.layers != "mix" and args.mix_weights is not None:
        raise InputError("--mix-weights only applies with --layers mix")
    weights = parse_floats(args.mix_weights, "--mix-weights")
    choice = LayerChoice(args.layers, tuple(weights) if weights else None, args.mix_gamma,
                         args.pre_softmax)
    if args.output.exists() and not args.force:
        raise InputError("already exists; pass --force to overwrite it", path=args.output)
    tokens = read_sentence_lines(args.input, args.tokenize)
    emb = _embedder(args.checkpoint, args.device)
    choice.validate(emb.opts.n_output_layers)          # before the (long) embedding
    acts = emb.embed(tokens)
    refs = None
    if args.word is not None:
        refs = [(s, t) for s, toks in enumerate(tokens) for t, w in enumerate(toks) if w == args.word]
        if not refs:
            raise InputError(f"'{args.word}' does not occur in the sentences", path=args.input)
    summary = export_vectors(args.output, tokens, acts, args.format, choice, refs,
                             overwrite=args.force)
    print(f"wrote {summary.n_vectors} vectors of {summary.n_sentences} sentences "
          f"({choice.label()}, {summary.fmt}) to {args.output}", file=sys.stderr)
    return 0


# ---- report --------------------------------------------------------------------------------
def run_report(args) -> int:
    from elmo_engine.workspace_file import load_workspace

    if args.outdir.exists() and not args.force:
        raise InputError("already exists; pass --force to replace it", path=args.outdir)
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
        spec = build_report_spec(loaded, checkpoint, args.word, args.device, notes, tmp_figures)
        files = write_report(args.outdir, spec, overwrite=args.force)
    finally:
        shutil.rmtree(tmp_figures, ignore_errors=True)
    print(f"wrote a report with {len(spec.tables)} tables and {len(spec.figures)} figures "
          f"({len(files)} files) to {args.outdir}", file=sys.stderr)
    return 0


def build_report_spec(loaded, checkpoint, word: Optional[str], device: Optional[str],
                      notes: List[str], figure_dir: Path) -> ReportSpec:
    """Embed the workspace's sentences and gather the tables and figures of its report."""
    from elmo_engine.embedder import MAX_SENTENCE_TOKENS
    from elmo_engine.tokenize import tokenize

    data = loaded.data
    emb = _embedder(checkpoint, device)
    tokens = [tokenize(s)[:MAX_SENTENCE_TOKENS] for s in data.sentences]
    acts = emb.embed(tokens) if tokens else []
    return report_spec(data, tokens, acts, emb.model.info.describe(), str(loaded.path), word,
                       notes, figure_dir)


def report_spec(data, tokens, acts, model: Optional[dict], source: str, word: Optional[str] = None,
                notes: Sequence[str] = (), figure_dir: Optional[Path] = None) -> ReportSpec:
    """The report of a workspace's state (Qt-free; the app adds its own figures).

    Parameters
    ----------
    data : a :class:`~elmo_engine.workspace_file.WorkspaceData`
    tokens, acts : the tokens and ``(L+1, n, 2P)`` activations of ``data.sentences``
    model : ``CheckpointInfo.describe()`` of the model used, or None
    source : where the workspace came from (a path, or "ELMo Explorer session")
    word : the word to compare (default: the selected token's)
    figure_dir : write headless SVG figures here (None: tables only)
    """
    notes = list(notes)
    if word is None and data.selection is not None:
        s, t = data.selection["sentence"], data.selection["token"]
        if s < len(tokens) and t < len(tokens[s]):
            word = tokens[s][t]
            if data.selection.get("word") and data.selection["word"] != word:
                notes.append(f"The saved selection was '{data.selection['word']}'; the token at "
                             f"that place is now '{word}' (the tokenizer changed?).")
    info = {}
    if model is not None:
        info = {k: model[k] for k in ("name", "format", "checksum", "options_path", "weights_path")}
        info |= {"options": model["options"], "parameters": model["parameter_counts"].get("total")}
    spec = ReportSpec(
        title=f"ELMo Explorer report: {Path(source).name or source}",
        model=info or {"model": "none loaded"},
        data={"workspace": source} | ({"saved": data.saved_at} if data.saved_at else {})
        | {"sentences": len(tokens), "tokens": int(sum(len(t) for t in tokens))},
        parameters={"selected word": word or "(none)", "views": data.views},
        notes=notes + ([data.notes] if data.notes else []))
    if word and acts and all(a is not None for a in acts):
        _add_contexts(spec, tokens, acts, word, data.views.get("contexts", {}), figure_dir)
    if data.probe_runs:
        _add_probes(spec, data.probe_runs, source, figure_dir)
    return spec


def _num(v) -> Optional[float]:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 6)


def _add_contexts(spec: ReportSpec, tokens, acts, word: str, state: dict,
                  figure_dir: Optional[Path]) -> None:
    from elmo_engine import compare as cmp

    n_layers = acts[0].shape[0] if acts else 0
    weights = state.get("weights")
    if not (isinstance(weights, list) and len(weights) == n_layers
            and all(isinstance(w, (int, float)) and w >= 0 for w in weights)):
        weights = None
    direction = state.get("direction") if state.get("direction") in cmp.DIRECTIONS else "both"
    corrected = state.get("corrected") is True
    comp, _vectors, total = cmp.compare_word(tokens, acts, word, weights, direction, corrected)
    if comp is None:
        spec.notes.append(f"'{word}' does not occur in the sentences: no similarity tables.")
        return
    spec.parameters["contexts"] = {"direction": direction, "anisotropy corrected": corrected,
                                   "mix weights": [round(float(w), 4) for w in comp.weights],
                                   "occurrences compared": f"{len(comp.occurrences)} of {total}"}
    spec.tables.append(ReportTable(
        "contexts_summary", f"'{word}' across contexts: similarity per layer",
        [{"view": name, "self-similarity": _num(comp.self_sim[k]),
          "within groups": _num(comp.within[k]), "between groups": _num(comp.between[k])}
         for k, name in enumerate(comp.names)],
        caption="Self-similarity: mean cosine between the word's occurrences (all pairs i ≠ j), "
                "per layer and for the scalar mix (Ethayarajh 2019)."))
    spec.tables.append(ReportTable(
        "contexts_occurrences", f"Occurrences of '{word}'",
        [{"#": i + 1, "sentence": s + 1, "token": t + 1, "context": comp.labels[i]}
         for i, (s, t) in enumerate(comp.occurrences)]))
    show = len(comp.occurrences) <= MAX_SHOWN_OCCURRENCES
    for k, name in enumerate(comp.names):
        heads = [f"{i + 1}" for i in range(len(comp.occurrences))]
        rows = [{"occurrence": f"{i + 1}: {comp.labels[i]}",
                 **{h: round(float(comp.matrices[k, i, j]), 4) for j, h in enumerate(heads)}}
                for i in range(len(comp.occurrences))]
        spec.tables.append(ReportTable(f"contexts_similarity_{name.replace(' ', '')}",
                                       f"Cosine similarity, {name}", rows,
                                       ["occurrence", *heads], show=show))
    if figure_dir is None:
        return
    path = figure_dir / "contexts_heatmaps.svg"
    path.write_text(svg_heatmaps(comp.matrices, list(comp.names), word), encoding="utf-8")
    spec.figures.append(ReportFigure(path, f"Cosine similarity of the occurrences of '{word}', "
                                           "per layer and for the mix"))


def _add_probes(spec: ReportSpec, runs: List[dict], ws_path, figure_dir: Optional[Path]) -> None:
    from elmo_engine.probe_cli import RESULT_COLUMNS, results_rows
    from elmo_engine.probes import ProbeResult

    results = []
    for i, d in enumerate(runs):
        try:
            results.append(ProbeResult.from_dict(d))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"key 'probe_runs[{i}]' is not a probe result ({type(e).__name__}: "
                             f"{e})", path=ws_path) from None
    rows = [dict(zip(RESULT_COLUMNS, r)) for r in results_rows(results)]
    spec.tables.append(ReportTable("probe_results", "Probe results", rows, list(RESULT_COLUMNS),
                                   caption="One row per layer and one for the scalar mix; scores "
                                           "are fractions in [0, 1]."))
    if figure_dir is None:
        return
    path = figure_dir / "probe_mix_weights.svg"
    path.write_text(svg_bars([r.mix.weights for r in results], [r.name for r in results]),
                    encoding="utf-8")
    spec.figures.append(ReportFigure(path, "Scalar-mix layer weights per probe run "
                                           "(softmax-normalised, each run sums to 1)"))


# ---- headless SVG figures ------------------------------------------------------------------
PALETTE = ["#2471a3", "#c0392b", "#27ae60", "#8e44ad", "#e67e22", "#17a589", "#7f8c8d"]


def _esc(text: str) -> str:
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _colour(v: float) -> str:
    """Cosine in [-1, 1] → a diverging blue–white–red colour."""
    v = max(-1.0, min(1.0, float(v))) if np.isfinite(v) else 0.0
    a = abs(v)
    tgt = (178, 24, 43) if v >= 0 else (33, 102, 172)
    r, g, b = (round(255 + (c - 255) * a) for c in tgt)
    return f"#{r:02x}{g:02x}{b:02x}"


def svg_heatmaps(mats: np.ndarray, names: Sequence[str], word: str, cell: float = 0.0) -> str:
    """Side-by-side heatmaps ``(K, n, n)`` with titles, axis labels and a colour-bar legend."""
    k_views, n = mats.shape[0], mats.shape[1]
    size = 220.0
    cell = cell or size / max(n, 1)
    gap, left, top = 30.0, 50.0, 50.0
    width = left + k_views * (size + gap) + 80
    height = top + size + 60
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
           f"viewBox='0 0 {width:.0f} {height:.0f}' font-family='sans-serif' font-size='13'>",
           f"<rect width='100%' height='100%' fill='white'/>",
           f"<text x='{left}' y='20' font-size='15'>Cosine similarity of '{_esc(word)}' "
           f"({n} occurrences)</text>"]
    for k in range(k_views):
        x0 = left + k * (size + gap)
        out.append(f"<text x='{x0 + size / 2:.1f}' y='{top - 8}' text-anchor='middle'>"
                   f"{_esc(names[k])}</text>")
        for i in range(n):
            for j in range(n):
                out.append(f"<rect x='{x0 + j * cell:.2f}' y='{top + i * cell:.2f}' "
                           f"width='{cell + 0.3:.2f}' height='{cell + 0.3:.2f}' "
                           f"fill='{_colour(mats[k, i, j])}'/>")
        out.append(f"<rect x='{x0}' y='{top}' width='{size}' height='{size}' fill='none' "
                   "stroke='#444'/>")
        step = max(1, math.ceil(n / 10))
        for i in range(0, n, step):                     # occurrence numbers on both axes
            c = (i + 0.5) * cell
            out.append(f"<text x='{x0 + c:.1f}' y='{top + size + 13}' font-size='10' "
                       f"text-anchor='middle'>{i + 1}</text>")
            if k == 0:
                out.append(f"<text x='{x0 - 4}' y='{top + c + 4:.1f}' font-size='10' "
                           f"text-anchor='end'>{i + 1}</text>")
        out.append(f"<text x='{x0 + size / 2:.1f}' y='{top + size + 32}' text-anchor='middle'>"
                   "occurrence</text>")
    out.append(f"<text transform='translate({left - 22},{top + size / 2}) rotate(-90)' "
               "text-anchor='middle'>occurrence</text>")
    bx = left + k_views * (size + gap)
    for s in range(100):
        v = 1 - 2 * s / 99
        out.append(f"<rect x='{bx:.1f}' y='{top + s * size / 100:.2f}' width='14' "
                   f"height='{size / 100 + 0.3:.2f}' fill='{_colour(v)}'/>")
    for v, y in (("+1", top + 5), ("0", top + size / 2 + 4), ("−1", top + size)):
        out.append(f"<text x='{bx + 20:.1f}' y='{y:.1f}'>{v}</text>")
    out.append(f"<text x='{bx - 4:.1f}' y='{top + size + 32}'>cosine</text></svg>")
    return "\n".join(out) + "\n"


def svg_bars(weights: Sequence[Sequence[float]], names: Sequence[str]) -> str:
    """Grouped bars: per layer, one bar per run; axis labels, ticks and a legend."""
    n_runs = max(len(weights), 1)
    k_max = max((len(w) for w in weights), default=1)
    left, top, pw, ph = 60.0, 40.0, 110.0 * k_max, 220.0
    width, height = left + pw + 220, top + ph + 60
    bw = 0.8 * (pw / k_max) / n_runs
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
           f"viewBox='0 0 {width:.0f} {height:.0f}' font-family='sans-serif' font-size='13'>",
           "<rect width='100%' height='100%' fill='white'/>",
           f"<text x='{left}' y='22' font-size='15'>Scalar-mix layer weights</text>"]
    for tick in range(6):
        v = tick / 5
        y = top + ph - v * ph
        out.append(f"<line x1='{left}' x2='{left + pw}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ddd'/>")
        out.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{v:.1f}</text>")
    for r, w in enumerate(weights):
        for k, v in enumerate(w):
            x = left + k * (pw / k_max) + 0.1 * (pw / k_max) + r * bw
            h = max(0.0, min(1.0, float(v))) * ph
            out.append(f"<rect x='{x:.1f}' y='{top + ph - h:.1f}' width='{bw * 0.92:.1f}' "
                       f"height='{h:.1f}' fill='{PALETTE[r % len(PALETTE)]}'/>")
    for k in range(k_max):
        out.append(f"<text x='{left + (k + 0.5) * pw / k_max:.1f}' y='{top + ph + 18}' "
                   f"text-anchor='middle'>layer {k}</text>")
    out.append(f"<line x1='{left}' x2='{left + pw}' y1='{top + ph}' y2='{top + ph}' stroke='#444'/>")
    out.append(f"<line x1='{left}' x2='{left}' y1='{top}' y2='{top + ph}' stroke='#444'/>")
    out.append(f"<text x='{left + pw / 2:.1f}' y='{top + ph + 42}' text-anchor='middle'>biLM layer"
               "</text>")
    out.append(f"<text transform='translate(18,{top + ph / 2}) rotate(-90)' text-anchor='middle'>"
               "mix weight (softmax)</text>")
    for r, name in enumerate(names):
        y = top + 10 + r * 20
        out.append(f"<rect x='{left + pw + 20}' y='{y - 10}' width='12' height='12' "
                   f"fill='{PALETTE[r % len(PALETTE)]}'/>")
        out.append(f"<text x='{left + pw + 38}' y='{y}'>{_esc(name)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


__all__ = ["add_parser", "build_report_spec", "report_spec", "run", "run_report", "run_vectors", "svg_bars",
           "svg_heatmaps"]
