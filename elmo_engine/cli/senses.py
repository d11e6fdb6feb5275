"""``elmo-explorer senses INDEX --word WORD``: a word's occurrences in a corpus index clustered
per layer (k by silhouette), each cluster with its typical sentences and distinctive context
words. ``elmo-explorer senses --semcor``: the same on SemCor's commonest polysemous lemmas,
scored against the gold senses (purity, adjusted Rand index) per layer."""
from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.errors import InputError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SEMCOR_XML = DATA / "semcor30" / "semcor.data.xml.gz"
SEMCOR_KEYS = DATA / "semcor30" / "semcor.gold.key.txt.gz"


class _SemcorAction(argparse.Action):
    """``--semcor [XML]``; it also brings ``--semcor-keys``' default (the shared data's keys)
    when none is given, so that the dispatcher checks that file before the model loads; without
    ``--semcor`` the keys are neither needed nor checked."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        if getattr(namespace, "semcor_keys", None) is None:
            namespace.semcor_keys = SEMCOR_KEYS


def add_parser(sub) -> None:
    p = sub.add_parser("senses", help="induce a word's senses per layer (clusters), or score "
                                      "induced senses on SemCor",
                       description="Cluster a word's occurrences per layer; k from 2 to --k-max "
                                   "by the cosine silhouette. With --semcor, cluster SemCor's "
                                   "commonest polysemous lemmas and print purity and ARI per "
                                   "layer against the gold senses.")
    p.add_argument("index", type=Path, nargs="?", help="an index folder (not with --semcor)")
    p.add_argument("--word", help="the word (case-folded)")
    p.add_argument("--layer", default=None, metavar="L[,L…]",
                   help="the layer numbers to cluster, comma-separated (default: all indexed)")
    p.add_argument("--k-max", type=int, default=None,
                   help="most clusters tried (default 8, as the app's Senses tab)")
    p.add_argument("--max-occurrences", type=int, default=2000,
                   help="an even sample of this many occurrences at most (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--semcor", nargs="?", type=Path, const=SEMCOR_XML, default=None,
                   action=_SemcorAction, metavar="XML",
                   help="score induced senses on SemCor (default: "
                        "../shared/data/semcor30/semcor.data.xml.gz)")
    p.add_argument("--semcor-keys", type=Path, default=None,
                   help="with --semcor: its gold keys (default ../shared/data/semcor30/"
                        "semcor.gold.key.txt.gz)")
    p.add_argument("--lemmas", type=int, default=40, help="SemCor lemmas scored (default 40)")
    p.add_argument("--max-sentences", type=int, default=None,
                   help="read only this many SemCor sentences (a subset; default all)")
    common.add_checkpoint(p)
    common.add_device(p)
    common.add_json(p)
    common.add_results_out(p)
    p.set_defaults(func=run)


def _layers(text, available):
    if text is None:
        return list(available)
    try:
        return [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise InputError(f"--layer must be comma-separated numbers, got {text!r}") from None


def run(args) -> int:
    if args.k_max is None:
        from elmo_engine.index.senses import K_MAX

        args.k_max = K_MAX
    if args.k_max < 2:
        raise InputError("--k-max must be at least 2")
    if args.semcor is not None:
        return _semcor(args)
    if args.index is None or not args.word:
        raise InputError("give an INDEX and --word (or --semcor)")
    from elmo_engine.index.search import CorpusIndex, kwic_line
    from elmo_engine.index.senses import induce_from_index

    index = CorpusIndex(args.index)
    try:
        res = induce_from_index(index, args.word, _layers(args.layer, index.layers), args.k_max,
                                args.max_occurrences, args.seed)
    finally:
        index.close()
    if args.json:
        d = asdict(res)
        for layer in d["layers"]:
            layer.pop("labels")
        d["occurrences"] = [{"sentence_id": o.sentence_id, "position": o.position,
                             "text": o.text} for o in res.occurrences]
        common.print_json(d)
        return 0
    print(f"'{args.word}': {len(res.occurrences)} occurrences"
          + (f" (a sample of {res.n_total})" if res.n_total > len(res.occurrences) else ""))
    for ls in res.layers:
        print(f"\nlayer {ls.layer}: {ls.k} clusters (silhouette {ls.silhouette:.3f})")
        for c in ls.clusters:
            words = ", ".join(w for w, _ in c.context_words) or "—"
            print(f"  cluster {c.label} ({c.size}): {words}")
            for i in c.typical:                  # centred on the word: the mark is never cut
                o = res.occurrences[i]
                print(f"      s{o.sentence_id}: {kwic_line(o.tokens, o.position)}")
    return 0


def _semcor(args) -> int:
    import numpy as np

    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.sense_eval import semcor_induction
    from elmo_engine.index.senses import layer_summary
    from elmo_engine.io.datasets.wsd import read_wsd
    from elmo_engine.model.checkpoint import load_checkpoint

    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint),
                            device=common.resolve_device(args.device))
    layers = _layers(args.layer, range(model.opts.n_output_layers))
    keys = args.semcor_keys if args.semcor_keys is not None else SEMCOR_KEYS
    sents = list(read_wsd(args.semcor, keys, limit=args.max_sentences))
    emb = Embedder(model, device=str(next(model.parameters()).device), cache_size=0)
    res = semcor_induction(sents, emb, layers, args.lemmas, args.max_occurrences, args.k_max,
                           args.seed)
    summary = layer_summary(res)
    majority = float(np.mean([r.majority_purity for r in res])) if res else float("nan")
    if args.json:
        common.print_json({"sentences": len(sents), "lemmas": len(res),
                          "majority_purity": majority,
                          "layers": {str(k): v for k, v in summary.items()},
                          "per_lemma": [{"lemma": r.lemma, "pos": r.pos, "n": r.n,
                                         "senses": r.n_senses,
                                         "majority_purity": r.majority_purity,
                                         "layers": {str(ls.layer): {"k": ls.k,
                                                                    "purity": ls.purity,
                                                                    "ari": ls.ari}
                                                    for ls in r.layers}} for r in res]})
        return 0
    print(f"SemCor: {len(sents)} sentences, {len(res)} lemmas; one cluster (majority sense) "
          f"purity {majority:.3f}")
    print(f"{'layer':>5s} {'purity':>7s} {'ARI':>6s} {'mean k':>6s}")
    for layer, d in summary.items():
        print(f"{layer:5d} {d['purity']:7.3f} {d['ari']:6.3f} {d['k']:6.2f}")
    return 0
