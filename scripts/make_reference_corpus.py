#!/usr/bin/env python
"""Build the shipped reference corpus (resources/reference_corpus/) for ``elmo-explorer layers``.

Sources: the dev ("valid") splits of two corpora in ``../shared/data`` (see its SOURCES.md):

* ``pd_fiction/valid.txt`` — US-public-domain novels from Standard Ebooks (Standard Ebooks' own
  work CC0 1.0). Chapters of authors who died less than 70 years ago (W. Somerset Maugham,
  E. M. Forster, P. G. Wodehouse) are left out, so the shipped text is public domain in
  life + 70 countries too;
* ``openstax_prose/valid.txt`` — OpenStax textbook prose, CC BY 4.0 (attribution in the README).

Neither split was used to train the bundled demo model. Every paragraph is split into sentences
(a full stop, question or exclamation mark, optionally followed by closing quotes or brackets,
then a space and a capital letter or an opening quote; not after common abbreviations). A
sentence is kept if the engine's tokenizer gives 6–40 tokens, it has no digits-only majority and
it is not a repeat. From each source :data:`PER_SOURCE` sentences are taken in the order of the
SHA-256 of their text (a fixed pseudo-random choice that does not depend on Python's random
module), and the two sets are written interleaved in that same hash order, one sentence a line.
Rerunning gives a byte-identical ``sentences.txt`` and ``README.md``.

Usage::

    python scripts/make_reference_corpus.py [--shared ../shared] [--out resources/reference_corpus]
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator, List, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elmo_engine.model.tokenize import tokenize

PER_SOURCE = 2000
MIN_TOKENS, MAX_TOKENS = 6, 40
EXCLUDED_AUTHORS = ("W. Somerset Maugham", "E. M. Forster", "P. G. Wodehouse")
_ABBREV = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Rev|Gen|Col|Capt|Lt|vs|etc|viz|cf|"
                     r"No|Vol|Fig|ca|approx|i\.e|e\.g|U\.S|U\.K)|\b[A-Z])\.$")
_BOUNDARY = re.compile(r"[.!?][\"”’')\]]*(?=\s+[\"“‘'(\[]?[A-Z])")

OPENSTAX_ATTRIBUTION = (
    "Contains text adapted from OpenStax textbooks (U.S. History; American Government 4e; "
    "Introduction to Sociology 3e; Psychology 2e; Introduction to Political Science; World "
    "History Volumes 1 and 2; Principles of Economics 3e; Introduction to Anthropology; Biology "
    "2e; Microbiology; Anatomy and Physiology 2e; Astronomy 2e; Chemistry 2e; Chemistry: Atoms "
    "First 2e; Physics; College Physics 2e; College Physics for AP Courses 2e; University Physics "
    "Volumes 1–3; Introduction to Business 2e; Principles of Management; Organizational Behavior; "
    "Principles of Marketing; Entrepreneurship; Business Ethics; Principles of Finance; "
    "Introduction to Intellectual Property; Workplace Software and Skills; Introduction to "
    "Philosophy; Writing Guide with Handbook; College Success; College Success Concise; Preparing "
    "for College Success; Nutrition for Nurses; Pharmacology for Nurses; Population Health for "
    "Nurses; Contemporary Mathematics; Life, Liberty, and the Pursuit of Happiness), © Rice "
    "University, https://openstax.org, licensed under CC BY 4.0; and from Concepts of Biology (a "
    "cnx.org derived copy by Robert Bear and Eve McCulloch, CC BY 4.0). Changes: prose paragraphs "
    "extracted; figures, tables, exercises, math and references removed; split into sentences "
    "and a sample of them selected (scripts/make_reference_corpus.py).")


def split_sentences(paragraph: str) -> List[str]:
    """A paragraph → sentences, at sentence-final punctuation not ending an abbreviation."""
    out, start = [], 0
    for m in _BOUNDARY.finditer(paragraph):
        end = m.end()
        head = paragraph[start:end].rstrip("\"”’')]")
        if _ABBREV.search(head):
            continue
        out.append(paragraph[start:end].strip())
        start = end
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def fiction_paragraphs(path: Path) -> Iterator[str]:
    author = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("= ") and line.endswith(" ="):
            body = line[2:-2]
            if not body.endswith(".xhtml"):
                author = body.split(" :: ")[0]
            continue
        if line.strip() and author not in EXCLUDED_AUTHORS:
            yield line.strip()


def textbook_paragraphs(path: Path) -> Iterator[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("= ") and line.endswith(" ="):
            continue
        if line.strip():
            yield line.strip()


def usable(sentence: str) -> bool:
    toks = tokenize(sentence)
    if not MIN_TOKENS <= len(toks) <= MAX_TOKENS:
        return False
    digits = sum(t[0].isdigit() for t in toks)
    return digits * 2 < len(toks)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pick(paragraphs: Iterator[str], n: int) -> List[str]:
    seen, cands = set(), []
    for para in paragraphs:
        for s in split_sentences(para):
            if s not in seen and usable(s):
                seen.add(s)
                cands.append(s)
    if len(cands) < n:
        raise SystemExit(f"only {len(cands)} usable sentences, {n} wanted")
    return sorted(cands, key=_key)[:n]


def stats(sentences: List[str]) -> Tuple[int, int, int, int]:
    counts = Counter(t for s in sentences for t in tokenize(s))
    tokens = sum(counts.values())
    frequent = [w for w, c in counts.items() if c >= 5]
    covered = sum(counts[w] for w in frequent)
    return tokens, len(counts), len(frequent), covered


README = """# Reference corpus for `elmo-explorer layers`

