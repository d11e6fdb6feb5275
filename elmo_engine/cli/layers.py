"""``elmo-explorer layers``: how contextual each layer is, how alike layers and models are, and
how many bits a probe's labels cost given each layer.

Examples::

    elmo-explorer layers                                   # the shipped reference corpus
    elmo-explorer layers corpus.txt --json -o layers.json
    elmo-explorer layers corpus.txt --checkpoint A/ --compare B/ --json -o layers.json --force
    elmo-explorer layers --mdl-task pos --mdl-train en_ewt-ud-train.conllu.gz --json > l.json

The results go to stdout (or ``-o FILE``) as tables, or with ``--json`` as the documented JSON
(:data:`JSON_DESCRIPTION`); progress goes to stderr. The engine work is in
:mod:`elmo_engine.analysis`.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple


from elmo_engine.analysis.layers import HUBNESS_K, HUBNESS_MAX_POINTS, MAX_LAYERS_TOKENS
from elmo_engine.cli import common
from elmo_engine.errors import InputError

MDL_TASKS = ("pos", "tsv", "demo-pos", "demo-supersense", "demo-wsd")
#: ``--max-tokens``' default and largest value: the tokens the analysis takes (its per-word
#: activations are kept; a seeded sample of whole sentences of a larger file; the shipped
#: reference corpus, 81,792 tokens, is analysed whole)
SAMPLE_TOKENS = MAX_LAYERS_TOKENS
JSON_VERSION = 1

JSON_DESCRIPTION = (
    "elmo-explorer layers: per-layer analyses of one biLM on one corpus. 'corpus': the file, its "
    "sentences and tokens after tokenization; 'model' (and 'compare.model'): checkpoint, name, "
    "SHA-256, output layers (0 = the context-free token layer) and vector width; "
    "'contextuality', 'cka', 'compare.cka' (rows: model A's layers, columns: model B's, on the "
    "same tokens), 'compare.cka_self' (model B's own layer matrix), 'hubness' and 'mdl' each "
    "carry their own 'description'; 'timings' are wall-clock seconds ('embedding_s' includes only the model's "
    "forward passes of the main corpus).")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``layers`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "layers", help="contextuality, CKA, hubness and MDL probes per layer over a corpus",
        description="Per layer and direction: self-similarity, intra-sentence similarity and "
                    "maximum explainable variance with their anisotropy baselines (Ethayarajh "
                    "2019); linear CKA between layers and, with --compare, between two models "
                    "(Kornblith et al. 2019); hubness, the skew of the k-occurrence (Radovanovic "
                    "et al. 2010); optionally online-code MDL probes (Voita & Titov "
                    "2020).")
    p.add_argument("corpus", type=Path, nargs="?", default=None,
                   help="UTF-8 text (plain or gzip), one sentence per line; blank lines are "
                        "skipped (default: the shipped reference corpus)")
    common.add_checkpoint(p, "model A: checkpoint folder or file (default: the bundled demo model)")
    p.add_argument("--compare", type=Path, default=None, metavar="B",
                   help="a second checkpoint: CKA between A's and B's layers on the same tokens")
    common.add_json(p)
    p.add_argument("--words-csv", type=Path, default=None, metavar="OUT",
                   help="write every counted word's self-similarity and MEV per layer as CSV")
    common.add_force(p)
    common.add_results_out(p)
    common.add_pretokenized(p)
    p.add_argument("--max-sentences", type=int, default=None, metavar="N",
                   help="use a seeded random subset of N sentences (kept in file order)")
    p.add_argument("--max-tokens", type=int, default=SAMPLE_TOKENS, metavar="N",
                   help="analyse whole sentences of a seeded sample up to N tokens (default and "
                        f"most {SAMPLE_TOKENS:,}; memory grows with it, not with CORPUS's "
                        "length)")
    p.add_argument("--min-count", type=int, default=5,
                   help="words with fewer occurrences are not averaged over (default 5)")
    p.add_argument("--lowercase", action="store_true", help="fold case when counting words")
    p.add_argument("--centre-mev", action="store_true",
                   help="centre each word's occurrence matrix before its first principal "
                        "component (PCA; the paper's definition does not centre)")
    p.add_argument("--baseline-samples", type=int, default=1000,
                   help="random occurrences for the MEV baseline (default 1000)")
    p.add_argument("--cka-tokens", type=int, default=50_000,
                   help="most tokens (whole sentences, seeded sample) compared by CKA "
                        "(default 50000)")
    p.add_argument("--hub-k", type=int, default=HUBNESS_K,
                   help=f"hubness: the neighbours counted per token (default {HUBNESS_K})")
    p.add_argument("--hub-tokens", type=int, default=HUBNESS_MAX_POINTS,
                   help="hubness: a seeded sample of at most N tokens of the CKA sample (default "
                        f"{HUBNESS_MAX_POINTS}; the exact kNN costs N² × width per layer)")
    p.add_argument("--hubs-tsv", type=Path, default=None, metavar="OUT",
                   help="write every layer's top hubs (token, N_k, context) as TSV")
    p.add_argument("--biased-cka", action="store_true",
                   help="the biased CKA estimator of Kornblith et al. instead of the unbiased one")
    p.add_argument("--mdl-task", choices=MDL_TASKS, default=None,
                   help="also run online-code MDL probes: pos (CoNLL-U), tsv (token<TAB>label), "
                        "or a built-in demo task")
    p.add_argument("--mdl-train", type=Path, default=None, metavar="FILE",
                   help="the labelled data the MDL probes transmit (pos, tsv)")
    p.add_argument("--mdl-label", choices=["upos", "xpos", "deprel"], default="upos",
                   help="CoNLL-U column for --mdl-task pos (default upos)")
    p.add_argument("--mdl-max-sentences", type=int, default=None, metavar="N",
                   help="use a seeded random subset of N labelled sentences")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds every sample and the MDL probes (default 0)")
    common.add_device(p)
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice)")
    p.set_defaults(func=run)
    return p


def _check_args(args) -> None:
    for name, low in (("max_sentences", 1), ("max_tokens", 1), ("min_count", 2), ("baseline_samples", 2),
                      ("cka_tokens", 4), ("mdl_max_sentences", 2), ("threads", 1)):
        v = getattr(args, name)
        if v is not None and v < low:
            raise InputError(f"--{name.replace('_', '-')} must be at least {low}, got {v}")
    if args.max_tokens > MAX_LAYERS_TOKENS:
        raise InputError(f"--max-tokens: layers analyses at most {MAX_LAYERS_TOKENS:,} tokens "
                         f"(its per-word activations are kept), got {args.max_tokens:,}")
    if args.mdl_task in ("pos", "tsv") and args.mdl_train is None:
        raise InputError(f"--mdl-task {args.mdl_task} needs --mdl-train FILE")
    if args.mdl_train is not None and args.mdl_task is None:
        raise InputError("--mdl-train needs --mdl-task")
    common.refuse_existing(args.force, args.words_csv, args.hubs_tsv)
    if args.out is not None and args.words_csv is not None and not common.is_stdout(args.out) \
            and args.out.resolve() == args.words_csv.resolve():
        raise InputError("--out and --words-csv name the same file")


def _mdl_data(args) -> Tuple[list, str]:
    """(labelled sentences, a description of where they came from)."""
    from elmo_engine.analysis.layers.run import demo_mdl_data
    from elmo_engine.io.datasets import tsv
    from elmo_engine.io.datasets.conllu import read_conllu

    if args.mdl_task == "pos":
        return list(read_conllu(args.mdl_train, label=args.mdl_label)), str(args.mdl_train)
    if args.mdl_task == "tsv":
        return list(tsv.read_tsv(args.mdl_train)), str(args.mdl_train)
    return demo_mdl_data(args.mdl_task)


# ---- progress ----------------------------------------------------------------------------------
_Progress = common.StderrProgress


# ---- run ---------------------------------------------------------------------------------------
def _load(path: Optional[Path], device):
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder

    from elmo_engine.cli.common import checkpoint_or_demo

    path = checkpoint_or_demo(path)           # a published model's name → its folder
    model = load_checkpoint(path, device=device)
    return Embedder(model, device=str(device), cache_size=256), path


def _model_info(emb, path) -> dict:
    info = getattr(emb.model, "info", None)
    return {"checkpoint": str(path), "name": getattr(info, "name", ""),
            "checksum": emb.checksum, "layers": int(emb.opts.n_output_layers),
            "dim": int(2 * emb.opts.output_dim)}


def run(args) -> int:
    """Run ``layers``; print the tables; write the requested files; return 0."""
    _check_args(args)                        # before torch is loaded: a bad option answers at once
    import torch

    limits = None
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        try:                                 # NumPy's BLAS too: idle extra threads only spin
            from threadpoolctl import threadpool_limits

            limits = threadpool_limits(args.threads)
        except ImportError:
            pass
    try:
        return _run(args)
    finally:
        if limits is not None:
            limits.restore_original_limits()


def _run(args) -> int:
    from elmo_engine.analysis.layers.run import (analyse_layers, compare_layers, mdl_probe,
                                                 reference_corpus_path)
    from elmo_engine.analysis.layers.sample import read_sample
    from elmo_engine.analysis.layers.tables import format_report, hubness_tsv, words_csv
    from elmo_engine.model.tokenize import Tokenization
    from elmo_engine.atomic import atomic_write_text
    from elmo_engine.embed.device import pick_device
    from elmo_engine.progress import TaskState

    t_start = time.perf_counter()
    corpus = args.corpus if args.corpus is not None else reference_corpus_path()
    sample = read_sample(corpus, args.pretokenized, args.max_sentences, args.max_tokens,
                         args.seed)
    if sample.blank_note:
        common.log(f"note: {sample.blank_note}")
    if sample.sampled:
        common.log(f"note: analysing {sample.sample_note()}; --max-tokens, --max-sentences and "
                   "--seed set it")
    tokens, n_file = sample.tokens, sample.sentences_in_file
    sample.check_enough(not args.biased_cka)             # CKA's least, said with the file
    mdl_data = _mdl_data(args) if args.mdl_task else None
    device = pick_device(args.device)
    emb, path_a = _load(args.checkpoint, device)
    # model B is loaded before the analysis of A, so that a bad --compare fails at once
    emb_b, path_b = _load(args.compare, device) if args.compare is not None else (None, None)
    state = TaskState(progress := _Progress())
    try:
        res = analyse_layers(emb, tokens, min_count=args.min_count,
                             baseline_samples=args.baseline_samples, seed=args.seed,
                             lowercase=args.lowercase, centre_mev=args.centre_mev,
                             cka_tokens=args.cka_tokens, unbiased=not args.biased_cka,
                             hub_k=args.hub_k, hub_points=args.hub_tokens, state=state)
        ctx, cka, timings = res.contextuality, res.cka, dict(res.timings)
        compare: Optional[Dict[str, Any]] = None
        if emb_b is not None:
            t0 = time.perf_counter()
            compare = {"model": _model_info(emb_b, path_b),
                       **compare_layers(emb_b, tokens, res, state)}
            timings["compare_s"] = time.perf_counter() - t0
        mdl = None
        if mdl_data is not None:
            t0 = time.perf_counter()
            mdl = mdl_probe(emb, mdl_data[0], args.mdl_task, mdl_data[1],
                            label=args.mdl_label if args.mdl_task == "pos" else "label",
                            max_sentences=args.mdl_max_sentences, seed=args.seed,
                            device=str(device), state=state)
            timings["mdl_s"] = time.perf_counter() - t0
    finally:
        progress.close()
    timings["total_s"] = time.perf_counter() - t_start
    doc = {"description": JSON_DESCRIPTION, "version": JSON_VERSION,
           "corpus": {"path": str(corpus), "sentences_in_file": n_file, "sentences": len(tokens),
                      "tokens": ctx.n_tokens, "max_sentences": args.max_sentences,
                      "max_tokens": args.max_tokens,
                      "tokenization": Tokenization.of(args.pretokenized).value},
           "model": _model_info(emb, path_a), "seed": args.seed, "device": str(device),
           "contextuality": ctx.to_dict(), "cka": cka.to_dict(),
           "hubness": None if res.hubness is None else res.hubness.to_dict(),
           "compare": None if compare is None else {
               "model": compare["model"], "cka": compare["cka"].to_dict(),
               "cka_self": compare["cka_self"].to_dict()},
           "mdl": None if mdl is None else mdl.to_dict(), "timings": timings}
    if args.json:
        common.print_json(doc)
    else:
        print(format_report(ctx, cka, compare, mdl, res.hubness))
    if args.words_csv is not None:
        atomic_write_text(args.words_csv, words_csv(ctx))
        print(f"wrote {args.words_csv}", file=sys.stderr)
    if args.hubs_tsv is not None and res.hubness is not None:
        atomic_write_text(args.hubs_tsv, hubness_tsv(res.hubness.to_dict()))
        print(f"wrote {args.hubs_tsv}", file=sys.stderr)
    return 0


__all__ = ["JSON_DESCRIPTION", "MDL_TASKS", "add_parser", "run"]
