"""``elmo-explorer train-lm CORPUS --dev DEV -o DIR [--preset …] [--epochs N] [--resume] …``.

The step log, progress and the closing summary go to stderr (the result is the model folder);
errors are one line ``elmo-explorer: error: …`` with exit status 1.

:mod:`elmo_engine.cli.main` calls :func:`add_parser` and :func:`run`; ``python -m
elmo_engine.train`` (and ``torchrun … -m elmo_engine.train``) uses :func:`main`.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from typing import List, Optional

from elmo_engine.cli.parsing import error_line
from elmo_engine.errors import ElmoError

DESCRIPTION = """Train an ELMo biLM (character input, forward + backward LSTM LM sharing the token
layer and the softmax) on a plain-text corpus, one sentence or paragraph per line (UTF-8, .gz
allowed; '= … =' header lines skipped). Writes OUT/options.json + OUT/lm_weights.hdf5 (the
published layout, loadable by the app and by other ELMo tools), OUT/vocab.txt, OUT/training.json
and the resumable state OUT/checkpoint/. Data-parallel: torchrun --nproc-per-node N -m
elmo_engine.train … (gloo on CPU, NCCL on GPU)."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``train-lm`` on an argparse ``subparsers`` object."""
    p = subparsers.add_parser("train-lm", help="train a biLM on your own corpus",
                              description=DESCRIPTION)
    configure(p)
    return p


