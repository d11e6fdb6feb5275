"""Build ``resources/reference_corpus/word_senses.tsv``: every SemCor 3.0 sentence in which a demo
word ("bank", "play", "light", "book", "bat") is sense-tagged as that very word form, with the
sense and every token's part of speech, so that the projection view can colour the reference
points of a demo word by sense and by part of speech.

Source: ``semcor30/semcor.data.xml.gz`` + ``semcor.gold.key.txt.gz`` of ``../shared/data``
(Raganato et al.'s unified format of SemCor 3.0; Princeton WordNet/SemCor licence, see its
SOURCES.md and ``resources/demo_tasks/LICENSE-SemCor``).

* **sense**: WordNet 3.0 sense keys are named by :data:`SENSE_NAMES`, whose names are the demo
  sentences' group names where the sense is the same ("bank%1:17:01::" sloping land → "river",
  as ``resources/demo_sentences.tsv``'s "bank: river"), so one sense has one colour in every
  colouring mode; a key not in the table is "other". An instance with several gold keys takes the
  first.
* **upos**: SemCor's 12-tag universal tags (Petrov et al. 2012) renamed to their UD UPOS
  equivalents (``CONJ`` → ``CCONJ``, ``PRT`` → ``PART``, ``.`` → ``PUNCT``); the words of a
  multiword instance ("river bank") each take the instance's tag.
* **tokens**: SemCor's words (multiword instances split at spaces), joined by single spaces.

Output: ``word<TAB>sense<TAB>sense_key<TAB>target<TAB>tokens<TAB>upos`` lines (``target``: the
0-based index of the tagged token), sorted by word (in :data:`WORDS` order) then by instance id;
a rerun gives a byte-identical file.

    python scripts/make_word_senses.py [--shared ../shared/data]
"""
from __future__ import annotations

import argparse
import gzip
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
WORDS = ("bank", "play", "light", "book", "bat")
OUT = REPO / "resources" / "reference_corpus" / "word_senses.tsv"
UPOS = {"CONJ": "CCONJ", "PRT": "PART", ".": "PUNCT"}

#: WordNet 3.0 sense key (without the lemma) → the name shown; the demo sentences' names first
SENSE_NAMES: Dict[str, Dict[str, str]] = {
    "bank": {"1:17:01::": "river", "1:14:00::": "money", "1:17:00::": "ridge",
             "1:14:01::": "row", "2:35:00::": "enclose (verb)", "2:38:00::": "tilt (verb)"},
    "play": {"1:10:01::": "theatre", "1:10:03::": "theatre", "2:33:00::": "game",
             "2:36:01::": "instrument", "2:36:12::": "instrument", "2:36:00::": "instrument",
             "2:36:02::": "act a role (verb)", "2:41:03::": "amuse oneself (verb)",
             "2:41:12::": "have an effect (verb)", "1:04:04::": "move in a game",
             "1:04:05::": "move in a game"},
    "light": {"1:06:00::": "lamp", "3:00:01::": "weight", "1:19:00::": "illumination",
              "1:07:00::": "illumination", "1:07:01::": "illumination",
              "1:15:00::": "illumination", "1:09:01::": "aspect",
              "2:30:00::": "brighten (verb)", "2:34:00::": "ignite (verb)"},
    "book": {"1:06:00::": "volume", "1:10:00::": "volume", "2:41:01::": "reserve",
             "2:31:00::": "engage (verb)", "2:41:00::": "charge (verb)"},
    "bat": {"1:05:00::": "animal", "2:35:01::": "strike (verb)", "1:04:00::": "turn at bat",
            "2:29:00::": "wink (verb)"},
}


def read_keys(path: Path) -> Dict[str, str]:
    """Instance id → its first gold sense key."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {f[0]: f[1] for f in (line.split() for line in fh) if len(f) >= 2}


def rows(xml: Path, keys: Dict[str, str]) -> List[Tuple[str, str, str, int, str, str, str]]:
    """``(word, sense, key, target, tokens, upos, instance id)`` per tagged demo word form."""
    out = []
    with gzip.open(xml, "rb") as fh:
        for _ev, el in ET.iterparse(fh):
            if el.tag != "sentence":
                continue
            toks: List[str] = []
            tags: List[str] = []
            hits = []
            for w in el:
                parts = (w.text or "").split()
                tag = UPOS.get(w.get("pos", "X"), w.get("pos", "X"))
                lemma = w.get("lemma", "")
                if (w.tag == "instance" and lemma in WORDS and len(parts) == 1
                        and parts[0].casefold() == lemma and w.get("id") in keys):
                    hits.append((lemma, len(toks), w.get("id")))
                toks += parts
                tags += [tag] * len(parts)
            for lemma, target, iid in hits:
                key = keys[iid]
                name = SENSE_NAMES[lemma].get(key.partition("%")[2], "other")
                out.append((lemma, name, key, target, " ".join(toks), " ".join(tags), iid))
            el.clear()
    out.sort(key=lambda r: (WORDS.index(r[0]), r[6]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = ap.parse_args(argv)
    folder = args.shared / "semcor30"
    found = rows(folder / "semcor.data.xml.gz", read_keys(folder / "semcor.gold.key.txt.gz"))
    head = ("# word<TAB>sense<TAB>sense_key<TAB>target<TAB>tokens<TAB>upos: SemCor 3.0 sentences "
            "of the demo words (scripts/make_word_senses.py)\n")
    OUT.write_text(head + "".join(f"{w}\t{n}\t{k}\t{t}\t{s}\t{u}\n"
                                  for w, n, k, t, s, u, _i in found), encoding="utf-8")
    for word in WORDS:
        got = [r[1] for r in found if r[0] == word]
        names = sorted(set(got), key=lambda n: -got.count(n))
        print(f"{word}: {len(got)} ({', '.join(f'{n} {got.count(n)}' for n in names)})",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