`sentences.txt`: {n} English sentences, one a line, typed text (UTF-8; not tokenized — the
`layers` command tokenizes it with the engine's tokenizer). It is what `elmo-explorer layers`
analyses when no corpus is given, and gives every layer measure enough repeated words:

| | count |
| --- | --- |
| sentences | {n} ({per} narrative fiction, {per} textbook prose, interleaved) |
| tokens (engine tokenizer) | {tokens} |
| word types | {types} |
| word types with ≥ 5 occurrences (the contextuality measures' rule) | {frequent}, covering
{covered} tokens ({share:.0f} %) |

## Sources and licences

* **Narrative fiction** — {per} sentences from `pd_fiction/valid.txt` of the project's shared data
  (see `../shared/data/SOURCES.md`): novels first published 1813–1925, from Standard Ebooks
  (https://standardebooks.org/). The texts are in the US public domain; Standard Ebooks' own work
  is dedicated to the public domain under CC0 1.0 (`LICENSE-CC0-pd_fiction.txt`). Courtesy
  credit: Standard Ebooks (standardebooks.org). Chapters by authors who died less than 70 years
  ago ({excluded}) were left out, so this text is in the public domain outside the US as well.
* **Textbook prose** — {per} sentences from `openstax_prose/valid.txt` (CC BY 4.0,
  `LICENSE-CC-BY-4.0.txt`). Attribution: {attribution}

Neither file was part of the bundled demo model's training data (both are the dev splits).

## How it was made

`python scripts/make_reference_corpus.py` (deterministic; a rerun gives byte-identical files):
each paragraph is split into sentences (at `.`, `?` or `!`, optionally followed by closing quotes
or brackets, then a space and a capital letter or an opening quote; not after common
abbreviations such as "Mr." or "e.g."); a sentence is kept if the tokenizer gives it
{min_tok}–{max_tok} tokens, fewer than half of them start with a digit, and it is not a repeat;
from each source the {per} sentences with the smallest SHA-256 of their text are taken, and both
sets are written together in that hash order.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--out", type=Path, default=REPO / "resources" / "reference_corpus")
    args = ap.parse_args(argv)
    data = args.shared / "data"
    fiction = pick(fiction_paragraphs(data / "pd_fiction" / "valid.txt"), PER_SOURCE)
    textbook = pick(textbook_paragraphs(data / "openstax_prose" / "valid.txt"), PER_SOURCE)
    sentences = sorted(fiction + textbook, key=_key)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    shutil.copyfile(data / "openstax_prose" / "LICENSE-CC-BY-4.0.txt",
                    args.out / "LICENSE-CC-BY-4.0.txt")
    shutil.copyfile(data / "pd_fiction" / "LICENSE.txt", args.out / "LICENSE-CC0-pd_fiction.txt")
    tokens, types, frequent, covered = stats(sentences)
    (args.out / "README.md").write_text(README.format(
        n=len(sentences), per=PER_SOURCE, tokens=f"{tokens:,}", types=f"{types:,}",
        frequent=f"{frequent:,}", covered=f"{covered:,}", share=100.0 * covered / tokens,
        excluded=", ".join(EXCLUDED_AUTHORS), attribution=OPENSTAX_ATTRIBUTION,
        min_tok=MIN_TOKENS, max_tok=MAX_TOKENS), encoding="utf-8")
    print(f"wrote {len(sentences)} sentences ({tokens} tokens, {frequent} words with >= 5 "
          f"occurrences) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