def configure(p: argparse.ArgumentParser) -> None:
    from elmo_engine.cli import common
    from elmo_engine.cli.parsing import path_text
    from elmo_engine.train.presets import PRESETS

    p.add_argument("corpus", nargs="+", type=path_text,
                   help="training text file(s) (UTF-8, optionally .gz); several are mixed by "
                        "document")
    p.add_argument("--dev", required=True, nargs="+", type=path_text,
                   help="held-out text file(s) for perplexity, each evaluated on its own")
    p.add_argument("-o", "--out", required=True, metavar="DIR", type=path_text,
                   help="output folder")
    p.add_argument("--preset", default="demo", choices=sorted(PRESETS),
                   help="architecture + hyperparameters (default: demo)")
    p.add_argument("--epochs", type=int, help="passes over the corpus")
    p.add_argument("--max-steps", type=int, help="stop after this many steps (then evaluate and export)")
    p.add_argument("--max-minutes", type=float, help="stop training after this much time")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint")
    p.add_argument("--device", default="auto",
                   help="auto (CUDA when available, else the CPU; the default), cpu, cuda or "
                        "cuda:N")
    p.add_argument("--force", action="store_true",
                   help="start afresh even though OUT already holds a model or a training "
                        "state that train-lm wrote (its training.json or checkpoint/); a "
                        "folder of other files of those names is never replaced")
    p.add_argument("--threads", type=int, help="CPU threads for torch")
    common.add_tokenization(p)
    p.add_argument("--keep-headers", action="store_true", help="do not skip '= … =' lines")
    p.add_argument("--no-sentence-split", action="store_true",
                   help="treat each line as one sentence")
    for name, typ, what in (("vocab-size", int, "softmax vocabulary size"),
                            ("min-count", int, "minimum count of a vocabulary word"),
                            ("batch-size", int, "global batch (rows)"),
                            ("unroll", int, "tokens per BPTT window"),
                            ("negatives", int, "sampled-softmax negatives per batch"),
                            ("lr", float, "learning rate"), ("clip-norm", float, "gradient-norm clip"),
                            ("dropout", float, "dropout"), ("seed", int, "random seed"),
                            ("checkpoint-every", int, "checkpoint every N steps"),
                            ("checkpoint-minutes", float, "checkpoint at least this often"),
                            ("log-every", int, "log a line every N steps"),
                            ("eval-minutes", float, "dev perplexity and a model snapshot "
                                                    "(OUT/snapshots/) every M minutes of training; "
                                                    "the best snapshot is exported"),
                            ("patience", int, "stop after N evaluations without a better dev "
                                              "perplexity"),
                            ("eval-tokens", int, "the periodic evaluations read the first N "
                                                 "tokens of each dev file"),
                            ("cooldown-minutes", float, "over the last M minutes of --max-minutes "
                                                        "the learning rate falls linearly to 5 %% "
                                                        "of --lr; may change on --resume")):
        p.add_argument(f"--{name}", type=typ, help=f"{what} (default: from the preset)")
    p.add_argument("--optimizer", choices=["adam", "adagrad"], help="default: from the preset")
    p.add_argument("--shuffle", choices=["documents", "sentences"],
                   help="epoch order: documents shuffled, each kept in order (default), or "
                        "sentences shuffled")
    p.add_argument("--autograd-lstm", action="store_true",
                   help="run the LSTM through the biLM's autograd path instead of the fused "
                        "training layer (slower; the same result up to rounding)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                   help="fp32 (the default), or bf16 mixed precision (bf16 GEMMs, float32 master "
                        "weights and loss) on a GPU or on a CPU with bf16 units (AMX or "
                        "AVX512_BF16; see `elmo-explorer info`)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_config(args):
    from elmo_engine.model.tokenize import Tokenization
    from elmo_engine.train.presets import preset
    from elmo_engine.train.trainer import TrainConfig

    d = preset(args.preset)
    cfg = TrainConfig.from_dict(d)
    cfg.tokenizer = Tokenization.parse(args.tokenize).value
    cfg.skip_headers = not args.keep_headers
    cfg.split_sentences = not args.no_sentence_split
    mapping = {"epochs": "epochs", "max_steps": "max_steps", "max_minutes": "max_minutes",
               "vocab_size": "vocab_size", "min_count": "min_count", "batch_size": "batch_size",
               "unroll": "unroll", "negatives": "n_negative", "lr": "lr", "clip_norm": "clip_norm",
               "dropout": "dropout", "seed": "seed", "checkpoint_every": "checkpoint_every",
               "checkpoint_minutes": "checkpoint_minutes", "log_every": "log_every",
               "optimizer": "optimizer", "eval_minutes": "eval_minutes", "patience": "patience",
               "eval_tokens": "eval_tokens",
               "shuffle": "shuffle", "cooldown_minutes": "cooldown_minutes",
               "precision": "precision"}
    for arg, attr in mapping.items():
        val = getattr(args, arg, None)
        if val is not None:
            setattr(cfg, attr, val)
    if getattr(args, "autograd_lstm", False):
        cfg.fused = False
    return cfg


def refuse_existing_model(args) -> None:
    """A fresh run into a folder that holds a model or a training state is refused unless
    ``--resume`` or ``--force``, naming the file; ``--force`` is refused too when the folder's
    files were not written by train-lm (:func:`~elmo_engine.train.names.not_written_by_train_lm`:
    a published model or the user's own files of the same names)."""
    import os
    from pathlib import Path

    from elmo_engine.errors import InputError
    from elmo_engine.train.names import WRITTEN, not_written_by_train_lm

    out = Path(args.out)
    if os.path.lexists(out) and not out.is_dir():
        raise InputError("is not a folder; train-lm writes a model folder there", path=out)
    if args.resume:
        return
    if getattr(args, "force", False):
        problem = not_written_by_train_lm(out)
        if problem:
            raise InputError(problem)
        return
    # everything the run writes (the model as export_model writes it, the training state):
    # without --force none of it replaces a file that is there
    for name in WRITTEN:
        if os.path.lexists(out / name):
            raise InputError(f"{out / name} exists; pass --resume to continue that training or "
                             "--force to start afresh")


def run(args, argv: Optional[List[str]] = None) -> int:
    """Run ``train-lm``; return the exit status (0 done, 1 bad input, 130 interrupted)."""
    from elmo_engine import runtime
    from elmo_engine.cli.common import log
    from elmo_engine.train.trainer import train

    runtime.configure(threads=args.threads or None)
    runtime.reuse_freed_blocks()        # each step's buffers reused (docs/performance.md)
    command = "elmo-explorer train-lm " + " ".join(shlex.quote(a) for a in (
        argv if argv is not None else sys.argv[1:]) if a != "train-lm")
    try:
        if str(args.out) == "-":
            raise ElmoError("--out -: the model is a folder and cannot be written to stdout; "
                            "name a folder")
        refuse_existing_model(args)
        from pathlib import Path

        from elmo_engine.errors import InputError

        for path in [*args.corpus, *args.dev]:       # one line naming a missing file, first
            if not Path(path).exists():
                raise InputError("cannot read the corpus: cannot open: No such file or "
                                 "directory", path=path)
        cfg = build_config(args)
        res = train(args.corpus, args.dev, args.out, cfg, resume=args.resume, device=args.device,
                    show_progress=not args.no_progress, command=command)
    except ElmoError as e:
        print(error_line(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("elmo-explorer: interrupted", file=sys.stderr)
        return 130
    if res.stopped == "interrupted":
        return 130
    if res.dev is not None and "mean" in res.dev:
        log(f"done: {res.steps} steps, {res.tokens} tokens, {res.train_seconds / 60:.1f} min; "
              f"dev perplexity forward {res.dev['fwd']:.2f} backward {res.dev['bwd']:.2f} "
              f"mean {res.dev['mean']:.2f}; model in {res.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    from elmo_engine.cli.parsing import Parser, check_option_values

    p = Parser(prog="python -m elmo_engine.train", description=DESCRIPTION)
    configure(p)
    check_option_values(p)
    args = p.parse_args(argv)
    from elmo_engine.cli.outputs import guard_outputs

    try:
        guard_outputs(args)                      # an output never replaces an input
    except ElmoError as e:
        print(error_line(e), file=sys.stderr)
        return 1
    return run(args, argv)
