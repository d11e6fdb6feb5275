"""Build ``resources/reference_corpus/word_contexts.tsv``: a few hundred sentences for each demo
word ("bank", "play", "light", "book", "bat"), mined deterministically from the training splits
of two corpora in ``../shared/data`` (see its SOURCES.md):

* ``pd_fiction/train.txt.gz`` — novels in the US public domain (Standard Ebooks, CC0 for their
  own work); chapters by authors who died less than 70 years ago are left out;
* ``openstax_prose/train.txt.gz`` — OpenStax textbooks, CC BY 4.0 (attribution in the folder's
  README).

The projection view shows the current word's occurrences in these sentences (with the typed
sentences highlighted). Each paragraph is split into sentences and filtered exactly as
``scripts/make_reference_corpus.py`` does; a sentence is a candidate for a word when the
tokenizer gives it that word as a token (lower case). Per word and source the candidates with
the smallest SHA-256 of their text are kept (``PER_WORD_SOURCE``), so a rerun gives a
byte-identical file. Output: ``word<TAB>source<TAB>sentence`` lines, sorted by word, then hash.

    python scripts/make_word_contexts.py [--shared ../shared/data]
"""
from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path
from typing import Dict, Iterator, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_reference_corpus as ref

from elmo_engine.model.tokenize import tokenize

WORDS = ("bank", "play", "light", "book", "bat")
PER_WORD_SOURCE = 200
OUT = ref.REPO / "resources" / "reference_corpus" / "word_contexts.tsv"


def _lines(path: Path) -> Iterator[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            yield line.rstrip("\n")


def paragraphs(path: Path, fiction: bool) -> Iterator[str]:
    author = ""
    for line in _lines(path):
        if line.startswith("= ") and line.endswith(" ="):
            body = line[2:-2]
            if fiction and not body.endswith(".xhtml"):
                author = body.split(" :: ")[0]
            continue
        if line.strip() and not (fiction and author in ref.EXCLUDED_AUTHORS):
            yield line.strip()


def mine(path: Path, fiction: bool) -> Dict[str, List[str]]:
    found: Dict[str, set] = {w: set() for w in WORDS}
    for para in paragraphs(path, fiction):
        low = para.lower()
        if not any(w in low for w in WORDS):
            continue
        for s in ref.split_sentences(para):
            toks = {t.lower() for t in tokenize(s)}
            hits = [w for w in WORDS if w in toks]
            if hits and ref.usable(s):
                for w in hits:
                    found[w].add(s)
    return {w: sorted(c, key=ref._key)[:PER_WORD_SOURCE] for w, c in found.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=ref.REPO.parent / "shared" / "data")
    args = ap.parse_args(argv)
    rows = []
    for name, fiction in (("pd_fiction", True), ("openstax_prose", False)):
        for word, sents in mine(args.shared / name / "train.txt.gz", fiction).items():
            rows += [(word, name, s) for s in sents]
    rows.sort(key=lambda r: (WORDS.index(r[0]), ref._key(r[2])))
    OUT.write_text("".join(f"{w}\t{src}\t{s}\n" for w, src, s in rows), encoding="utf-8")
    for w in WORDS:
        print(f"{w}: {sum(r[0] == w for r in rows)} sentences", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
