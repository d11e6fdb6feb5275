"""``elmo-explorer chars``: what the char-CNN and the highway layers make of any word.

- ``chars WORD…`` (the same as ``chars word WORD…``): the word lab — the character ids, the
  filters the word fires most with the winning n-gram of each, the highway gates, the norm
  among known words and the nearest known words at layer 0;
- ``chars filters``: the filter atlas — every filter's strongest n-grams over a vocabulary,
  search by n-gram, the filters' categories (TSV, figure);
- ``chars perturb``: a word perturbed in its sentence (or in every sentence of a file that
  holds it) and the cosine to the original per layer and direction;
- ``chars nonce``: a (made-up) word in its sentence — its layer-0 neighbours against the two
  LMs' predictions at its place and, with ``--index DIR``, its nearest occurrences per layer in a
  corpus index.

The vocabulary is the bundled reference corpus's word types unless ``--vocab FILE`` names one.
The engine: :mod:`elmo_engine.analysis.characters`.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from elmo_engine.cli import common

ACTIONS = ("word", "filters", "perturb", "nonce")


def default_action(argv: List[str]) -> List[str]:
    """``chars WORD…`` is ``chars word WORD…``: the action is put in when the first argument
    after ``chars`` is not one (nor a help option)."""
    if argv[:1] == ["chars"] and len(argv) > 1 and argv[1] not in ACTIONS + ("-h", "--help"):
        return ["chars", "word", *argv[1:]]
    return argv


def _vocab_option(p) -> None:
    p.add_argument("--vocab", type=Path, default=None, metavar="FILE",
                   help="known words, one a line (a vocab.txt reads as it is; default: the "
                        "word types of the bundled reference corpus)")


def _model_options(p) -> None:
    common.add_checkpoint(p)
    common.add_device(p)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "chars", help="what the char-CNN and highway layers make of any word: word lab, "
                      "filter atlas, perturbations",
        description="chars WORD… (= chars word WORD…): the word lab; chars filters: the "
                    "filter atlas; chars perturb: a word perturbed in context.")
    csub = p.add_subparsers(dest="chars_command", metavar="ACTION", required=True)
    w = csub.add_parser("word", help="the word lab (also: chars WORD…)",
                        description="For each WORD: the character ids the model reads (⟨ ⟩ the "
                                    "word marks), the filters it fires most with the n-gram "
                                    "that wins each one's max-pool, the highway gates (share "
                                    "transformed vs carried), its norm among known words and its "
                                    "nearest known words at layer 0.")
    w.add_argument("words", nargs="+", metavar="WORD", help="any strings: made up, misspelt, "
                                                            "with digits, other scripts, emoji")
    w.add_argument("--filters", type=int, default=10, metavar="K",
                   help="how many filters per word (default 10)")
    w.add_argument("--neighbours", type=int, default=10,
                   help="nearest known words at layer 0 (default 10; 0: none)")
    _vocab_option(w)
    _model_options(w)
    common.add_json(w)
    common.add_results_out(w)
    f = csub.add_parser("filters", help="the filter atlas: each filter's strongest n-grams",
                        description="For every filter, the n-grams of the vocabulary that fire "
                                    "it most (exact: every distinct max-pool window is scored), "
                                    "with the filter's category (capitals, digits, "
                                    "punctuation, suffix, prefix, word-internal, padding).")
    f.add_argument("--width", dest="filter_width", type=int, default=None, metavar="W",
                   help="only the filters of this width")
    f.add_argument("--top", type=int, default=10, metavar="N",
                   help="n-grams per filter (default 10)")
    f.add_argument("--search", default=None, metavar="NGRAM",
                   help="list the filters that fire most on windows holding NGRAM instead "
                        "('-ness': a suffix, 'un-': a prefix)")
    f.add_argument("--tsv", type=Path, default=None, metavar="FILE", dest="tsv_out",
                   help="also write the atlas as TSV (one line per filter)")
    f.add_argument("--figure", type=Path, default=None, metavar="FILE",
                   help="also write the map of the filters by category (.png, .svg or .pdf)")
    _vocab_option(f)
    _model_options(f)
    common.add_json(f)
    common.add_results_out(f)
    q = csub.add_parser("perturb", help="a word perturbed in context: cosine per layer",
                        description="The word perturbed (deletions, insertions, substitutions, "
                                    "transpositions with 1 and 2 edits, case, an affix added or "
                                    "removed, a letter repeated) in its sentence; the cosine of "
                                    "each variant to the original per layer (0, 1, 2) and "
                                    "direction, and the mean per type.")
    src = q.add_mutually_exclusive_group(required=True)
    src.add_argument("--sentence", help="the sentence holding the word (typed text)")
    src.add_argument("--sentences", type=Path, metavar="FILE",
                     help="a sentence file: every sentence that holds the word (up to "
                          "--max-sentences)")
    q.add_argument("--word", required=True,
                   help="the word to perturb (its first occurrence); with --sentences several, "
                        "comma-separated: a sweep per word, the mean per type over all")
    q.add_argument("--per-type", type=int, default=None, metavar="N",
                   help="variants per perturbation type (default 4, as the app's "
                        "Perturbations tab and its report)")
    q.add_argument("--max-sentences", type=int, default=20,
                   help="with --sentences: at most this many sentences (default 20)")
    q.add_argument("--seed", type=int, default=0, help="the variants' seed (default 0)")
    q.add_argument("--figure", type=Path, default=None, metavar="FILE",
                   help="also write the chart of the mean per type (.png, .svg or .pdf)")
    common.add_pretokenized(q)
    _model_options(q)
    common.add_json(q)
    common.add_results_out(q)
    n = csub.add_parser("nonce", help="a (made-up) word in context: layer 0 against the LMs and "
                                      "the corpus",
                        description="The word's nearest known words at layer 0 (its spelling), "
                                    "the forward and backward LMs' top predictions at its place "
                                    "and the words both agree on (what the context says), and "
                                    "with --index the nearest occurrences in a corpus index per "
                                    "indexed layer.")
    n.add_argument("--sentence", required=True, help="the sentence holding the word (typed text)")
    n.add_argument("--word", required=True, help="the word (its first occurrence)")
    n.add_argument("--index", type=Path, default=None, metavar="DIR",
                   help="a corpus index built by 'elmo-explorer index' with this model: the "
                        "nearest occurrences (any word) per indexed layer")
    n.add_argument("--top-k", type=int, default=10, help="predictions and neighbours (default 10)")
    n.add_argument("-k", type=int, default=5, help="occurrences per layer with --index "
                                                   "(default 5)")
    _vocab_option(n)
    common.add_pretokenized(n)
    _model_options(n)
    common.add_json(n)
    common.add_results_out(n)
    p.set_defaults(func=run)


def run(args) -> int:
    from elmo_engine.errors import InputError

    for opt in ("figure", "tsv_out"):
        path = getattr(args, opt, None)
        if path is not None:
            common.refuse_existing(args.force, path)
            if opt == "figure" and path.suffix.lower() not in (".png", ".svg", ".pdf"):
                raise InputError(f"--figure {path}: name a .png, .svg or .pdf file")
    return {"word": _word, "filters": _filters, "perturb": _perturb,
            "nonce": _nonce}[args.chars_command](args)


def _load_filters(args):
    from elmo_engine.analysis.characters.windows import filters_of
    from elmo_engine.model.checkpoint import load_checkpoint

    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint),
                            device=common.resolve_device(args.device))
    return model, filters_of(model.char_cnn)


def _vocabulary_words(path: Optional[Path]):
    from elmo_engine.analysis.characters.word_lab import read_vocabulary, reference_words

    if path is None:
        return reference_words(), "the reference corpus's word types"
    return read_vocabulary(path), str(path)


def _word(args) -> int:
    from elmo_engine.analysis.characters.word_lab import Vocabulary, analyse

    model, filters = _load_filters(args)
    vocab = None
    if args.neighbours > 0 or args.vocab is not None:
        words, source = _vocabulary_words(args.vocab)
        vocab = Vocabulary.from_words(filters, words, source, char_cnn=model.char_cnn)
    reports = analyse(filters, args.words, vocab, args.neighbours)
    if args.json:
        common.print_json({"vocabulary": None if vocab is None else
                           {"source": vocab.source, "words": len(vocab.words)},
                           "max_characters_per_token": filters.max_chars,
                           "words": [r.to_dict(filters, args.filters) for r in reports]})
        return 0
    for r in reports:
        d = r.to_dict(filters, args.filters)
        print(f"{r.word}: {d['characters']}  ({r.n_bytes} UTF-8 bytes"
              + (f"; cut to {filters.max_chars - 2}" if r.truncated else "") + ")")
        print("  ids  " + " ".join(str(i) for i in d["char_ids"]))
        print("  top filters (filter/width: value, winning n-gram)")
        for h in d["top_filters"]:
            print(f"    {h['filter']:5d}/{h['width']}  {h['value']:7.3f}  {h['ngram']}")
        for h in d["highway"]:
            print(f"  highway {h['layer']}: {100 * h['transform_share']:.1f}% transformed, "
                  f"{100 * h['carry_share']:.1f}% carried ({h['mostly_transformed']} of "
                  f"{h['dimensions']} dimensions mostly transformed)")
        pct = d["norm_percentile"]
        print(f"  norm {r.norm:.3f}" + ("" if pct is None else
                                        f" (percentile {pct:.1f} of {len(vocab.words)} known "
                                        f"words)" if vocab is not None else ""))
        if r.neighbours:
            print("  nearest at layer 0: " + ", ".join(f"{w} {c:.3f}" for w, c in r.neighbours))
    return 0


def _filters(args) -> int:
    from elmo_engine.analysis.characters.atlas import Atlas
    from elmo_engine.atomic import atomic_write_text
    from elmo_engine.errors import InputError

    _, filters = _load_filters(args)
    if args.filter_width is not None and args.filter_width not in [b[0] for b in filters.banks]:
        raise InputError(f"--width {args.filter_width}: the model's filter widths are "
                         + ", ".join(str(b[0]) for b in filters.banks))
    words, source = _vocabulary_words(args.vocab)
    atlas = Atlas.build(filters, words, top=args.top)
    if args.tsv_out is not None:
        atomic_write_text(args.tsv_out, atlas.to_tsv(args.top))
    if args.figure is not None:
        from elmo_engine.io import figures
        from elmo_engine.io.figures.characters import filter_map_figure

        counts = {w: {c.value: n for c, n in d.items()} for w, d in atlas.category_counts().items()}
        figures.save(filter_map_figure(counts, f"{filters.n_filters} filters over {len(words):,} "
                                               f"words"), args.figure)
    if args.search is not None:
        hits = [h for h in atlas.search(args.search, limit=None)
                if args.filter_width is None or atlas.entry(h[0], 0).width == args.filter_width][:args.top]
        if args.json:
            common.print_json({"query": args.search, "vocabulary": source,
                               "filters": [{"filter": j, "relative": round(rel, 4),
                                            "window": g, "value": round(v, 5)}
                                           for j, rel, g, v in hits]})
            return 0
        print(f"filters firing on {args.search!r} (best window holding it / the filter's best)")
        for j, rel, g, v in hits:
            print(f"  {j:5d}  {rel:6.3f}  {v:7.3f}  {g}")
        return 0
    entries = atlas.entries(args.filter_width, args.top)
    if args.json:
        by_width = atlas.category_counts()
        common.print_json({"vocabulary": {"source": source, "words": len(atlas.words)},
                           "categories": {str(w): {c.value: n for c, n in d.items()}
                                          for w, d in by_width.items()},
                           "filters": [e.to_dict() for e in entries]})
        return 0
    print(f"{len(entries)} filters; n-grams from {len(atlas.words):,} words ({source}); "
          "⟨ ⟩ mark the word's start and end, · padding")
    for e in entries:
        grams = "  ".join(f"{g} {v:.2f}" for g, v, _ in e.ngrams)
        print(f"{e.filter:5d}/{e.width} {e.category.value:13s} {grams}")
    return 0


def _perturb(args) -> int:
    from elmo_engine.analysis.characters.perturb import PER_KIND, summarise, sweep
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.errors import InputError
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.tokenize import sentence_tokens

    per_type = PER_KIND if args.per_type is None else args.per_type   # ≥ 1: parsing checks
    words = [w for w in args.word.split(",") if w] if args.sentences else [args.word]
    if not words:
        raise InputError(f"--word {args.word!r} names no word: with --sentences it is a "
                         "comma-separated list of words (a comma itself only with --sentence)")
    if args.sentence is not None:
        toks = sentence_tokens(args.sentence, "whitespace" if args.pretokenized else "tokenize")
        if args.word not in toks:
            raise InputError(f"--word '{args.word}' is not a token of --sentence "
                             f"({' '.join(toks)})")
        per_word = [[toks]]
    else:
        text = common.read_text(args.sentences, args.pretokenized)
        per_word = []
        for w in words:
            found = [list(s) for s in text.tokens if w in s][:args.max_sentences]
            if not found:
                raise common.absent_word(w, text.tokens, f"the {len(text.tokens)} sentences",
                                         path=args.sentences)
            per_word.append(found)
    model = load_checkpoint(common.checkpoint_or_demo(args.checkpoint),
                            device=common.resolve_device(args.device))
    emb = Embedder(model, device=str(next(model.parameters()).device), cache_size=0)
    sweeps = [sweep(emb, sents, w, per_type, args.seed) for w, sents in zip(words, per_word)]
    result = sweeps[0]
    sentences = [s for sents in per_word for s in sents]
    summary = {k.value: v for k, v in summarise(sweeps).items()}
    label = f"'{args.word}'" if len(words) == 1 else f"{len(words)} words"
    if args.figure is not None:
        from elmo_engine.io import figures
        from elmo_engine.io.figures.characters import perturbation_figure

        figures.save(perturbation_figure({k: v.tolist() for k, v in summary.items()},
                                         f"{label} perturbed in {len(sentences)} "
                                         f"sentence(s)"), args.figure)
    if len(words) > 1:
        if args.json:
            common.print_json({"words": words, "sentences": len(sentences),
                               "variants": sum(len(s.variants) * len(s.sentences) for s in sweeps),
                               "layers": list(range(result.cosines.shape[2])),
                               "directions": ["both", "forward", "backward"],
                               "mean_per_type": {k: [[round(float(x), 5) for x in row]
                                                     for row in v] for k, v in summary.items()},
                               "sweeps": [s.to_dict() for s in sweeps]})
            return 0
        n = result.cosines.shape[2]
        head = "L0    " + "  ".join(f"L{i} fwd L{i} bwd" for i in range(1, n))
        print(f"{label} ({', '.join(words)}) in {len(sentences)} sentences: mean cosine to the "
              "original")
        print(f"{'type':16s} {head}")
        for k, m in summary.items():
            print(f"{k:16s} " + _row(m))
        return 0
    if args.json:
        common.print_json(result.to_dict())
        return 0
    n = result.cosines.shape[2]
    head = "L0    " + "  ".join(f"L{i} fwd L{i} bwd" for i in range(1, n))
    print(f"'{args.word}' in {len(sentences)} sentence(s): cosine to the original")
    print(f"{'type':16s} {'variant':22s} {head}")
    per = result.cosines.mean(1)
    for i, v in enumerate(result.variants):
        print(f"{v.kind.value:16s} {v.text[:22]:22s} " + _row(per[i]))
    print()
    print(f"{'mean per type':39s} {head}")
    for k, m in summary.items():
        print(f"{k:39s} " + _row(m))
    return 0


def _row(m) -> str:
    cells = [f"{m[0][0]:.3f}"] + [f"{m[i][1]:.3f}  {m[i][2]:.3f} " for i in range(1, len(m))]
    return " ".join(cells)


def _nonce(args) -> int:
    from elmo_engine.analysis.characters.nonce import in_context
    from elmo_engine.analysis.characters.word_lab import Vocabulary
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.errors import InputError
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.softmax import NoSoftmaxError, load_softmax
    from elmo_engine.model.tokenize import sentence_tokens
    from elmo_engine.train.evaluate import model_folder

    toks = sentence_tokens(args.sentence, "whitespace" if args.pretokenized else "tokenize")
    if args.word not in toks:
        raise InputError(f"--word '{args.word}' is not a token of --sentence ({' '.join(toks)})")
    pos = toks.index(args.word)
    words, source = _vocabulary_words(args.vocab)
    checkpoint = common.checkpoint_or_demo(args.checkpoint)
    model = load_checkpoint(checkpoint, device=common.resolve_device(args.device))
    emb = Embedder(model, device=str(next(model.parameters()).device), cache_size=0)
    try:
        softmax = load_softmax(model_folder(Path(checkpoint)), output_dim=model.opts.output_dim)
    except NoSoftmaxError as e:
        if args.index is None:                  # nothing left to show
            raise
        # as the view's In context tab: the index's occurrences need no softmax
        softmax, no_softmax = None, f"no predictions: {e.reason}"
        common.log(f"note: {no_softmax}; the nearest occurrences in --index are shown")
    res = None
    if softmax is not None:
        vocab = Vocabulary(words, emb.token_vectors(words), source)
        res = in_context(emb, softmax, toks, pos, vocab, args.top_k)
    hits = {}
    if args.index is not None:
        from elmo_engine.index.search import CorpusIndex, query_vectors

        index = CorpusIndex(args.index, checksum=model.info.checksum)
        try:
            vecs = query_vectors(emb, toks, pos, index.layers)
            hits = {layer: index.search(vecs[layer], layer, args.k, None)
                    for layer in index.layers}
        finally:
            index.close()
    if args.json:
        if res is not None:
            doc = res.to_dict()
            doc["vocabulary"] = {"source": source, "words": len(words)}
        else:
            doc = {"sentence": " ".join(toks), "word": args.word, "position": pos,
                   "no_predictions": no_softmax}
        doc["index"] = None if args.index is None else {
            "folder": str(args.index),
            "layers": {str(layer): [h.to_dict() for h in hs] for layer, hs in hits.items()}}
        common.print_json(doc)
        return 0

    def line(pairs) -> str:
        return ", ".join(f"{w} {v:.3f}" for w, v in pairs) or "—"

    if res is None:
        print(f"'{args.word}' in: {' '.join(toks)}  ({no_softmax})")
    else:
        rank = ("outside the softmax's vocabulary" if not res.in_vocabulary else
                f"rank {res.forward_rank} forward, {res.backward_rank} backward")
        print(f"'{res.word}' in: {' '.join(toks)}  ({rank})")
        print(f"  layer 0, nearest known words (spelling): {line(res.layer0)}")
        print(f"  forward LM predicts here:  {line(res.forward)}")
        print(f"  backward LM predicts here: {line(res.backward)}")
        print(f"  both agree on: {line(res.both)}")
    for layer, hs in hits.items():
        print(f"  layer {layer}, nearest occurrences in {args.index}:")
        for h in hs:
            left, w, right = h.kwic(30)
            print(f"    {h.cosine:6.3f}  {left:>30} [{w}] {right}")
    return 0
