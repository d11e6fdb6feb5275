"""``elmo-explorer layers``: how contextual each layer is, how alike layers and models are, and
how many bits a probe's labels cost given each layer.

Examples::

    elmo-explorer layers                                   # the shipped reference corpus
    elmo-explorer layers corpus.txt --json layers.json
    elmo-explorer layers corpus.txt --checkpoint A/ --compare B/ --json layers.json --force
    elmo-explorer layers --mdl-task pos --mdl-train en_ewt-ud-train.conllu.gz --json layers.json

The results go to stdout as tables, progress to stderr; ``--json`` writes the documented JSON
(:data:`JSON_DESCRIPTION`). The engine work is in :mod:`elmo_engine.analysis`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from elmo_engine.cli import common
from elmo_engine.errors import InputError

MDL_TASKS = ("pos", "tsv", "demo-pos", "demo-supersense", "demo-wsd")
REFERENCE_CORPUS = ("reference_corpus", "sentences.txt")
JSON_VERSION = 1

JSON_DESCRIPTION = (
    "elmo-explorer layers: per-layer analyses of one biLM on one corpus. 'corpus': the file, its "
    "sentences and tokens after tokenization; 'model' (and 'compare.model'): checkpoint, name, "
    "SHA-256, output layers (0 = the context-free token layer) and vector width; "
    "'contextuality', 'cka', 'compare.cka' (rows: model A's layers, columns: model B's, on the "
    "same tokens), 'compare.cka_self' (model B's own layer matrix) and 'mdl' each carry their "
    "own 'description'; 'timings' are wall-clock seconds ('embedding_s' includes only the model's "
    "forward passes of the main corpus).")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``layers`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "layers", help="contextuality, CKA and MDL probes per layer over a corpus",
        description="Per layer and direction: self-similarity, intra-sentence similarity and "
                    "maximum explainable variance with their anisotropy baselines (Ethayarajh "
                    "2019); linear CKA between layers and, with --compare, between two models "
                    "(Kornblith et al. 2019); optionally online-code MDL probes (Voita & Titov "
                    "2020).")
    p.add_argument("corpus", type=Path, nargs="?", default=None,
                   help="UTF-8 text (plain or gzip), one sentence per line; blank lines are "
                        "skipped (default: the shipped reference corpus)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="model A: checkpoint folder or file (default: the bundled demo model)")
    p.add_argument("--compare", type=Path, default=None, metavar="B",
                   help="a second checkpoint: CKA between A's and B's layers on the same tokens")
    p.add_argument("--json", type=Path, default=None, metavar="OUT",
                   help="write the results as JSON")
    p.add_argument("--words-csv", type=Path, default=None, metavar="OUT",
                   help="write every counted word's self-similarity and MEV per layer as CSV")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    common.add_pretokenized(p)
    p.add_argument("--max-sentences", type=int, default=None, metavar="N",
                   help="use a seeded random subset of N sentences (kept in file order)")
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


# ---- inputs ------------------------------------------------------------------------------------
def reference_corpus_path() -> Path:
    """The shipped reference corpus (``resources/reference_corpus/sentences.txt``)."""
    cands = []
    try:
        from importlib.resources import files

        cands.append(Path(str(files("resources"))).joinpath(*REFERENCE_CORPUS))
    except Exception:  # no installed resources package
        pass
    cands.append(Path(__file__).resolve().parents[1].joinpath("resources", *REFERENCE_CORPUS))
    for c in cands:
        if c.is_file():
            return c
    return cands[-1]


def read_corpus(path: Path, pretokenized: bool) -> Tuple[List[List[str]], List[int]]:
    """Sentences of a corpus file and their line numbers (the CLI's one reader: blank lines
    skipped and counted on stderr); errors name the file and line."""
    text = common.read_text(path, pretokenized)
    return text.tokens, text.lines


def _subset(n: int, keep: Optional[int], seed: int) -> np.ndarray:
    if keep is None or keep >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=keep, replace=False))


def _check_args(args) -> None:
    for name, low in (("max_sentences", 1), ("min_count", 2), ("baseline_samples", 2),
                      ("cka_tokens", 4), ("mdl_max_sentences", 2), ("threads", 1)):
        v = getattr(args, name)
        if v is not None and v < low:
            raise InputError(f"--{name.replace('_', '-')} must be at least {low}, got {v}")
    if args.mdl_task in ("pos", "tsv") and args.mdl_train is None:
        raise InputError(f"--mdl-task {args.mdl_task} needs --mdl-train FILE")
    if args.mdl_train is not None and args.mdl_task is None:
        raise InputError("--mdl-train needs --mdl-task")
    common.refuse_existing(args.force, args.json, args.words_csv)
    if args.json is not None and args.words_csv is not None \
            and args.json.resolve() == args.words_csv.resolve():
        raise InputError("--json and --words-csv name the same file")


def _mdl_data(args) -> Tuple[list, str]:
    """(labelled sentences, a description of where they came from)."""
    from elmo_engine.io.datasets import demo, tsv
    from elmo_engine.io.datasets.conllu import read_conllu

    if args.mdl_task == "pos":
        return list(read_conllu(args.mdl_train, label=args.mdl_label)), str(args.mdl_train)
    if args.mdl_task == "tsv":
        return list(tsv.read_tsv(args.mdl_train)), str(args.mdl_train)
    name = args.mdl_task[len("demo-"):]
    sents = [s for split in demo.SPLITS for s in demo.load_demo_task(name, split)]
    return sents, f"built-in demo task '{name}' (train + dev + test)"


# ---- progress ----------------------------------------------------------------------------------
class _Progress:
    """Progress on stderr, driven by TaskState reports: a tqdm bar per phase on a terminal, a
    line per phase (and at its end) otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.bar, self.phase = None, None

    def __call__(self, done: int, total: int, message: str) -> None:
        phase = message.split("(")[0].strip() or "working"
        if phase != self.phase:
            self.close()
            self.phase = phase
            if self.tty:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=phase, file=self.stream, leave=False,
                                dynamic_ncols=True)
            else:
                print(f"{phase} …", file=self.stream, flush=True)
        if self.bar is not None:
            self.bar.total = total
            self.bar.n = done
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# ---- run ---------------------------------------------------------------------------------------
def _load(path: Optional[Path], device):
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder

    if path is None:
        from elmo_engine.resources import demo_checkpoint_path

        path = demo_checkpoint_path()
    model = load_checkpoint(path, device=device)
    return Embedder(model, device=str(device), cache_size=256), path


