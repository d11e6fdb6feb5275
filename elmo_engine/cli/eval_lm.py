"""``elmo-explorer eval-lm [CHECKPOINT] TEXT [--json]``: a trained biLM's perplexity on a text
(:func:`elmo_engine.train.evaluate.evaluate_text`). Published ELMo files carry no softmax: the
command says so in one line and exits with status 1."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from elmo_engine.cli import common


def add_parser(subparsers):
    p = subparsers.add_parser(
        "eval-lm", help="forward, backward and mean perplexity of a trained biLM on a text",
        description="Forward, backward and mean perplexity (full softmax) of a biLM written by "
                    "train-lm on a text file, read as train-lm reads a corpus.")
    p.add_argument("checkpoint", type=Path, nargs="?", default=None,
                   help="model folder written by train-lm (default: the bundled demo model)")
    p.add_argument("text", type=Path, help="text file (UTF-8, optionally .gz)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    common.add_device(p)
    p.add_argument("--batch-size", type=int, default=32, help="parallel streams (default 32)")
    p.add_argument("--unroll", type=int, default=20, help="tokens per window (default 20)")
    p.add_argument("--tokenize", default="regex", choices=["regex", "whitespace"],
                   help="regex: split typed text (default); whitespace: pre-tokenized text")
    p.add_argument("--pretokenized", action="store_const", dest="tokenize", const="whitespace",
                   help="the text is already tokenized (the same as --tokenize whitespace)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from tqdm import tqdm

    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.embed.embedder import pick_device
    from elmo_engine.train.evaluate import evaluate_text

    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="window", desc="eval-lm", file=sys.stderr,
                       disable=args.no_progress, mininterval=0.5)
        bar.update(done - bar.n)

    checkpoint = checkpoint_or_demo(args.checkpoint)
    device = pick_device(args.device)
    try:
        res = evaluate_text(checkpoint, args.text, device=str(device), batch_size=args.batch_size,
                            unroll=args.unroll, tokenizer=args.tokenize, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps({"checkpoint": str(checkpoint), "text": str(args.text), **res},
                         indent=2))
    else:
        print(f"{args.text}: perplexity forward {res['fwd']:.2f}, backward {res['bwd']:.2f}, "
              f"mean {res['mean']:.2f} ({res['tokens']:,} positions per direction, "
              f"{res['oov_rate']:.1%} of words outside the {res['vocab_size']:,}-word vocabulary)")
    return 0
