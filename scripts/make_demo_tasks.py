#!/usr/bin/env python
"""Build the built-in demo probe tasks (``resources/demo_tasks/``) from UD English EWT and SemCor.

Two tasks a first-time user can train in under a minute, each with a signal to find:

* ``pos/`` — part of speech (UD UPOS, 17 tags) of **every token** of a seeded sample of
  sentences of the UD English Web Treebank: train from EWT's train split, dev and test from its
  dev split (EWT's test split is not used).
* ``wsd/`` — word sense of frequent ambiguous SemCor nouns and verbs: lemmas whose senses each
  have at least ``MIN_PER_SENSE`` instances in SemCor (first gold key), at most ``PER_SENSE``
  instances of each such sense, split per sense into train / dev / test. One target token per
  sentence, labelled with its WordNet 3.0 sense key; the other tokens are context.
* ``supersense/`` — the same sentences and targets as ``wsd/``, labelled with the sense's
  lexicographer file (``noun.object``, ``verb.motion`` …).

``senses.tsv`` lists every WordNet sense of the chosen lemmas (sense number, supersense, gloss), so
the WSD task has candidates and a first-sense baseline without WordNet installed.

Sources (read from ``../shared/data``): ``ud_english_ewt/`` (CC BY-SA 4.0), ``semcor30/``
(Raganato et al.'s XML + keys; WordNet licence), ``wordnet30/`` (WordNet 3.0, NLTK zip).

    python scripts/make_demo_tasks.py [--data ../shared/data] [--out resources/demo_tasks]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elmo_engine.atomic import atomic_write_text
from elmo_engine.io.datasets.conllu import read_conllu
from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.io.datasets.tsv import write_tsv
from elmo_engine.io.datasets.wordnet import WordNet, supersense
from elmo_engine.io.datasets.wsd import read_wsd

SEED = 20261203
#: POS: sentences per split (train from EWT train; dev and test from EWT dev), 5-40 tokens long
POS_SIZES = {"train": 1200, "dev": 200, "test": 500}
#: WSD: a sense enters with this many SemCor instances; at most PER_SENSE of them are kept, of at
#: most SENSES_PER_LEMMA senses (the most frequent) of each lemma; LEMMAS nouns and verbs whose
#: two most frequent senses lie in different lexicographer files (coarse distinctions, as
#: between the senses of "bank"), the most frequent second senses first, light verbs left out
MIN_PER_SENSE, PER_SENSE, SENSES_PER_LEMMA = 30, 24, 3
LEMMAS = {"NOUN": 12, "VERB": 8}
LIGHT_VERBS = {"be", "have", "make", "do", "get", "go", "take", "become", "say", "come", "give"}
#: per sense, in percent of its instances: test, dev (the rest is train)
TEST_PCT, DEV_PCT = 25, 15
DATA_POS = {"NOUN": "noun", "VERB": "verb"}


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def build_pos(data: Path) -> Dict[str, List[LabelledSentence]]:
    ewt = data / "ud_english_ewt"
    rng = random.Random(SEED)

    def sample(path: Path, n: int, skip: int = 0) -> List[LabelledSentence]:
        sents = [s for s in read_conllu(path, label="upos") if 5 <= len(s) <= 40]
        rng.shuffle(sents)
        return sents[skip:skip + n]

    dev_pool = ewt / "en_ewt-ud-dev.conllu"
    out = {"train": sample(ewt / "en_ewt-ud-train.conllu.gz", POS_SIZES["train"])}
    rng.seed(SEED + 1)
    both = sample(dev_pool, POS_SIZES["dev"] + POS_SIZES["test"])
    out["dev"], out["test"] = both[:POS_SIZES["dev"]], both[POS_SIZES["dev"]:]
    for split, sents in out.items():
        out[split] = [LabelledSentence(s.tokens, s.labels,
                                       {"id": s.meta.get("sent_id", f"{split}-{i}")})
                      for i, s in enumerate(sents)]
    return out


def build_wsd(data: Path) -> Dict[str, List[dict]]:
    semcor = data / "semcor30"
    found: Dict[str, List[dict]] = defaultdict(list)
    for sent in read_wsd(semcor / "semcor.data.xml.gz", semcor / "semcor.gold.key.txt.gz"):
        for inst in sent.instances:
            if inst.pos in DATA_POS and inst.keys and inst.stop == inst.start + 1:
                found[f"{inst.lemma}#{inst.pos}"].append(
                    {"tokens": list(sent.tokens), "target": inst.start, "key": inst.keys[0],
                     "lemma": inst.lemma, "pos": inst.pos, "id": inst.id})
    ranked: Dict[str, list] = {"NOUN": [], "VERB": []}
    for lemma, items in found.items():
        word, pos = lemma.rsplit("#", 1)
        counts = Counter(it["key"] for it in items)
        senses = [k for k, c in counts.most_common() if c >= MIN_PER_SENSE][:SENSES_PER_LEMMA]
        if (len(senses) >= 2 and supersense(senses[0]) != supersense(senses[1])
                and word not in LIGHT_VERBS):
            ranked[pos].append((-counts[senses[1]], lemma, senses))
    chosen = [r for pos, n in LEMMAS.items() for r in sorted(ranked[pos])[:n]]
    rng = random.Random(SEED)
    out: Dict[str, List[dict]] = {"train": [], "dev": [], "test": []}
    for _, lemma, senses in chosen:
        for key in senses:
            items = sorted((it for it in found[lemma] if it["key"] == key),
                           key=lambda it: _hash(it["id"]))
            rng.shuffle(items)
            items = items[:PER_SENSE]
            n_test = round(len(items) * TEST_PCT / 100)
            n_dev = round(len(items) * DEV_PCT / 100)
            out["test"] += items[:n_test]
            out["dev"] += items[n_test:n_test + n_dev]
            out["train"] += items[n_test + n_dev:]
    for items in out.values():
        items.sort(key=lambda it: it["id"])
    return out


def glosses(wordnet_zip: Path) -> Dict[str, str]:
    """Synset offset (``n00001740``-style key: POS letter + offset) → definition."""
    out = {}
    with zipfile.ZipFile(wordnet_zip) as zf:
        for pos in DATA_POS.values():
            name = next(n for n in zf.namelist() if n.endswith(f"/data.{pos}"))
            for line in zf.read(name).decode("utf-8").splitlines():
                if line.startswith("  "):
                    continue
                head, _, gloss = line.partition(" | ")
                out[pos[0] + head.split()[0]] = gloss.split('; "', 1)[0].strip()
    return out


def sense_rows(wsd: Dict[str, List[dict]], wordnet_zip: Path) -> List[str]:
    wn = WordNet(wordnet_zip)
    offsets = {}
    with zipfile.ZipFile(wordnet_zip) as zf:
        name = next(n for n in zf.namelist() if n.endswith("/index.sense"))
        for line in zf.read(name).decode("utf-8").splitlines():
            f = line.split()
            if len(f) == 4:
                offsets[f[0]] = f[1]
    gl = glosses(wordnet_zip)
    rows = ["key\tlemma\tpos\tsense_number\tsupersense\tgloss"]
    lemmas = sorted({(it["lemma"], it["pos"]) for items in wsd.values() for it in items})
    for lemma, pos in lemmas:
        for number, key in enumerate(wn.candidates(lemma, pos), 1):
            gloss = gl.get(DATA_POS[pos][0] + offsets[key], "")
            rows.append(f"{key}\t{lemma}\t{pos}\t{number}\t{supersense(key)}\t{gloss}")
    return rows


def to_sentences(items: List[dict], label: str) -> List[LabelledSentence]:
    out = []
    for it in items:
        labels = [None] * len(it["tokens"])
        labels[it["target"]] = it["key"] if label == "key" else supersense(it["key"])
        out.append(LabelledSentence(tuple(it["tokens"]), tuple(labels),
                                    {"id": it["id"], "target": it["target"]}))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=REPO / "resources" / "demo_tasks")
    args = ap.parse_args(argv)
    wordnet_zip = args.data / "wordnet30" / "nltk_data" / "corpora" / "wordnet.zip"
    pos = build_pos(args.data)
    wsd = build_wsd(args.data)
    if args.out.exists():
        for sub in ("pos", "wsd", "supersense"):
            shutil.rmtree(args.out / sub, ignore_errors=True)
    counts: Dict[str, dict] = {"pos": {}, "wsd": {}, "supersense": {}}
    for split, sents in pos.items():
        write_tsv(sents, args.out / "pos" / f"{split}.tsv", meta_keys=["id"])
        counts["pos"][split] = {"sentences": len(sents),
                                "tokens": sum(len(s) for s in sents),
                                "labels": len({lab for s in sents for lab in s.labels})}
    for task, label in (("wsd", "key"), ("supersense", "supersense")):
        for split, items in wsd.items():
            sents = to_sentences(items, label)
            write_tsv(sents, args.out / task / f"{split}.tsv", meta_keys=["id", "target"])
            counts[task][split] = {"sentences": len(sents),
                                   "labels": len({s.labels[s.meta["target"]] for s in sents})}
    atomic_write_text(args.out / "senses.tsv", "\n".join(sense_rows(wsd, wordnet_zip)) + "\n")
    lemmas = Counter(f"{it['lemma']}#{it['pos']}" for items in wsd.values() for it in items)
    for src, dst in (("wordnet30/LICENSE", "LICENSE-WordNet"),
                     ("semcor30/LICENSE", "LICENSE-SemCor"),
                     ("ud_english_ewt/LICENSE.txt", "LICENSE-EWT-CC-BY-SA-4.0")):
        shutil.copyfile(args.data / src, args.out / dst)
    old = args.out / "LICENSE"
    if old.exists():
        old.unlink()
    summary = {"seed": SEED, "pos_sizes": POS_SIZES,
               "wsd": {"min_per_sense": MIN_PER_SENSE, "per_sense": PER_SENSE,
                       "senses_per_lemma": SENSES_PER_LEMMA, "lemmas_per_pos": LEMMAS,
                       "light_verbs_left_out": sorted(LIGHT_VERBS),
                       "test_pct": TEST_PCT, "dev_pct": DEV_PCT,
                       "lemmas": dict(sorted(lemmas.items()))},
               "counts": counts}
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=1) + "\n")
    for path in args.out.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    print(json.dumps(counts, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
