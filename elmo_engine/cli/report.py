"""``elmo-explorer report``: a report folder (and optionally a workspace) from a sentence file
and a word, headless: the whole "Export report…" workflow without the app.

Examples::

    elmo-explorer report sentences.txt --word bank --out report/
    elmo-explorer report resources/demo_sentences.tsv --word bank --out report/ \\
        --probes pos.json wsd.json --layers-json layers.json --workspace bank.elmows.json
    elmo-explorer report sentences.txt --word bank --checkpoint small --out r/ \\
        --width-in 3.3 --dpi 600

It reads SENTENCES (one sentence per line, or ``group<TAB>sentence`` lines: the groups become
the word's groups, as the app opens such a file), builds the workspace the app would hold (the
sentences, the checkpoint, the word selected at its first occurrence, the contexts view's word
and groups, the probe results of ``--probes`` (files written by ``probe --out``) and the layers
results of ``--layers-json`` (``layers --json``)), and writes the report through the one report
path, :func:`elmo_engine.analysis.report.export_report` — the code of the app's *Export
report…* and of ``export report`` — so the files are the same as the app's for the same inputs.
``--workspace`` saves that workspace (:mod:`elmo_engine.io.workspace_file`, the format the app
opens). Results (what was written) go to stderr; bad input exits 1 with one line naming the file.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List, Optional

from elmo_engine.cli import common
from elmo_engine.cli.common import checkpoint_or_demo
from elmo_engine.cli.export import add_figure_options, figure_style
from elmo_engine.errors import InputError

#: the largest probe or layers JSON file read
MAX_RESULT_BYTES = 32 << 20


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``report`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "report", help="a report folder (and a workspace) from sentences and a word",
        description="Compare WORD across the sentences of SENTENCES layer by layer, add probe "
                    "and layers results, and write the report the app's Export report… writes "
                    "(same figures, tables and names); --workspace also saves the analysis as "
                    "a workspace the app opens.")
    p.add_argument("sentences", type=Path,
                   help="UTF-8 text, one sentence per line, or group<TAB>sentence lines")
    p.add_argument("--word", required=True, help="the word to compare (exact spelling)")
    common.add_pretokenized(p)
    common.add_checkpoint(p)
    p.add_argument("--probes", type=Path, nargs="+", default=[], metavar="RESULTS.json",
                   help="probe results written by 'elmo-explorer probe --out' (one or more)")
    p.add_argument("--layers-json", type=Path, default=None, metavar="LAYERS.json",
                   help="layers results written by 'elmo-explorer layers --json -o FILE'")
    p.add_argument("--out", "-o", type=Path, required=True, metavar="DIR",
                   help="the report folder to create")
    p.add_argument("--workspace", dest="workspace_out", type=Path, default=None,
                   metavar="OUT.elmows.json",
                   help="also save the analysis as a workspace the app opens")
    add_figure_options(p)
    common.add_device(p)
    common.add_force(p, "(replace) DIR and the workspace if they exist")
    p.set_defaults(func=run)
    return p


def _read_json(path: Path, what: str):
    from elmo_engine.files import parse_json_strict, read_bounded
    from elmo_engine.io.probe_result_check import check_depth

    try:
        raw = read_bounded(path, MAX_RESULT_BYTES)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the {what}: {e}", path=path) from None
    from elmo_engine.files import utf8_text

    try:
        text = utf8_text(raw, bom=True)                          # a BOM dropped
    except ValueError as e:
        raise InputError(f"the {what}: {e}", path=path) from None
    try:            # nesting too deep and NaN refused here, naming the file (not a traceback)
        doc = parse_json_strict(text)
    except ValueError as e:
        raise InputError(f"the {what} is not JSON ({e})", path=path) from None
    try:
        check_depth(doc, "")
    except ValueError as e:
        raise InputError(f"the {what}: {e}", path=path) from None
    return doc


def read_probe_results(paths: List[Path]) -> List[dict]:
    """The probe results of ``probe --out`` files (a result object or a list of them), each
    checked as the app checks a stored result."""
    from elmo_engine.analysis.probes.results import ProbeResult
    from elmo_engine.io.probe_result_check import ResultFormatError, check_result_dict

    runs: List[dict] = []
    for path in paths:
        doc = _read_json(path, "probe results")
        items = doc if isinstance(doc, list) else [doc]
        for i, d in enumerate(items):
            where = f"result {i + 1}: " if isinstance(doc, list) else ""
            try:
                check_result_dict(d)
                ProbeResult.from_dict(d)
            except (ResultFormatError, KeyError, TypeError, ValueError) as e:
                raise InputError(f"{where}not a probe result ({e})", path=path) from None
            runs.append(d)
    return runs


def read_layers_result(path: Optional[Path]) -> Optional[dict]:
    """The ``layers --json`` document of ``path`` (None: no file)."""
    if path is None:
        return None
    from elmo_engine.io.layers_result_check import LayersFormatError, check_layers_document

    doc = _read_json(path, "layers results")
    try:
        check_layers_document(doc)
    except LayersFormatError as e:
        raise InputError(f"not a 'layers --json' document ({e})", path=path) from None
    return doc


def build_workspace(text, word: str, checkpoint: Path, checksum: str, name: str,
                    probe_runs: List[dict], layers: Optional[dict],
                    tokenization: str = "tokenize"):
    """The workspace the app would hold: sentences (split into tokens as ``tokenization``
    says), checkpoint, ``word`` selected at its first occurrence, the contexts view's word and
    groups, probe and layers results."""
    from elmo_engine.analysis.contexts.groups import word_groups
    from elmo_engine.analysis.report import LAYERS_VIEW, LAYERS_VIEW_VERSION, tokenize_sentences
    from elmo_engine.io.workspace_file import CheckpointRef, WorkspaceData

    sentences = [" ".join(t) for t in text.tokens]
    tokens = tokenize_sentences(sentences, tokenization)     # as the app reads them back
    first = next(((s, t) for s, toks in enumerate(tokens) for t, w in enumerate(toks)
                  if w == word), None)
    if first is None:
        raise common.absent_word(word, tokens, f"the {len(tokens)} sentences", path=text.path)
    contexts: Dict[str, Any] = {"word": word}
    if text.grouped:
        groups = word_groups(word, tokens, text.groups)
        if groups:
            contexts["groups"] = {word: [{"sentence": s, "token": t, "group": g}
                                         for (s, t), g in sorted(groups.items())]}
    views: Dict[str, Any] = {"contexts": contexts}
    if layers is not None:
        views[LAYERS_VIEW] = {"version": LAYERS_VIEW_VERSION, "result": layers}
    return WorkspaceData(
        sentences=sentences, tokenization=tokenization,
        checkpoint=CheckpointRef(str(checkpoint.resolve()), checksum, name),
        selection={"sentence": first[0], "token": first[1], "word": word},
        views=views, probe_runs=probe_runs), tokens


def run(args) -> int:
    """Run ``report``: read, embed, compare, write the report (and the workspace)."""
    from elmo_engine.analysis.report import export_report
    from elmo_engine.embed.embedder import Embedder, check_held_activations
    from elmo_engine.io.report import check_report_folder
    from elmo_engine.io.workspace_file import SUFFIX, checkpoint_checksum, save_workspace
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.tokenize import Tokenization

    style = figure_style(args)
    common.refuse_stdout(args.out, "a report")
    common.refuse_existing(args.force, args.out, folders=True)
    common.refuse_existing(args.force, args.workspace_out)
    check_report_folder(args.out, args.force)       # never a folder of the user's
    if args.workspace_out is not None and not args.workspace_out.name.endswith(".json"):
        raise InputError(f"a workspace file's name ends in {SUFFIX}", path=args.workspace_out)
    text = common.read_text(args.sentences, args.pretokenized)
    if not text.tokens:
        raise InputError("no sentences", path=args.sentences)
    probe_runs = read_probe_results(args.probes)
    layers = read_layers_result(args.layers_json)
    checkpoint = checkpoint_or_demo(args.checkpoint)
    device = common.resolve_device(args.device)
    model = load_checkpoint(checkpoint, device=device)
    check_held_activations(sum(len(t) for t in text.tokens), model.opts, what="sentences",
                           path=args.sentences)
    emb = Embedder(model, device=str(device))
    data, tokens = build_workspace(text, args.word, checkpoint, checkpoint_checksum(checkpoint),
                                   model.info.name, probe_runs, layers,
                                   Tokenization.of(args.pretokenized).value)
    source = str(args.workspace_out) if args.workspace_out is not None else str(args.sentences)
    spec, files = export_report(data, source, emb, args.out, style, overwrite=args.force,
                                tokens=tokens)
    common.log(f"wrote a report with {len(spec.tables)} tables and {len(spec.figures)} figure "
               f"files ({len(files)} files, figures {style.describe()}) to {args.out}")
    if args.workspace_out is not None:
        save_workspace(args.workspace_out, data)
        common.log(f"wrote the workspace {args.workspace_out} "
                   "(File → Open workspace… in the app)")
    return 0
