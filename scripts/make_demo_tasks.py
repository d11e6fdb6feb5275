#!/usr/bin/env python
"""Build the built-in demo probe tasks (resources/demo_tasks/) from WordNet 3.0's gloss examples.

Source: Princeton WordNet 3.0 as packaged by Debian (``apt-get install wordnet-base``; files in
``/usr/share/wordnet``: ``data.*``, ``index.*``, ``*.exc``). For each polysemous word in
:data:`WORDS`, each of its senses (synsets) in WordNet's sense order and each quoted example in the
synset's gloss, the example is tokenized with the engine's tokenizer and the first token whose
base form (WordNet's morphy: exception lists + suffix rules) is the word becomes the target. That
one token is labelled, every other token gets ``_`` (context only):

* ``pos/``        — the target's part of speech, as a UD UPOS tag (NOUN, VERB, ADJ, ADV);
* ``wsd/``        — its WordNet 3.0 sense key (``bank%1:17:01::``);
* ``supersense/`` — its lexicographer file (``noun.object``).

The three tasks share the same sentences and the same deterministic train/dev/test split (see
:func:`assign_splits`). ``senses.tsv`` lists the senses of every demo word (sense number, supersense,
gloss), so the WSD demo has candidates and a first-sense baseline without WordNet installed.

Usage::

    python scripts/make_demo_tasks.py [--wordnet /usr/share/wordnet] [--out resources/demo_tasks]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elmo_engine.atomic import atomic_write_text  # noqa: E402
from elmo_engine.io.datasets.records import LabelledSentence  # noqa: E402
from elmo_engine.io.datasets.tsv import write_tsv  # noqa: E402
from elmo_engine.io.datasets.wordnet import LEXNAMES  # noqa: E402
from elmo_engine.model.tokenize import tokenize  # noqa: E402

#: the polysemous words of the demo (each has senses in two or more parts of speech, or many senses)
WORDS = (
    "bank", "bass", "bat", "bear", "bow", "break", "case", "cell", "change", "charge", "clear",
    "close", "court", "crane", "current", "cut", "date", "deep", "draw", "dry", "fair", "fall",
    "fast", "file", "fire", "fly", "free", "hard", "head", "hold", "iron", "key", "lead", "leave",
    "letter", "light", "line", "match", "mine", "note", "order", "park", "party", "pitch", "plant",
    "play", "point", "pool", "post", "present", "press", "range", "record", "rest", "right", "ring",
    "rock", "rule", "run", "scale", "seal", "set", "sharp", "show", "sound", "space", "spring",
    "stand", "star", "state", "stick", "strike", "suit", "table", "tie", "top", "train", "turn",
    "watch", "wave", "well", "work",
    "act", "air", "ball", "bar", "base", "bill", "block", "board", "call", "carry", "catch",
    "check", "class", "club", "cover", "cross", "deal", "drop", "face", "field", "figure", "form",
    "game", "ground", "hand", "land", "mark", "pass", "pick", "place", "plate", "power", "pull",
    "raise", "return", "round", "serve", "sign", "spot", "square", "stock", "term", "trip",
    "view", "will", "wind",
)
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
SS_TYPE_NUM = {"n": "1", "v": "2", "a": "3", "r": "4", "s": "5"}
UPOS = {"n": "NOUN", "v": "VERB", "a": "ADJ", "s": "ADJ", "r": "ADV"}
MORPHY_RULES = {
    "n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
          ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}
#: split of a sense's 2nd, 3rd … examples, in percent (test, dev; the rest is train); a sense's
#: first example (in hash order) always goes to train, so every dev/test sense is seen in training
TEST_PCT, DEV_PCT = 50, 25


class Synset:
    """One line of a WNDB ``data.<pos>`` file (the parts the demo needs)."""

    def __init__(self, line: str) -> None:
        head, _, gloss = line.partition(" | ")
        f = head.split()
        self.offset, self.lex_filenum, self.ss_type = f[0], int(f[1]), f[2]
        n_words = int(f[3], 16)
        self.words: List[Tuple[str, int]] = []
        i = 4
        for _ in range(n_words):
            word = re.sub(r"\((a|p|ip)\)$", "", f[i])
            self.words.append((word, int(f[i + 1], 16)))
            i += 2
        n_ptr = int(f[i])
        i += 1
        self.similar_to: Optional[str] = None
        for _ in range(n_ptr):
            if f[i] == "&" and self.similar_to is None:
                self.similar_to = f[i + 1]
            i += 4
        self.gloss = gloss.strip()

    def definition(self) -> str:
        return self.gloss.split('; "', 1)[0].strip()

    def examples(self) -> List[str]:
        return [m.strip() for m in re.findall(r'"([^"]+)"', self.gloss) if m.strip()]


def load_data(wn: Path, pos: str) -> Dict[str, Synset]:
    out: Dict[str, Synset] = {}
    with open(wn / f"data.{POS_FILES[pos]}", encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("  "):
                syn = Synset(line)
                out[syn.offset] = syn
    return out


def load_index(wn: Path, pos: str) -> Dict[str, List[str]]:
    """lemma -> synset offsets in sense-number order."""
    out: Dict[str, List[str]] = {}
    with open(wn / f"index.{POS_FILES[pos]}", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("  "):
                continue
            f = line.split()
            n_synsets, n_ptr = int(f[2]), int(f[3])
            out[f[0]] = f[4 + n_ptr + 2:4 + n_ptr + 2 + n_synsets]
    return out


def load_exceptions(wn: Path, pos: str) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = defaultdict(list)
    with open(wn / f"{POS_FILES[pos]}.exc", encoding="utf-8") as fh:
        for line in fh:
            f = line.split()
            out[f[0]].extend(f[1:])
    return out


def base_forms(word: str, pos: str, exc: Dict[str, List[str]]) -> set:
    """Possible base forms of an inflected ``word`` (WordNet morphy, plus doubled consonants)."""
    w = word.lower()
    forms = {w, *exc.get(w, ())}
    for suffix, ending in MORPHY_RULES[pos]:
        if w.endswith(suffix) and len(w) > len(suffix):
            stem = w[: len(w) - len(suffix)] + ending
            forms.add(stem)
            if ending == "" and len(stem) > 2 and stem[-1] == stem[-2]:
                forms.add(stem[:-1])  # running -> runn -> run
    return forms


def sense_key(lemma: str, syn: Synset, lex_id: int, data: Dict[str, Synset]) -> str:
    head = ""
    if syn.ss_type == "s":
        target = data[syn.similar_to]
        word, head_id = target.words[0]
        head = f"{word.lower()}:{head_id:02d}"
    else:
        head = ":"
    return f"{lemma}%{SS_TYPE_NUM[syn.ss_type]}:{syn.lex_filenum:02d}:{lex_id:02d}:{head}"


def example_hash(key: str, sentence: str) -> int:
    """A stable 32-bit hash of one example (its sense key and text)."""
    return int(hashlib.sha256(f"{key}\t{sentence}".encode("utf-8")).hexdigest()[:8], 16)


def assign_splits(examples: List[dict]) -> Dict[str, List[dict]]:
    """Deterministic, sense-stratified split.

    The examples of each sense are ordered by :func:`example_hash`; the first goes to train (so a
    sense in dev or test always has a training example); each later one goes to test, dev or train
    by its hash modulo 100 (``TEST_PCT`` / ``DEV_PCT`` / the rest). Within a split, examples keep
    the build order (word list order, then sense number).
    """
    by_key: Dict[str, List[dict]] = defaultdict(list)
    for ex in examples:
        by_key[ex["key"]].append(ex)
    split_of: Dict[str, str] = {}
    for exs in by_key.values():
        ranked = sorted(exs, key=lambda e: (example_hash(e["key"], e["text"]), e["text"]))
        for i, ex in enumerate(ranked):
            bucket = example_hash(ex["key"], ex["text"]) % 100
            split_of[ex["id"]] = ("train" if i == 0 else "test" if bucket < TEST_PCT
                                  else "dev" if bucket < TEST_PCT + DEV_PCT else "train")
    out: Dict[str, List[dict]] = {"train": [], "dev": [], "test": []}
    for ex in examples:
        out[split_of[ex["id"]]].append(ex)
    return out


def build(wn: Path) -> Tuple[Dict[str, List[dict]], List[dict], Counter]:
    """The examples (by split) and the sense inventory of the demo words."""
    data = {p: load_data(wn, p) for p in POS_FILES}
    index = {p: load_index(wn, p) for p in POS_FILES}
    exc = {p: load_exceptions(wn, p) for p in POS_FILES}
    examples: List[dict] = []
    senses: List[dict] = []
    stats: Counter = Counter()
    seen = set()
    for lemma in WORDS:
        for pos in POS_FILES:
            for number, offset in enumerate(index[pos].get(lemma, ()), 1):
                syn = data[pos][offset]
                lex_ids = [lid for w, lid in syn.words if w.lower() == lemma]
                if not lex_ids:
                    raise SystemExit(f"{lemma} not among the words of synset {offset} ({pos})")
                key = sense_key(lemma, syn, lex_ids[0], data[pos])
                lexname = LEXNAMES[syn.lex_filenum]
                senses.append({"key": key, "lemma": lemma, "pos": UPOS[syn.ss_type],
                               "number": number, "supersense": lexname,
                               "gloss": syn.definition()})
                for text in syn.examples():
                    stats["examples"] += 1
                    tokens = tokenize(text)
                    hits = [i for i, t in enumerate(tokens) if lemma in base_forms(t, pos, exc[pos])]
                    if not hits or (text, key) in seen:
                        stats["skipped (word not in example)" if not hits else "duplicates"] += 1
                        continue
                    seen.add((text, key))
                    examples.append({
                        "id": f"{lemma}.{example_hash(key, text):08x}", "text": text,
                        "tokens": tokens, "target": hits[0],
                        "upos": UPOS[syn.ss_type], "key": key, "supersense": lexname,
                        "lemma": lemma, "sense_number": number})
                    stats["kept"] += 1
    return assign_splits(examples), senses, stats


def to_sentences(examples: List[dict], field: str) -> List[LabelledSentence]:
    out = []
    for ex in examples:
        labels = [None] * len(ex["tokens"])
        labels[ex["target"]] = ex[field]
        out.append(LabelledSentence(tuple(ex["tokens"]), tuple(labels),
                                    {"id": ex["id"], "target": ex["target"]}))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"),
                    help="folder of WordNet 3.0 WNDB files (Debian wordnet-base)")
    ap.add_argument("--license", type=Path,
                    default=Path("/usr/share/doc/wordnet-base/copyright"),
                    help="Debian copyright file holding the WordNet 3.0 licence")
    ap.add_argument("--out", type=Path, default=REPO / "resources" / "demo_tasks")
    args = ap.parse_args(argv)

    examples, senses, stats = build(args.wordnet)
    counts: Dict[str, dict] = {}
    for task, field in (("pos", "upos"), ("wsd", "key"), ("supersense", "supersense")):
        counts[task] = {}
        for split, exs in examples.items():
            write_tsv(to_sentences(exs, field), args.out / task / f"{split}.tsv",
                      meta_keys=["id", "target"])
            counts[task][split] = {"sentences": len(exs),
                                   "labels": len({ex[field] for ex in exs})}
    lines = ["key\tlemma\tpos\tsense_number\tsupersense\tgloss"]
    lines += [f"{s['key']}\t{s['lemma']}\t{s['pos']}\t{s['number']}\t{s['supersense']}\t"
              f"{s['gloss']}" for s in senses]
    atomic_write_text(args.out / "senses.tsv", "\n".join(lines) + "\n")
    atomic_write_text(args.out / "LICENSE", _wordnet_license(args.license))
    summary = {"words": list(WORDS), "senses": len(senses), "examples_seen": stats["examples"],
               "examples_kept": stats["kept"], "skipped": {k: v for k, v in stats.items()
                                                           if k not in ("examples", "kept")},
               "split": "per sense: first example (hash order) to train; later ones "
                        f"{TEST_PCT}% test, {DEV_PCT}% dev, {100 - TEST_PCT - DEV_PCT}% train",
               "counts": counts}
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=1) + "\n")
    for path in args.out.rglob("*"):
        if path.is_file():
            path.chmod(0o644)  # the atomic writer makes 0600 temp files; these are shipped data
    print(json.dumps({k: v for k, v in summary.items() if k != "words"}, indent=1))
    return 0


def _wordnet_license(copyright_file: Path) -> str:
    """The WordNet 3.0 licence paragraph of Debian's copyright file, as plain text."""
    text = copyright_file.read_text("utf-8")
    m = re.search(r"^License: WordNet3\.0\n((?: .*\n)+)", text, re.M)
    if m is None:
        raise SystemExit(f"no 'License: WordNet3.0' section in {copyright_file}")
    body = [ln[1:] for ln in m.group(1).splitlines()]
    body = ["" if ln == "." else ln for ln in body]
    return ("WordNet 3.0 licence (from Debian's wordnet-base package, "
            f"{copyright_file})\n\n" + "\n".join(body) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
