"""``elmo-explorer eval-lm TEXT [--checkpoint C] [--json] [-o FILE]``: a trained biLM's
perplexity on a text (:func:`elmo_engine.train.evaluate.evaluate_text`), on a model written by
train-lm or on published files with their ``*_softmax_weights.hdf5`` + vocabulary. Without a
softmax the command says in one line which file is missing and exits with status 1."""
from __future__ import annotations

import sys
from pathlib import Path

from elmo_engine.cli import common


def add_parser(subparsers):
    p = subparsers.add_parser(
        "eval-lm", help="forward, backward and mean perplexity of a trained biLM on a text",
        description="Forward, backward and mean perplexity (full softmax) of a biLM written by "
                    "train-lm on a text file, read as train-lm reads a corpus.")
    p.add_argument("text", type=Path, help="text file (UTF-8, optionally .gz)")
    common.add_checkpoint(p, "model folder written by train-lm, or published options + weights "
                             "with their *_softmax_weights.hdf5 and vocab*.txt, or a published "
                             "model's name (default: the bundled demo model)")
    common.add_json(p)
    common.add_results_out(p)
    add_softmax_options(p)
    common.add_device(p)
    p.add_argument("--batch-size", type=int, default=32, help="parallel streams (default 32)")
    p.add_argument("--unroll", type=int, default=20, help="tokens per window (default 20)")
    common.add_tokenization(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def add_softmax_options(p) -> None:
    """``--softmax FILE`` and ``--vocab FILE`` (shared with ``lm``)."""
    p.add_argument("--softmax", type=Path, default=None,
                   help="the softmax file (default: softmax.safetensors or *softmax_weights.hdf5 "
                        "beside the checkpoint)")
    p.add_argument("--vocab", type=Path, default=None,
                   help="the softmax's vocabulary (default: vocab.txt or vocab*.txt beside the "
                        "softmax)")


def run(args) -> int:
    from tqdm import tqdm

    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.embed.device import pick_device
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
                            unroll=args.unroll, tokenizer=args.tokenize, progress=progress,
                            softmax=args.softmax, vocab=args.vocab)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        common.print_json({"checkpoint": str(checkpoint), "text": str(args.text), **res})
    else:
        print(f"{args.text}: perplexity forward {res['fwd']:.2f}, backward {res['bwd']:.2f}, "
              f"mean {res['mean']:.2f} ({res['tokens']:,} positions per direction, "
              f"{res['oov_rate']:.1%} of words outside the {res['vocab_size']:,}-word vocabulary)")
    return 0
