"""The filter atlas (issue 41): every filter's best n-grams over a 50,000-word vocabulary, exact
(every distinct max-pool window scored once), timed end to end: character ids, distinct windows,
the scoring GEMMs and the top-N per filter. Target: ≤ 30 s on 2 cores for the bundled model.

The vocabulary: the bundled model's ``vocab.txt`` (without ``<S>``, ``</S>``, ``<UNK>``), then the
reference corpus's word types not in it, then capitalised forms of the vocabulary's words, up to
``--words`` (deterministic); ``--vocab FILE`` reads one instead. ``--checkpoint`` times another
model (a published one: ``--checkpoint original`` once downloaded); ``--shape original`` times the
published Original's token layer (2,048 filters of widths 1–7, 16-dim characters, two highway
layers, projection to 512) with seeded random weights where the model is not downloaded: the
work (distinct windows, GEMMs, top-N) depends on the shapes and the vocabulary, not on the
weights' values.

    python benchmarks/bench_chars.py [--words 50000] [--top 10] [--threads 2] [--checkpoint C]
    python benchmarks/bench_chars.py --shape original
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostinfo  # noqa: F401  (the host line every benchmark prints)

from elmo_engine import runtime
from elmo_engine.analysis.characters.atlas import Atlas
from elmo_engine.analysis.characters.windows import filters_of
from elmo_engine.analysis.characters.word_lab import (Vocabulary, read_vocabulary,
                                                      reference_words)
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.resources import demo_checkpoint_path


def vocabulary(n: int) -> list:
    """``n`` distinct words: the demo vocabulary, the reference corpus's types, capitalised
    forms (see the module's docstring)."""
    words = dict.fromkeys(read_vocabulary(demo_checkpoint_path() / "vocab.txt"))
    for w in reference_words():
        words.setdefault(w, None)
    base = list(words)
    for form in (str.capitalize, str.upper, lambda w: w + "s"):
        for w in base:
            if len(words) >= n:
                break
            words.setdefault(form(w), None)
    return list(words)[:n]


def original_shape():
    """A CharCNN of the published Original's shape, seeded random weights."""
    import torch

    from elmo_engine.model.char_cnn import CharCNN
    from elmo_engine.model.options import BiLMOptions

    opts = BiLMOptions(filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512),
                                (7, 1024)), n_highway=2, projection_dim=512)
    cnn = CharCNN(opts)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in cnn.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    return cnn.eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=50_000)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=Path, default=None)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--shape", choices=["original"], default=None)
    args = ap.parse_args()
    runtime.configure(threads=args.threads)
    print(hostinfo.host_line())
    if args.shape == "original":
        cnn = original_shape()
        path = "the published Original's token layer, seeded random weights"
    else:
        path = demo_checkpoint_path() if args.checkpoint is None else args.checkpoint
        cnn = load_checkpoint(path).char_cnn
    filters = filters_of(cnn)
    words = read_vocabulary(args.vocab) if args.vocab else vocabulary(args.words)
    widths = ", ".join(f"{b[0]}×{int(b[2].shape[0])}" for b in filters.banks)
    print(f"model: {path} ({filters.n_filters} filters: width×count {widths}); "
          f"vocabulary: {len(words):,} words")
    t = time.perf_counter()
    atlas = Atlas.build(filters, words, top=args.top)
    build = time.perf_counter() - t
    windows = sum(len(tb.windows) for tb in atlas.tables)
    print(f"filter atlas: {build:.2f} s ({windows:,} distinct windows scored, top {args.top} "
          f"per filter)")
    t = time.perf_counter()
    Vocabulary.from_words(filters, words, char_cnn=cnn)
    print(f"layer-0 vectors of the vocabulary (the word lab's neighbours; the model's token layer): "
          f"{time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
