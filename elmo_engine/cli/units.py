"""``elmo-explorer units rank|top|ablate``: inside the LSTM (issue 40, docs/guide/units.md).

* ``units rank``: the units of each layer, direction and state kind ranked for a token-level
  property (``--conllu FILE --label upos|xpos|feats:Number``, ``--tsv FILE`` or ``--demo pos``)
  by an elastic-net probe and by the class-mean difference, with the accuracy of a probe on the
  top-k units against k random units (``--k``, ``--seeds``).
* ``units top INPUT``: a unit (``--layer``, ``--direction``, ``--state``, ``--unit``; several
  in one run of the model) over a sentence file or a corpus index: its highest (or
  ``--lowest``) positions as concordance lines, and the words that drive it most.
* ``units ablate``: Lakretz et al.'s experiment: rank the units for a property (default
  ``feats:Number``) in each direction, zero the top-k and k random units in the live biLM, and
  score the minimal pairs (``--pairs``, default the bundled sets) per direction. Without
  ``--conllu``/``--tsv``/``--demo`` it reads EWT train beside the checkout
  (``../shared/data/ud_english_ewt``), else the demo POS task's tags.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from elmo_engine.analysis.units.corpus import CORPUS_TOKENS, MAX_SCAN_UNITS
from elmo_engine.cli import common
from elmo_engine.errors import InputError

DIRECTIONS = ("forward", "backward", "both")
MAX_SENTENCES = 200_000
DEFAULT_RANK_TOKENS = 100_000


def _data_options(p, label_default: str) -> None:
    src = p.add_argument_group("labelled tokens (one of; units ablate without any: EWT train "
                               "under ../shared/data, else --demo pos)")
    src.add_argument("--conllu", type=Path, default=None, metavar="FILE",
                     help="a CoNLL-U file (plain or gzip); the label is --label")
    src.add_argument("--tsv", type=Path, default=None, metavar="FILE",
                     help="a token<TAB>label file, blank lines between sentences")
    src.add_argument("--demo", choices=("pos", "supersense"), default=None,
                     help="a bundled demo task (its train split)")
    p.add_argument("--label", default=label_default,
                   help=f"with --conllu: upos, xpos, deprel or feats:NAME, one UD feature of "
                        f"FEATS (default {label_default})")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_RANK_TOKENS, metavar="N",
                   help=f"labelled tokens used at most (default {DEFAULT_RANK_TOKENS:,})")
    p.add_argument("--max-mib", type=int, default=2048, metavar="MIB",
                   help="bound on the gathered states, checked before they are allocated "
                        "(default 2048)")


def _model_options(p) -> None:
    common.add_checkpoint(p)
    common.add_device(p)


def add_parser(subparsers):
    p = subparsers.add_parser(
        "units", help="inside the LSTM: units ranked for a property, a unit's contexts, "
                      "units ablated in the live biLM",
        description="Cells, gates and units of each direction of the biLM's LSTM (see "
                    "docs/guide/units.md).")
    sub = p.add_subparsers(dest="units_command", metavar="ACTION", required=True)

    rank = sub.add_parser("rank", help="rank units for a token-level property, with the top-k "
                                       "vs random-k curve")
    _data_options(rank, "upos")
    rank.add_argument("--states", default="c,h", metavar="S[,S…]",
                      help="state kinds: c (cell), i, f, o (gates), g (candidate), m "
                           "(unprojected output), h (projected output), or all (default c,h)")
    rank.add_argument("--layer", default=None, metavar="L[,L…]",
                      help="LSTM layers, 0-based (default all)")
    rank.add_argument("--direction", choices=DIRECTIONS, default="both",
                      help="which LM (default both)")
    rank.add_argument("--k", default="1,2,4,8,16,32,64,128,256", metavar="K[,K…]",
                      help="sizes of the top-k curve ('' for none; default 1,2,4,…,256)")
    rank.add_argument("--seeds", type=int, default=3, help="random draws per k (default 3)")
    rank.add_argument("--show", type=int, default=10, metavar="N",
                      help="units listed per ranking (default 10)")
    rank.add_argument("--figure", type=Path, default=None, metavar="FILE",
                      help="also draw the top-k curves (top k per method against k random, "
                           "mean ± sd; one panel per ranking) to FILE (.png, .svg or .pdf)")
    common.add_force(rank, "an existing --out or --figure file")
    _model_options(rank)
    common.add_json(rank)
    common.add_results_out(rank)
    rank.set_defaults(func=run_rank)

    top = sub.add_parser("top", help="one unit's highest positions over a sentence file, and "
                                     "the words that drive it")
    top.add_argument("input", type=Path, nargs="?",
                     help="sentence file (one sentence per line) or CoNLL-U; its first "
                          f"{CORPUS_TOKENS:,} words are read (or give --index)")
    _add_index_options(top)
    top.add_argument("--layer", type=int, default=0, help="LSTM layer, 0-based (default 0)")
    top.add_argument("--direction", choices=DIRECTIONS[:2], default="forward",
                     help="which LM (default forward)")
    top.add_argument("--state", default="c", help="state kind (default c, the cell)")
    top.add_argument("--unit", required=True, metavar="U[,U…]",
                     help="the unit, 0-based; several (78,112,301) are ranked in one run of the "
                          "model, each with its own table")
    top.add_argument("--show", type=int, default=20, metavar="N",
                     help="positions and words listed (default 20)")
    top.add_argument("--lowest", action="store_true", help="the most negative values instead")
    _model_options(top)
    common.add_pretokenized(top)
    common.add_json(top)
    common.add_results_out(top)
    top.set_defaults(func=run_top)

    pat = sub.add_parser("pattern", help="the units on over a span of a sentence, and the corpus "
                                         "spans whose units are on in the same way (LSTMVis)")
    pat.add_argument("corpus", type=Path, nargs="?",
                     help="sentence file (one sentence per line), or CoNLL-U (.conllu, "
                          ".conllu.gz: the matches show their UPOS); its first "
                          f"{CORPUS_TOKENS:,} words are read (or give --index)")
    _add_index_options(pat)
    pat.add_argument("--sentence", required=True, help="the query sentence")
    pat.add_argument("--span", required=True, metavar="I:J",
                     help="its words I … J (1-based, inclusive) that make the pattern")
    pat.add_argument("--threshold", type=float, default=0.3, metavar="T",
                     help="a unit is on when above T at every word of a span (default 0.3)")
    pat.add_argument("--layer", type=int, default=None,
                     help="LSTM layer, 0-based (default: the top one, 1 for the published "
                          "models, as the app's Pattern tab)")
    pat.add_argument("--direction", choices=("forward", "backward", "fwd", "bwd"),
                     default="forward", help="which LM (default forward)")
    pat.add_argument("--state", default="c", help="state kind (default c, the cell; h, m, the "
                                                   "gates i f o and the candidate g work too)")
    pat.add_argument("--show", type=int, default=20, metavar="N",
                     help="matches listed (default 20)")
    _model_options(pat)
    common.add_pretokenized(pat)
    common.add_json(pat)
    common.add_results_out(pat)
    pat.set_defaults(func=run_pattern)

    abl = sub.add_parser("ablate", help="zero the top-k units for a property and k random units "
                                        "in the live biLM; score the minimal pairs per direction")
    _data_options(abl, "feats:Number")
    abl.add_argument("--pairs", type=Path, default=Path("bundled"), metavar="FILE",
                     help="minimal pairs (TSV set<TAB>good<TAB>bad; default 'bundled': the sets "
                          "shipped with the app)")
    abl.add_argument("--layer", type=int, default=None,
                     help="the LSTM layer whose units are ranked and ablated (default the top)")
    abl.add_argument("--state", default="c", help="c, m or h (default c, the cell)")
    abl.add_argument("--method", choices=("mean-diff", "elastic-net"), default="mean-diff",
                     help="the ranking (default mean-diff, the probeless score)")
    abl.add_argument("--k", default=None, metavar="K[,K…]",
                     help="numbers of units ablated, each at most half the state's units "
                          "(default 1,2,4,8,16: those the state's units allow)")
    abl.add_argument("--seeds", type=int, default=5, help="random draws per k (default 5)")
    abl.add_argument("--probe-layer", type=int, default=None, metavar="L",
                     help="also re-measure a probe of representation layer L (0 the token "
                          "layer, 1 … the LSTM layers) for the labels: trained on the unchanged "
                          "model, scored on the held-out sentences under each ablation")
    abl.add_argument("--word", default=None,
                     help="also re-measure this word's similarity across its contexts (the mean "
                          "cosine of its occurrences, the top representation layer) under each "
                          "ablation")
    abl.add_argument("--contexts", type=Path, default=None, metavar="FILE",
                     help="with --word: its contexts, a sentence file (default: the labelled "
                          "sentences)")
    _model_options(abl)
    common.add_json(abl)
    common.add_results_out(abl)
    abl.set_defaults(func=run_ablate)
    return p


# ---- shared -----------------------------------------------------------------------------------
def _ints(text: str, option: str, low: int = 0) -> Tuple[int, ...]:
    if not text.strip():
        return ()
    try:
        values = tuple(int(v) for v in text.replace(",", " ").split())
    except ValueError:
        raise InputError(f"{option} must be comma-separated integers, got {text!r}") from None
    bad = [v for v in values if v < low]
    if bad:
        raise InputError(f"{option}: {bad[0]} is below {low}")
    return values


def _directions(name: str) -> Tuple[int, ...]:
    return {"forward": (0,), "backward": (1,), "both": (0, 1)}[name]


def _load_model(args):
    from elmo_engine.model.checkpoint import load_checkpoint

    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint))
    device = common.resolve_device(args.device)
    return model.to(device).eval()


def _labelled(args) -> List:
    """The labelled sentences of --conllu, --tsv or --demo (exactly one)."""
    import itertools

    given = [n for n in ("conllu", "tsv", "demo") if getattr(args, n) is not None]
    if len(given) != 1:
        raise InputError("give the labelled tokens with exactly one of --conllu, --tsv, --demo")
    if args.conllu is not None or args.tsv is not None:
        from elmo_engine.analysis.units.collect import labelled_file

        path = args.conllu if args.conllu is not None else args.tsv
        # one class alone is said with the file, before the model runs (labelled_file)
        return labelled_file(path, args.label, args.max_tokens, MAX_SENTENCES,
                             conllu=args.conllu is not None)
    from elmo_engine.io.datasets.demo import load_demo_task

    out, count = [], 0
    for s in itertools.islice(iter(load_demo_task(args.demo, "train")), MAX_SENTENCES):
        out.append(s)
        count += len(s.targets())
        if count >= args.max_tokens:
            break
    return out


def _token_vectors(model, device: str):
    from elmo_engine.embed.embedder import Embedder

    return Embedder(model, device=device).token_vectors


def _check_layers(layers, opts) -> None:
    """Every layer one of the model's LSTM layers (``opts``: its options, read before torch by
    :func:`~elmo_engine.cli.common.checkpoint_options`)."""
    n = opts.n_layers
    for layer in layers:
        if not 0 <= layer < n:
            raise InputError(f"--layer {layer}: the model has LSTM layers 0 … {n - 1}")


# ---- rank -------------------------------------------------------------------------------------
def run_rank(args) -> int:
    """``units rank`` (:mod:`elmo_engine.cli.units_rank`)."""
    from elmo_engine.cli.units_rank import run_rank as run

    return run(args)


# ---- top --------------------------------------------------------------------------------------
def run_top(args) -> int:
    from elmo_engine.model.lstm_states import StateKind, parse_states, state_width

    kinds = parse_states(args.state)
    if len(kinds) != 1:
        raise InputError("--state takes one state kind (c, i, f, o, g, m or h)")
    kind: StateKind = kinds[0]
    units = _units(args.unit)
    opts = common.checkpoint_options(args.checkpoint)     # the sizes, before torch
    _check_layers([args.layer], opts)
    width = state_width(opts, kind)
    for unit in units:
        if unit >= width:
            raise InputError(f"--unit {unit}: {kind.value} has units 0 … {width - 1}")

    _check_corpus_choice(args, args.input)
    d = _directions(args.direction)[0]
    from elmo_engine.analysis.units.contexts import UnitTop, scan_units

    tops = {unit: UnitTop(args.show, args.lowest) for unit in units}
    _, corpus = _scan(args, args.input, lambda model, source, labels, task: scan_units(
        model, source, args.layer, d, kind, {u: [t] for u, t in tops.items()},
        max_tokens=args.max_tokens, token_vectors=_token_vectors(model, str(model.device)),
        task=task))
    ranked: List[Dict[str, Any]] = []
    for unit, top in tops.items():
        ranked.append({"unit": unit,
                       "top": [{"value": c.value, "sentence": c.sentence, "token": c.token,
                                "word": c.word, "left": c.left, "right": c.right}
                               for c in top.contexts()],
                       "words": [{"word": w, "mean": m, "count": n}
                                 for w, m, n in top.words()]})
    positions = next(iter(tops.values())).positions
    doc = {"layer": args.layer, "direction": args.direction, "state": kind.value,
           "positions": positions, "corpus": corpus}
    # one unit: its fields at the top level, as before; several: a list, in the order asked
    doc.update(ranked[0] if len(ranked) == 1 else {"units": ranked})
    if args.json:
        common.print_json(doc)
        return 0
    for n, one in enumerate(ranked):
        print(("\n" if n else "") + f"unit {one['unit']} of {kind.value}, layer {args.layer} "
              f"{args.direction}: the {'lowest' if args.lowest else 'highest'} of {positions} "
              "positions")
        for e in one["top"]:
            print(f"{e['value']:8.3f}  {e['left'][-40:]:>40} [{e['word']}] {e['right'][:40]}")
        print("words by mean value:")
        for e in one["words"]:
            print(f"{e['mean']:8.3f}  {e['word']} ({e['count']})")
    return 0


def _units(text: str) -> List[int]:
    """``--unit``'s units: one or more, comma-separated, each once, at most
    :data:`~elmo_engine.analysis.units.corpus.MAX_SCAN_UNITS`."""
    units = _ints(text, "--unit")
    if not units:
        raise InputError("--unit needs a unit (or several: 78,112,301)")
    twice = [u for n, u in enumerate(units) if u in units[:n]]
    if twice:
        raise InputError(f"--unit: unit {twice[0]} is given twice")
    if len(units) > MAX_SCAN_UNITS:
        raise InputError(f"--unit: {len(units)} units; one run ranks at most {MAX_SCAN_UNITS}")
    return list(units)


def _add_index_options(p) -> None:
    p.add_argument("--index", type=Path, metavar="FOLDER",
                   help="a corpus index (elmo-explorer index, by any model) instead of a file: "
                        "every sentence it holds, a batch at a time (the states are computed "
                        "again: the index keeps the layers' outputs only)")
    p.add_argument("--max-tokens", type=int, metavar="N",
                   help="with --index: whole sentences while fewer than N words have been read "
                        "(default all)")


def _check_corpus_choice(args, path: Optional[Path], query: bool = False) -> None:
    """A sentence file or ``--index`` (one of them); ``--max-tokens`` with an index only, and
    ``--pretokenized`` with a file only, or (``query``) for the query sentence too."""
    if (path is None) == (args.index is None):
        raise InputError("give a sentence file or --index FOLDER (one of them)")
    if args.max_tokens is not None and args.index is None:
        raise InputError(f"--max-tokens goes with --index (a file's first {CORPUS_TOKENS:,} "
                         "words are read)")
    if args.index is not None and args.pretokenized and not query:
        raise InputError("--pretokenized does not go with --index (its sentences are tokens "
                         "already)")


def _scan(args, path: Optional[Path], run):
    """``run(model, source, labels, task)`` over the corpus of ``units top``/``pattern``: the
    file ``path`` (its first words, read and held: :func:`_corpus`; its UPOS for a CoNLL-U) or
    the corpus index ``args.index`` (opened and closed after, read a batch at a time, progress
    on stderr and a ``note:`` when ``--max-tokens`` cut it). The model is loaded once the
    corpus is known to be readable. Returns what ``run`` returned (its ``sentences``,
    ``tokens`` and ``truncated`` say what it read) and the JSON's ``corpus``."""
    from elmo_engine.io.datasets.sentence_source import SentenceSource

    if args.index is None:
        assert path is not None                     # _check_corpus_choice: one of them
        read = _corpus(path, args.pretokenized)
        model = _load_model(args)
        res = run(model, SentenceSource.of(read.sentences), read.labels, None)
        return res, {"path": str(read.path), "sentences": len(read.sentences),
                     "tokens": read.tokens, "truncated": read.truncated}
    from elmo_engine.index.search import open_sentences
    from elmo_engine.progress import TaskState

    with open_sentences(args.index) as source:
        model = _load_model(args)
        progress = common.StderrProgress()
        try:
            res = run(model, source, None, TaskState(progress))
        finally:
            progress.close()
    if res.truncated:
        common.log(f"note: read the first {res.tokens:,} words ({res.sentences:,} sentences) "
                   f"of the index's {source.n_tokens:,}")
    return res, {"index": str(args.index), "sentences": res.sentences, "tokens": res.tokens,
                 "truncated": res.truncated}


