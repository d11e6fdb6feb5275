"""The built-in demo probe tasks (resources/demo_tasks) and the script that makes them."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from elmo_engine.io.datasets import (
                                     DEMO_TASKS,
                                     SPLITS,
                                     WordNet,
                                     demo_candidates,
                                     demo_first_sense,
                                     demo_senses,
                                     demo_tasks_dir,
                                     load_demo_task,
                                     load_demo_wsd,
                                     )
from elmo_engine.io.datasets.wordnet import (
                                             LEXNAMES,
                                             default_wordnet,
                                             default_wordnet_path,
                                             parse_sense_key,
                                             )
from elmo_engine.errors import InputError

from support import DATA, REPO, need

WN_ZIP = DATA / "wordnet30" / "nltk_data" / "corpora" / "wordnet.zip"
POS_SIZES = {"train": 1200, "dev": 200, "test": 500}
WSD_SIZES = {"train": 672, "dev": 192, "test": 288}
UPOS = {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON",
        "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X"}


@pytest.fixture(scope="module")
def tasks():
    return {t: {s: load_demo_task(t, s) for s in SPLITS} for t in DEMO_TASKS}


def test_files_licences_and_size():
    root = demo_tasks_dir()
    assert root == REPO / "resources" / "demo_tasks"
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert total < 2_000_000
    wn = (root / "LICENSE-WordNet").read_text("utf-8")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in wn
    assert "Attribution-ShareAlike 4.0" in (root / "LICENSE-EWT-CC-BY-SA-4.0").read_text("utf-8")
    assert (root / "LICENSE-SemCor").read_text("utf-8").strip()
    assert "README.md" in {p.name for p in root.iterdir()}


def test_pos_labels_every_token_with_upos(tasks):
    summary = json.loads((demo_tasks_dir() / "summary.json").read_text("utf-8"))
    for split in SPLITS:
        sents = tasks["pos"][split]
        assert len(sents) == POS_SIZES[split] == summary["counts"]["pos"][split]["sentences"]
        assert all(all(lab is not None for lab in s.labels) for s in sents)
        assert all(5 <= len(s) <= 40 for s in sents)
        assert sum(len(s) for s in sents) == summary["counts"]["pos"][split]["tokens"]
    train = Counter(lab for s in tasks["pos"]["train"] for lab in s.labels)
    assert set(train) <= UPOS and len(train) >= 15
    assert train["NOUN"] > train["VERB"] > train["ADV"] > 0
    ids = [s.meta["id"] for sp in SPLITS for s in tasks["pos"][sp]]
    assert len(ids) == len(set(ids))                 # no sentence in two splits


def test_wsd_and_supersense_share_targets(tasks):
    senses = demo_senses()
    summary = json.loads((demo_tasks_dir() / "summary.json").read_text("utf-8"))
    for split in SPLITS:
        assert len(tasks["wsd"][split]) == WSD_SIZES[split]
        for w, s in zip(tasks["wsd"][split], tasks["supersense"][split]):
            assert w.tokens == s.tokens and w.meta["id"] == s.meta["id"]
            (i, key), = w.targets()                    # exactly one target per sentence
            (j, lex), = s.targets()
            assert i == j == int(w.meta["target"])
            assert senses[key].supersense == lex and lex in LEXNAMES
    lemmas = Counter()
    for sp in SPLITS:
        for w in tasks["wsd"][sp]:
            key = w.targets()[0][1]
            lemmas[(senses[key].lemma, senses[key].pos, key)] += 1
    per_lemma = Counter()
    for (lemma, pos, key), n in lemmas.items():
        assert n == 24                                 # balanced senses, 24 instances each
        per_lemma[f"{lemma}#{pos}"] += 1
    assert len(per_lemma) == 20 and set(per_lemma.values()) <= {2, 3}
    assert {k: 24 * v for k, v in per_lemma.items()} == summary["wsd"]["lemmas"]
    assert sum(per_lemma.values()) == summary["counts"]["wsd"]["train"]["labels"] == 48


def test_wsd_demo_records_and_inventory(tasks):
    train_keys = {s.targets()[0][1] for s in tasks["wsd"]["train"]}
    for split in SPLITS:
        wsd = load_demo_wsd(split)
        assert len(wsd) == WSD_SIZES[split]
        for sent in wsd:
            (inst,) = sent.instances
            # every sense of the task is seen in training, and is one of the lemma's candidates
            assert inst.keys[0] in inst.candidates and inst.keys[0] in train_keys
            assert inst.candidates == demo_candidates(inst.lemma, inst.pos)
    assert demo_first_sense("time", "NOUN") == demo_candidates("time", "n")[0]
    assert len(demo_candidates("time", "n")) == 10
    assert demo_candidates("find", "VERB")[0].startswith("find%2:")
    assert demo_candidates("zebra", "n") == ()
    with pytest.raises(InputError, match="unknown demo task"):
        load_demo_task("ner", "train")
    with pytest.raises(InputError, match="unknown split"):
        load_demo_task("pos", "validation")


def test_inventory_matches_wordnet_index_sense():
    need(WN_ZIP)
    wn = default_wordnet() if default_wordnet_path() == WN_ZIP else WordNet(WN_ZIP)
    senses = demo_senses()
    assert len(senses) == 200
    for key, info in senses.items():
        assert wn.sense_number(key) == info.number
        assert wn.supersense(key) == info.supersense
        assert parse_sense_key(key)[0] == info.lemma


def test_script_regenerates_identical_files(tmp_path):
    need(DATA / "ud_english_ewt")
    need(DATA / "semcor30")
    need(WN_ZIP)
    out = tmp_path / "demo"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_demo_tasks.py"), "--data",
                    str(DATA), "--out", str(out)], check=True, capture_output=True, timeout=600)
    shipped = demo_tasks_dir()
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert made == sorted(p.relative_to(shipped) for p in shipped.rglob("*")
                          if p.is_file() and p.name != "README.md")
    for rel in made:
        assert (out / rel).read_bytes() == (shipped / rel).read_bytes(), rel
