"""``elmo-explorer eval-lm CHECKPOINT TEXT [--json]``: a trained biLM's perplexity on a text.

The text is read as ``train-lm`` reads a corpus (UTF-8, ``.gz`` allowed, ``= … =`` header lines
skipped, paragraphs split into sentences, the same tokenizer) and scored with the full softmax,
the state carried from sentence to sentence in file order, as ``train-lm`` scores its dev files.
Words outside the model's vocabulary count as ``<UNK>`` (the share is reported).

Published ELMo files (``options.json`` + weights) carry no softmax, so their perplexity cannot be
computed: the command says so and exits with status 1. Models written by ``train-lm`` carry it in
``softmax.safetensors`` beside ``vocab.txt``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from elmo_engine.errors import CheckpointError, InputError


def add_parser(subparsers):
    p = subparsers.add_parser(
        "eval-lm", help="forward, backward and mean perplexity of a trained biLM on a text",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("checkpoint", type=Path, nargs="?", default=None,
                   help="model folder written by train-lm (default: the bundled demo model)")
    p.add_argument("text", type=Path, help="text file (UTF-8, optionally .gz)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument("--batch-size", type=int, default=32, help="parallel streams (default 32)")
    p.add_argument("--unroll", type=int, default=20, help="tokens per window (default 20)")
    p.add_argument("--tokenize", default="regex", choices=["regex", "whitespace"],
                   help="regex: split typed text (default); whitespace: pre-tokenized text")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def model_folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def evaluate_text(checkpoint, text, device: str = "cpu", batch_size: int = 32,
                  unroll: int = 20, tokenizer: str = "regex", progress=None) -> dict:
    """Perplexity of ``text`` under the biLM in ``checkpoint``: ``fwd``, ``bwd``, ``mean``,
    ``tokens`` (positions scored per direction), ``oov_rate`` and ``vocab_size``.

    Raises :class:`CheckpointError` (no softmax, mismatched files) or :class:`InputError`."""
    import numpy as np
    import torch

    from elmo_engine.checkpoint import load_checkpoint
    from elmo_engine.lm_train import state_io
    from elmo_engine.lm_train.data import TypeTable, frame, read_sentences
    from elmo_engine.lm_train.model import BiLanguageModel
    from elmo_engine.lm_train.trainer import perplexity
    from elmo_engine.lm_train.vocab import Vocabulary

    if batch_size < 1 or unroll < 1:
        raise InputError("--batch-size and --unroll must be at least 1")
    folder = model_folder(Path(checkpoint))
    bilm = load_checkpoint(checkpoint)
    soft = folder / state_io.SOFTMAX_FILE
    vocab_path = folder / "vocab.txt"
    if not soft.is_file():
        raise CheckpointError(folder, "no softmax: published ELMo files carry none, so a "
                              "perplexity cannot be computed (eval-lm needs a model written by "
                              f"train-lm, with {state_io.SOFTMAX_FILE} and vocab.txt)")
    if not vocab_path.is_file():
        raise CheckpointError(folder, "vocab.txt is missing beside the softmax")
    vocab = Vocabulary.load(vocab_path)
    w, b = state_io.load_softmax(soft, len(vocab), bilm.opts.output_dim)
    model = BiLanguageModel(bilm.opts, len(vocab), fused=False)
    model.bilm = bilm
    with torch.no_grad():
        model.softmax_w = torch.nn.Parameter(w, requires_grad=False)
        model.softmax_b = torch.nn.Parameter(b, requires_grad=False)
    dev = torch.device(device)
    model.to(dev)
    sents = read_sentences(text, tokenizer, True, True, "text")
    table = TypeTable(bilm.opts.max_characters_per_token)
    table.ids(vocab.tokens)
    framed = frame(table, sents)
    type_chars = torch.from_numpy(table.char_ids()).to(dev)
    type2vocab = torch.from_numpy(table.vocab_ids(vocab)).to(dev)
    words = np.concatenate([f[1:-1] for f in framed])
    oov = float((table.vocab_ids(vocab)[words] == vocab.unk).mean()) if len(words) else 0.0
    res = perplexity(model, framed, type_chars, type2vocab, batch_size, unroll, dev, text,
                     progress)
    res.update(oov_rate=oov, vocab_size=len(vocab), sentences=len(framed))
    return res


def run(args) -> int:
    from tqdm import tqdm

    from elmo_engine.cli import default_checkpoint
    from elmo_engine.embedder import pick_device

    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="window", desc="eval-lm", file=sys.stderr,
                       disable=args.no_progress, mininterval=0.5)
        bar.update(done - bar.n)

    checkpoint = args.checkpoint or default_checkpoint()
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