# ---- pattern ----------------------------------------------------------------------------------
def _corpus(path: Path, pretokenized: bool):
    """The first :data:`~elmo_engine.analysis.units.corpus.CORPUS_TOKENS` words of a sentence
    file or CoNLL-U
    (:func:`~elmo_engine.analysis.units.corpus.read_units_corpus`, as the Units view reads its
    corpora), saying on stderr when the file holds more and which blank lines it skipped."""
    from elmo_engine.analysis.units.corpus import CORPUS_TOKENS, read_units_corpus

    corpus = read_units_corpus(path, CORPUS_TOKENS, pretokenized)
    if corpus.truncated:
        common.log(f"note: read {corpus.describe()}")
    if corpus.blank:
        common.log(f"note: {corpus.blank_note()}")
    return corpus


def _span(text: str) -> Tuple[int, int]:
    a, sep, b = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(a), int(b)
    except ValueError:
        raise InputError(f"--span must be I:J (1-based word positions), got {text!r}") from None


def run_pattern(args) -> int:
    from elmo_engine.model.lstm_states import StateKind, parse_states

    kinds = parse_states(args.state)
    if len(kinds) != 1:
        raise InputError("--state takes one state kind (c, i, f, o, g, m or h)")
    kind: StateKind = kinds[0]
    span = _span(args.span)
    opts = common.checkpoint_options(args.checkpoint)
    if args.layer is None:
        args.layer = opts.n_layers - 1                  # the top layer, as the Pattern tab
    _check_layers([args.layer], opts)                   # before torch
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, tokenize

    query = (args.sentence.split() if args.pretokenized
             else tokenize(args.sentence, MAX_SENTENCE_TOKENS))[:MAX_SENTENCE_TOKENS]
    if not query:
        raise InputError("--sentence is empty")
    _check_corpus_choice(args, args.corpus, query=True)
    from elmo_engine.analysis.units.pattern import find_pattern

    d = 0 if args.direction in ("forward", "fwd") else 1
    res, corpus = _scan(args, args.corpus, lambda model, source, labels, task: find_pattern(
        model, query, span, args.threshold, args.layer, d, kind, source, labels=labels,
        show=args.show, max_tokens=args.max_tokens,
        token_vectors=_token_vectors(model, str(model.device)), task=task))
    doc = {"query": list(res.query), "span": list(res.span), "corpus": corpus,
           "words": list(res.query[span[0] - 1:span[1]]), "threshold": res.threshold,
           "layer": args.layer, "direction": ("forward", "backward")[d], "state": kind.value,
           "on_units": list(res.on_units), "spans": res.spans,
           "matches": [{"score": m.score, "shared": m.shared, "on": m.on,
                        "sentence": m.sentence, "start": m.start, "end": m.end,
                        "words": list(m.words), "left": m.left, "right": m.right,
                        "pos": None if m.pos is None else list(m.pos)} for m in res.matches]}
    if args.json:
        common.print_json(doc)
        return 0
    print(f"{len(res.on_units)} units on (> {res.threshold:g}) over "
          f"{' '.join(doc['words'])!r}: {' '.join(map(str, res.on_units[:40]))}"
          f"{' …' if len(res.on_units) > 40 else ''}")
    print(f"best of {res.spans} corpus spans (Jaccard of the on-sets; shared units / on):")
    for m in res.matches:
        pos = "" if m.pos is None else f"  [{' '.join(p or '_' for p in m.pos)}]"
        print(f"{m.score:6.3f} {m.shared:4d}/{m.on:<4d} {m.left[-40:]:>40} "
              f"[{' '.join(m.words)}] {m.right[:40]}{pos}")
    return 0


def run_ablate(args) -> int:
    """``units ablate`` (:mod:`elmo_engine.cli.units_ablate`)."""
    from elmo_engine.cli.units_ablate import run_ablate as run

    return run(args)
