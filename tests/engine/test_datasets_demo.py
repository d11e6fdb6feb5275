"""The built-in demo probe tasks (resources/demo_tasks) and the script that makes them."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

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

from conftest import DATA, REPO, need  # noqa: E402

WN_ZIP = DATA / "wordnet30" / "nltk_data" / "corpora" / "wordnet.zip"
SIZES = {"train": 2126, "dev": 167, "test": 311}
UPOS = {"NOUN", "VERB", "ADJ", "ADV"}


@pytest.fixture(scope="module")
def tasks():
    return {t: {s: load_demo_task(t, s) for s in SPLITS} for t in DEMO_TASKS}


def test_files_licence_and_size():
    root = demo_tasks_dir()
    assert root == REPO / "resources" / "demo_tasks"
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert total < 2_000_000
    licence = (root / "LICENSE").read_text("utf-8")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in licence
    assert "README.md" in {p.name for p in root.iterdir()}


def test_counts_and_label_sets(tasks):
    summary = json.loads((demo_tasks_dir() / "summary.json").read_text("utf-8"))
    for task in DEMO_TASKS:
        for split in SPLITS:
            sents = tasks[task][split]
            assert len(sents) == SIZES[split] == summary["counts"][task][split]["sentences"]
            # exactly one target per sentence, at the index the comment gives
            assert all(len(s.targets()) == 1 for s in sents)
            assert all(s.targets()[0][0] == int(s.meta["target"]) for s in sents)
    pos_train = Counter(lab for s in tasks["pos"]["train"] for _, lab in s.targets())
    assert set(pos_train) == UPOS and pos_train["VERB"] > pos_train["NOUN"] > pos_train["ADJ"]
    supers = {lab for sp in SPLITS for s in tasks["supersense"][sp] for _, lab in s.targets()}
    assert supers <= set(LEXNAMES) and len(supers) >= 40
    words = {s.meta["id"].split(".")[0] for sp in SPLITS for s in tasks["pos"][sp]}
    assert {"bank", "play", "plant", "bass", "run", "light"} <= words


def test_tasks_share_sentences_and_agree(tasks):
    senses = demo_senses()
    for split in SPLITS:
        for p, w, s in zip(tasks["pos"][split], tasks["wsd"][split], tasks["supersense"][split]):
            assert p.tokens == w.tokens == s.tokens and p.meta["id"] == w.meta["id"] == s.meta["id"]
            (i, upos), = p.targets()
            (j, key), = w.targets()
            (k, lex), = s.targets()
            assert i == j == k
            info = senses[key]
            assert (info.pos, info.supersense) == (upos, lex)
            lemma = parse_sense_key(key)[0]
            assert p.meta["id"].startswith(lemma + ".")
    ids = [s.meta["id"] for sp in SPLITS for s in tasks["pos"][sp]]
    assert len(ids) == len(set(ids))  # no sentence in two splits


def test_wsd_demo_records_and_inventory(tasks):
    train_keys = {s.targets()[0][1] for s in tasks["wsd"]["train"]}
    for split in ("dev", "test"):
        wsd = load_demo_wsd(split)
        assert len(wsd) == SIZES[split]
        for sent in wsd:
            (inst,) = sent.instances
            assert inst.keys[0] in inst.candidates and inst.keys[0] in train_keys
            assert sent.tokens[inst.index].lower()[0] == inst.lemma[0]  # bore/bear, ran/run
    assert demo_first_sense("bank", "NOUN") == "bank%1:17:01::"
    bank_n = demo_candidates("bank", "n")
    assert len(bank_n) == 10 and bank_n[1] == "bank%1:14:00::"
    assert demo_candidates("bank", "VERB")[0].startswith("bank%2:")
    assert demo_candidates("zebra", "n") == ()
    with pytest.raises(InputError, match="unknown demo task"):
        load_demo_task("ner", "train")
    with pytest.raises(InputError, match="unknown split"):
        load_demo_task("pos", "validation")


def test_inventory_matches_wordnet_index_sense():
    need(WN_ZIP)
    wn = default_wordnet() if default_wordnet_path() == WN_ZIP else WordNet(WN_ZIP)
    senses = demo_senses()
    assert len(senses) == 2838
    for key, info in senses.items():
        assert wn.sense_number(key) == info.number
        assert wn.supersense(key) == info.supersense


def test_script_regenerates_identical_files(tmp_path):
    if not Path("/usr/share/wordnet/data.noun").exists():
        pytest.skip("Debian wordnet-base not installed (/usr/share/wordnet); "
                    "apt-get install wordnet-base to check regeneration")
    out = tmp_path / "demo"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_demo_tasks.py"), "--out",
                    str(out)], check=True, capture_output=True, timeout=120)
    shipped = demo_tasks_dir()
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert made == sorted(p.relative_to(shipped) for p in shipped.rglob("*")
                          if p.is_file() and p.name != "README.md")
    for rel in made:
        assert (out / rel).read_bytes() == (shipped / rel).read_bytes(), rel
