"""``elmo-explorer search INDEX --sentence TEXT --word WORD``: where else in the corpus a word is
used like this — the nearest occurrences, per layer, as concordance lines (or ``--json``)."""
from __future__ import annotations

from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "search", help="nearest occurrences of a word in context in a corpus index",
        description="Embed SENTENCE, take the chosen occurrence of WORD, and list the indexed "
                    "occurrences nearest to it by cosine (keyword in context, sentence id, "
                    "position). --same-word (default) searches that word's occurrences "
                    "exactly; --any-word searches every token through the HNSW index.")
    p.add_argument("index", type=Path, help="an index folder built by 'elmo-explorer index'")
    p.add_argument("--sentence", required=True, help="the sentence holding the word")
    p.add_argument("--word", required=True, help="the word to search by")
    p.add_argument("--occurrence", type=int, default=1,
                   help="which occurrence of WORD in SENTENCE (1-based; default 1)")
    p.add_argument("--layer", type=int, default=None,
                   help="layer to search (default: the top indexed layer)")
    p.add_argument("-k", type=int, default=10, help="how many occurrences (default 10)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--same-word", dest="same_word", action="store_true", default=True,
                   help="only occurrences of the same word, case-folded (exact; the default)")
    g.add_argument("--any-word", dest="same_word", action="store_false",
                   help="any token of the corpus (approximate, HNSW)")
    common.add_checkpoint(p, "the checkpoint the index was built with (default: the one it "
                             "records)")
    common.add_pretokenized(p)
    common.add_json(p)
    common.add_results_out(p)
    p.add_argument("--width", type=int, default=40, help="context characters on each side")
    common.add_device(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.search import CorpusIndex, occurrence, query_vectors
    from elmo_engine.index.store import read_manifest
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.tokenize import tokenize

    if args.k < 1:
        raise InputError("-k must be at least 1")
    manifest = read_manifest(args.index)
    ckpt = args.checkpoint or Path(manifest.checkpoint)
    if args.checkpoint is None and not ckpt.exists():
        ckpt = common.checkpoint_or_demo(None)
    model = load_checkpoint(ckpt, device=common.resolve_device(args.device))
    index = CorpusIndex(args.index, checksum=model.info.checksum)
    try:
        layer = index.layer(args.layer)
        tokens = args.sentence.split() if args.pretokenized else tokenize(args.sentence)
        pos = occurrence(tokens, args.word, args.occurrence)
        emb = Embedder(model, device=str(model_device(model)), cache_size=0)
        vec = query_vectors(emb, tokens, pos, [layer])[layer]
        word = tokens[pos]
        if args.same_word and len(index.rows_of(word)) == 0:
            raise index.absent(word)
        hits = index.search(vec, layer, args.k, word if args.same_word else None)
    finally:
        index.close()
    if args.json:
        common.print_json({"query": {"sentence": " ".join(tokens), "word": word,
                                    "position": pos, "layer": layer,
                                    "same_word": args.same_word},
                          "hits": [h.to_dict() for h in hits]})
        return 0
    print(f"layer {layer}: {len(hits)} nearest occurrences of '{word}'"
          + ("" if args.same_word else " (any word)"))
    for h in hits:
        left, w, right = h.kwic(args.width)
        print(f"{h.cosine:6.3f}  s{h.sentence_id}:{h.position:<4d} {left:>{args.width}} "
              f"[{w}] {right}")
    return 0


def model_device(model):
    return next(model.parameters()).device