def _model_info(emb, path) -> dict:
    info = getattr(emb.model, "info", None)
    return {"checkpoint": str(path), "name": getattr(info, "name", ""),
            "checksum": emb.checksum, "layers": int(emb.opts.n_output_layers),
            "dim": int(2 * emb.opts.output_dim)}


def _cka_sentences(tokens: List[List[str]], budget: int, seed: int) -> np.ndarray:
    """Whole sentences in a seeded random order until ``budget`` tokens (all if they fit)."""
    lengths = np.array([len(s) for s in tokens])
    if lengths.sum() <= budget:
        return np.arange(len(tokens))
    order = np.random.default_rng(seed + 1).permutation(len(tokens))
    fits = np.cumsum(lengths[order]) <= budget
    chosen = order[fits] if fits.any() else order[:1]
    return np.sort(chosen)


def _gather_rows(emb, tokens, chosen: np.ndarray, state, what: str) -> np.ndarray:
    """The activations of the chosen sentences' tokens, ``(K, Σn, D)`` float32."""
    from elmo_engine.analysis.activations import iter_embedded

    sents = [tokens[i] for i in chosen]
    out = np.empty((emb.opts.n_output_layers, sum(len(s) for s in sents),
                    2 * emb.opts.output_dim), np.float32)
    col = 0
    for _, arrays in iter_embedded(emb, sents, state, what):
        for arr in arrays:
            out[:, col:col + arr.shape[1]] = arr
            col += arr.shape[1]
    return out


