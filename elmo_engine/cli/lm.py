"""``elmo-explorer lm INPUT [--checkpoint C] [--top-k K] [--reach] [--pairs FILE] [--json]
[-o FILE]``: what ELMo's two language models predict at every token
(:mod:`elmo_engine.analysis.language_model`).

INPUT is a sentence file (one sentence per line, tokenized as typed text unless
``--pretokenized``). Per sentence: the tokens, the forward and backward LM's record per token
(``word``, ``prob``, ``rank``, ``surprisal``, ``entropy``, ``top``), the substitutes both
directions agree on and the perplexity per direction; with ``--reach`` the reach matrix
``reach[layer][direction][i][j]``; ``--reach-curve K`` its mean over all the sentences by word
offset. ``--pairs FILE`` (or ``--pairs bundled``) scores minimal pairs
instead and prints the accuracy per set and direction. Without a softmax, predictions and pairs
stop with one line naming the missing file; ``--reach`` alone works on every checkpoint.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.cli.eval_lm import add_softmax_options
from elmo_engine.errors import InputError

MAX_TOKENS = 200_000            # the sentences of one run (a view's worth, not a corpus)


def add_parser(subparsers):
    p = subparsers.add_parser(
        "lm", help="the forward and backward LMs' predictions, reach and minimal pairs",
        description="Per token and direction: probability and rank of the actual word, "
                    "surprisal, entropy, top-k; substitutes; perplexity; optionally the reach "
                    "matrix (--reach) or minimal-pair accuracies (--pairs).")
    p.add_argument("input", type=Path, nargs="?", default=None,
                   help="sentence file (one sentence per line); not needed with --pairs")
    common.add_checkpoint(p)
    add_softmax_options(p)
    p.add_argument("--top-k", type=int, default=10, metavar="K",
                   help="predictions listed per token and direction (default 10)")
    p.add_argument("--all-substitutes", action="store_true",
                   help="keep <UNK>, the sentence markers and punctuation among the substitutes "
                        "(left out by default)")
    p.add_argument("--reach", action="store_true",
                   help="add the reach matrix: cosine distance of token i per layer and "
                        "direction when token j is replaced by <UNK>")
    p.add_argument("--reach-curve", type=int, default=None, metavar="K",
                   help="instead of per-sentence results: the mean reach over all sentences of "
                        "INPUT by word offset -K..K, per layer and direction")
    p.add_argument("--no-predictions", action="store_true",
                   help="skip the predictions (with --reach: works without a softmax)")
    p.add_argument("--pairs", type=Path, default=None, metavar="FILE",
                   help="score minimal pairs (TSV set<TAB>good<TAB>bad; 'bundled': the sets "
                        "shipped with the app) and print the accuracy per set and direction")
    common.add_json(p)
    common.add_results_out(p)
    common.add_pretokenized(p)
    common.add_device(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    if args.top_k < 1:
        raise InputError("--top-k must be at least 1")
    if args.input is None and args.pairs is None:
        raise InputError("give a sentence file, or --pairs FILE")
    if args.reach_curve is not None and args.input is None:
        raise InputError("--reach-curve needs a sentence file")
    inputs = _read_inputs(args)                 # checked whole before the model is loaded
    checkpoint = common.checkpoint_or_demo(args.checkpoint)
    model = load_checkpoint(checkpoint)
    embedder = Embedder(model, device=str(common.resolve_device(args.device)))
    if args.reach_curve is not None:
        return _curve(args, embedder, inputs)
    need_softmax = args.pairs is not None or not args.no_predictions
    softmax = None
    if need_softmax:
        from elmo_engine.model.softmax import NoSoftmaxError, load_softmax
        from elmo_engine.train.evaluate import model_folder

        folder = model_folder(Path(checkpoint))
        try:
            softmax = load_softmax(folder, args.softmax, args.vocab,
                                   output_dim=model.opts.output_dim)
        except NoSoftmaxError as e:
            if args.pairs is not None:
                raise
            raise NoSoftmaxError(folder, f"{e.reason}; without one, --reach --no-predictions "
                                 "gives the reach matrix") from None
    if args.pairs is not None:
        return _pairs(args, embedder, softmax, inputs)
    return _sentences(args, embedder, softmax, inputs)


def _read_inputs(args):
    """The minimal pairs (``--pairs``) or the sentences, read and checked against the limits
    before anything is allocated for them (issue 38): a pairs file is a regular file of at most
    ``MAX_PAIRS_BYTES`` with at most ``MAX_PAIRS`` pairs; a sentence predicted has at most
    ``MAX_SENTENCE_TOKENS`` tokens, one given a reach matrix at most ``MAX_REACH_TOKENS``
    (``--reach-curve`` skips longer ones, as it always did)."""
    from elmo_engine.analysis.language_model.pairs import bundled_pairs, read_pairs
    from elmo_engine.analysis.language_model.predictions import check_sentence_length
    from elmo_engine.analysis.language_model.reach import MAX_REACH_TOKENS

    if args.pairs is not None and args.reach_curve is None:
        files = bundled_pairs() if str(args.pairs) == "bundled" else [args.pairs]
        return [p for f in files for p in read_pairs(f)]
    text = common.read_text(args.input, args.pretokenized, max_tokens=MAX_TOKENS)
    if args.reach_curve is not None:
        return text
    for toks, line in zip(text.tokens, text.lines):
        if not args.no_predictions:
            check_sentence_length(len(toks), path=text.path, line=line)
        if args.reach and len(toks) > MAX_REACH_TOKENS:
            raise InputError(f"a sentence of {len(toks):,} tokens is too long for --reach (at "
                             f"most {MAX_REACH_TOKENS}); split it", path=text.path, line=line)
    return text


def _sentences(args, embedder, softmax, text) -> int:
    from elmo_engine.analysis.language_model import predict, reach
    from elmo_engine.analysis.language_model.report import sentence_document

    docs = []
    for k, toks in enumerate(text.tokens):
        preds = (predict(embedder, softmax, [toks], top_k=args.top_k,
                         all_substitutes=args.all_substitutes)[0]
                 if softmax is not None else None)
        doc = sentence_document(toks, preds, reach(embedder, toks) if args.reach else None)
        docs.append(doc)
        if not args.json:
            _print_sentence(doc)
        common.log(f"lm: sentence {k + 1}/{len(text.tokens)}")
    if args.json:
        json.dump({"sentences": docs}, sys.stdout, indent=1)
        print()
    return 0


def _print_sentence(doc: dict) -> None:
    print(" ".join(doc["tokens"]))
    if "forward" in doc:
        ppl = doc["perplexity"]
        print(f"  perplexity: forward {ppl['forward']:.2f}, backward {ppl['backward']:.2f}")
        print(f"  {'word':<16}{'fwd rank':>9}{'fwd bits':>9}{'bwd rank':>9}{'bwd bits':>9}  "
              "substitutes")
        for f, b, s in zip(doc["forward"], doc["backward"], doc["substitutes"]):
            subs = ", ".join(w for w, _ in s[:5])
            print(f"  {f['word'][:15]:<16}{f['rank']:>9}{f['surprisal']:>9.2f}"
                  f"{b['rank']:>9}{b['surprisal']:>9.2f}  {subs}")
    if "reach" in doc:
        for line in reach_text(doc["tokens"], doc["reach"]):
            print(line)


#: a column of the printed reach matrix (a token label is cut to this many characters)
REACH_COLUMN = 7


def reach_text(tokens, reach) -> list:
    """The reach matrices as text lines: one per layer and direction, layer 0 once (it is
    context-free: both directions are the same), each row and column labelled with its token
    (cut to :data:`REACH_COLUMN` − 1 characters)."""
    w = REACH_COLUMN
    labels = [t if len(t) < w else t[:w - 2] + "…" for t in tokens]
    head = " " * (w + 4) + "".join(f"{lab:>{w}}" for lab in labels)
    out = []
    for layer, per_dir in enumerate(reach):
        dirs = [("both directions (context-free)", per_dir[0])] if layer == 0 \
            else [("forward", per_dir[0]), ("backward", per_dir[1])]
        for name, rows in dirs:
            out.append(f"  reach, layer {layer} {name}: row i is token i's distance when token "
                       "j is replaced by <UNK>")
            out.append(head)
            out += [f"    {lab:<{w}}" + "".join(f"{v:>{w}.3f}" for v in row)
                    for lab, row in zip(labels, rows)]
    return out


def _curve(args, embedder, text) -> int:
    from elmo_engine.analysis.language_model import reach_curve

    curve = reach_curve(embedder, text.tokens, max_offset=args.reach_curve)
    if args.json:
        json.dump({"offsets": list(curve.offsets), "mean": curve.mean.tolist(),
                   "pairs": curve.pairs.tolist(), "sentences": curve.sentences,
                   "replacement": "<UNK>"}, sys.stdout, indent=1)
        print()
        return 0
    print(f"mean cosine distance of token i when token j = i + offset is replaced by <UNK> "
          f"({curve.sentences} sentences)")
    print(f"{'layer/direction':<18}" + "".join(f"{o:>7}" for o in curve.offsets))
    for layer in range(curve.mean.shape[0]):
        for d, name in enumerate(("forward", "backward")):
            print(f"{f'{layer} {name}':<18}" + "".join(f"{v:7.3f}" for v in curve.mean[layer, d]))
    return 0


def _pairs(args, embedder, softmax, pairs) -> int:
    from elmo_engine.analysis.language_model.pairs import (DIRECTIONS, accuracy_by_set,
                                                           score_pairs)

    scores = score_pairs(embedder, softmax, pairs)
    table = accuracy_by_set(scores)
    if args.json:
        doc = {"sets": [{"set": a.set, "pairs": a.pairs,
                         **{d: acc for d, acc in zip(DIRECTIONS, a.accuracy)}} for a in table],
               "pairs": [{"set": s.pair.set, "good": " ".join(s.pair.good),
                          "bad": " ".join(s.pair.bad),
                          "log_prob": {d: list(lp) for d, lp in zip(DIRECTIONS, s.log_prob)},
                          "forward_diff": list(s.forward_diff),
                          "backward_diff": list(s.backward_diff)} for s in scores]}
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    print(f"{'set':<32}{'pairs':>6}{'forward':>9}{'backward':>9}{'combined':>9}")
    for a in table:
        f, b, c = a.accuracy
        print(f"{a.set:<32}{a.pairs:>6}{f:>9.3f}{b:>9.3f}{c:>9.3f}")
    return 0
