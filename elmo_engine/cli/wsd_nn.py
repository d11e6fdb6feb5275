"""``elmo-explorer wsd-nn``: Peters et al. 2018 §5.3 nearest-neighbour word sense
disambiguation per layer — sense representations from SemCor, the nearest one for each
SemEval-2007 instance, WordNet's first sense as back-off — as F1 per layer."""
from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.cli.senses import DATA, SEMCOR_KEYS, SEMCOR_XML
from elmo_engine.errors import InputError

TEST_XML = DATA / "wsd_eval_raganato2017" / "semeval2007" / "semeval2007.data.xml"
TEST_KEYS = DATA / "wsd_eval_raganato2017" / "semeval2007" / "semeval2007.gold.key.txt"


def add_parser(sub) -> None:
    p = sub.add_parser("wsd-nn", help="nearest-neighbour WSD per layer (Peters et al. 2018 "
                                      "§5.3): SemCor → SemEval-2007 F1",
                       description="Average each sense's SemCor occurrences per layer; give "
                                   "each test instance the nearest sense among its lemma's "
                                   "WordNet senses (first sense when none was seen); print "
                                   "precision, recall and F1 per layer and the first-sense "
                                   "baseline.")
    p.add_argument("--train", type=Path, default=SEMCOR_XML)
    p.add_argument("--train-keys", type=Path, default=SEMCOR_KEYS)
    p.add_argument("--test", type=Path, default=TEST_XML)
    p.add_argument("--test-keys", type=Path, default=TEST_KEYS)
    p.add_argument("--max-train-sentences", type=int, default=None,
                   help="use only the first N SemCor sentences (a stated subset)")
    p.add_argument("--wordnet", type=Path, default=None,
                   help="WordNet 3.0 (default: $ELMO_WORDNET or ../shared/data/wordnet30)")
    p.add_argument("--layer", default=None, metavar="L[,L…]",
                   help="the layer numbers, comma-separated (default: all)")
    common.add_checkpoint(p)
    common.add_device(p)
    common.add_json(p)
    common.add_results_out(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tqdm import tqdm

    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.sense_eval import wsd_nn
    from elmo_engine.io.datasets.wordnet import load_wordnet
    from elmo_engine.io.datasets.wsd import read_wsd
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState

    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint),
                            device=common.resolve_device(args.device))
    n = model.opts.n_output_layers
    try:
        layers = list(range(n)) if args.layer is None else [int(v) for v in args.layer.split(",")]
    except ValueError:
        raise InputError(f"--layer must be comma-separated numbers, got {args.layer!r}") from None
    if any(not 0 <= v < n for v in layers):
        raise InputError(f"--layer: this model has layers 0–{n - 1}")
    wn = load_wordnet(args.wordnet)
    train = list(read_wsd(args.train, args.train_keys, limit=args.max_train_sentences))
    test = list(read_wsd(args.test, args.test_keys, wordnet=wn))
    emb = Embedder(model, device=str(next(model.parameters()).device), cache_size=0)
    bar = tqdm(total=0, unit="sent", file=sys.stderr, disable=None)

    def on_progress(done, total, message):
        bar.total = total
        bar.set_description_str(message[:30], refresh=False)
        bar.update(done - bar.n if done >= bar.n else done)

    try:
        res = wsd_nn(train, test, emb, layers, TaskState(on_progress))
    finally:
        bar.close()
    if args.json:
        common.print_json(dict(asdict(res), train_sentences=len(train), test_sentences=len(test)))
        return 0
    print(f"trained on {len(train)} SemCor sentences ({res.n_train_instances} instances, "
          f"{res.n_senses} senses); tested on {res.first_sense.n} instances")
    print(f"{'layer':>11s} {'P':>6s} {'R':>6s} {'F1':>6s} {'back-off':>8s}")
    for s in res.layers + (res.first_sense,):
        name = "first sense" if s.layer < 0 else str(s.layer)
        print(f"{name:>11s} {100 * s.precision:6.1f} {100 * s.recall:6.1f} {100 * s.f1:6.1f} "
              f"{s.backoff:8d}")
    return 0