def run(args) -> int:
    """Run ``layers``; print the tables; write the requested files; return 0."""
    import torch

    _check_args(args)
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
    from elmo_engine.analysis.activations import iter_embedded
    from elmo_engine.analysis.cka import CKAResult, cka_matrix, cross_cka
    from elmo_engine.analysis.contextuality import ContextualityAccumulator
    from elmo_engine.analysis.tables import format_report, words_csv
    from elmo_engine.atomic import atomic_write_text
    from elmo_engine.embed.embedder import pick_device
    from elmo_engine.progress import TaskState

    t_start = time.perf_counter()
    corpus = args.corpus if args.corpus is not None else reference_corpus_path()
    tokens, _ = read_corpus(corpus, args.pretokenized)
    n_file = len(tokens)
    tokens = [tokens[i] for i in _subset(len(tokens), args.max_sentences, args.seed)]
    mdl_data = _mdl_data(args) if args.mdl_task else None
    device = pick_device(args.device)
    emb, path_a = _load(args.checkpoint, device)
    k, dim = emb.opts.n_output_layers, 2 * emb.opts.output_dim
    state = TaskState(progress := _Progress())
    timings: Dict[str, float] = {}
    try:
        acc = ContextualityAccumulator(tokens, k, dim, min_count=args.min_count,
                                       baseline_samples=args.baseline_samples, seed=args.seed,
                                       lowercase=args.lowercase, centre_mev=args.centre_mev)
        chosen = _cka_sentences(tokens, args.cka_tokens, args.seed)
        slot = np.full(len(tokens), -1)
        slot[chosen] = np.arange(len(chosen))
        offsets = np.concatenate([[0], np.cumsum([len(tokens[i]) for i in chosen])])
        rows_a = np.empty((k, int(offsets[-1]), dim), np.float32)
        t_embed = t_add = 0.0
        t0 = time.perf_counter()
        for start, arrays in iter_embedded(emb, tokens, state, "corpus"):
            t1 = time.perf_counter()
            t_embed += t1 - t0
            acc.add(arrays)
            for j, arr in enumerate(arrays):
                s = slot[start + j]
                if s >= 0:
                    rows_a[:, offsets[s]:offsets[s + 1]] = arr
            t0 = time.perf_counter()
            t_add += t0 - t1
        ctx = acc.result(state)
        timings["embedding_s"] = t_embed
        timings["contextuality_s"] = t_add + time.perf_counter() - t0
        t0 = time.perf_counter()
        unbiased = not args.biased_cka
        names = [f"layer {i}" for i in range(k)]
        cka = CKAResult(cka_matrix(rows_a, unbiased, state=state), names, names, unbiased,
                        rows_a.shape[1], len(chosen))
        timings["cka_s"] = time.perf_counter() - t0
        compare = None
        if args.compare is not None:
            t0 = time.perf_counter()
            emb_b, path_b = _load(args.compare, device)
            rows_b = _gather_rows(emb_b, tokens, chosen, state, "model B")
            names_b = [f"B layer {i}" for i in range(emb_b.opts.n_output_layers)]
            cross = CKAResult(cross_cka(rows_a, rows_b, unbiased, state=state),
                              [f"A {n}" for n in names], names_b, unbiased, rows_a.shape[1],
                              len(chosen))
            own = CKAResult(cka_matrix(rows_b, unbiased, state=state), names_b, names_b,
                            unbiased, rows_b.shape[1], len(chosen))
            compare = {"model": _model_info(emb_b, path_b), "cka": cross, "cka_self": own}
            timings["compare_s"] = time.perf_counter() - t0
        mdl = None
        if mdl_data is not None:
            t0 = time.perf_counter()
            mdl = _run_mdl(args, emb, mdl_data, device, state)
            timings["mdl_s"] = time.perf_counter() - t0
    finally:
        progress.close()
    timings["total_s"] = time.perf_counter() - t_start
    print(format_report(ctx, cka, compare, mdl))
    doc = {"description": JSON_DESCRIPTION, "version": JSON_VERSION,
           "corpus": {"path": str(corpus), "sentences_in_file": n_file, "sentences": len(tokens),
                      "tokens": ctx.n_tokens, "max_sentences": args.max_sentences,
                      "tokenization": "whitespace" if args.pretokenized else "tokenize"},
           "model": _model_info(emb, path_a), "seed": args.seed, "device": str(device),
           "contextuality": ctx.to_dict(), "cka": cka.to_dict(),
           "compare": None if compare is None else {
               "model": compare["model"], "cka": compare["cka"].to_dict(),
               "cka_self": compare["cka_self"].to_dict()},
           "mdl": None if mdl is None else mdl.to_dict(), "timings": timings}
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.words_csv is not None:
        atomic_write_text(args.words_csv, words_csv(ctx))
        print(f"wrote {args.words_csv}", file=sys.stderr)
    return 0


def _run_mdl(args, emb, data, device, state):
    from elmo_engine.analysis.mdl import MDLConfig, online_codelength

    sents, source = data
    sents = [s for s in sents if any(lab is not None for lab in s.labels)]
    sents = [sents[i] for i in _subset(len(sents), args.mdl_max_sentences, args.seed)]
    if not sents:
        raise InputError(f"{source}: no labelled tokens")
    tokens = [list(s.tokens) for s in sents]
    feats = _gather_rows(emb, tokens, np.arange(len(tokens)), state, "MDL data")
    starts = np.concatenate([[0], np.cumsum([len(t) for t in tokens])])
    cols, labels = [], []
    for s, a in zip(sents, starts):
        for i, lab in s.targets():
            cols.append(a + i)
            labels.append(lab)
    feats = feats[:, np.asarray(cols)]
    groups = None
    if args.mdl_task == "demo-wsd":                  # each sense among its lemma's senses
        from elmo_engine.io.datasets.wordnet import parse_sense_key

        groups = ["#".join(parse_sense_key(lab)[:2]) for lab in labels]
    cfg = MDLConfig(seed=args.seed, device=str(device))
    result = online_codelength(feats, labels, groups=groups, config=cfg, state=state)
    result.extra = {"task": args.mdl_task, "source": source,
                    "label": args.mdl_label if args.mdl_task == "pos" else "label",
                    "sentences": len(sents)}
    return result


__all__ = ["JSON_DESCRIPTION", "MDL_TASKS", "add_parser", "read_corpus", "reference_corpus_path",
           "run"]
