"""The built-in demo probe tasks (``resources/demo_tasks/``; made by
``scripts/make_demo_tasks.py``, described in the folder's README).

* ``pos``: the UD UPOS tag of **every token** of a sample of UD English EWT sentences
  (1,200 / 200 / 500 sentences);
* ``wsd``: the WordNet 3.0 sense key of one target word per SemCor sentence — 20 frequent
  ambiguous nouns and verbs with 2–3 balanced, coarsely distinct senses (672 / 192 / 288
  sentences); scored per lemma over its own candidate senses;
* ``supersense``: the same targets labelled with the sense's lexicographer file.

``senses.tsv`` holds every WordNet sense of the 20 lemmas, so the WSD task has candidates and a
first-sense baseline without WordNet installed.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

from elmo_engine.io.datasets.records import LabelledSentence, WsdInstance, WsdSentence
from elmo_engine.io.datasets.textio import iter_lines
from elmo_engine.io.datasets.tsv import read_tsv
from elmo_engine.io.datasets.wordnet import normalize_pos, parse_sense_key
from elmo_engine.errors import InputError

DEMO_TASKS: Tuple[str, ...] = ("pos", "wsd", "supersense")
SPLITS: Tuple[str, ...] = ("train", "dev", "test")


@dataclass(frozen=True)
class DemoSense:
    """One row of ``senses.tsv``: a sense of a demo word."""

    key: str
    lemma: str
    pos: str          # UPOS: NOUN, VERB, ADJ, ADV
    number: int       # WordNet sense number for the lemma and POS (1 = most frequent)
    supersense: str   # lexicographer file, e.g. noun.object
    gloss: str


def demo_tasks_dir() -> Path:
    """The folder holding the demo tasks (``resources/demo_tasks``, installed as part of
    ``elmo_engine.resources``)."""
    from elmo_engine.resources import demo_tasks_dir as folder

    return folder()


def _task_file(task: str, split: str) -> Path:
    if task not in DEMO_TASKS:
        raise InputError(f"unknown demo task {task!r}; choose one of {', '.join(DEMO_TASKS)}")
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    path = demo_tasks_dir() / task / f"{split}.tsv"
    if not path.exists():
        raise InputError("demo task file missing (run scripts/make_demo_tasks.py)", path=path)
    return path


def load_demo_task(task: str, split: str) -> List[LabelledSentence]:
    """The sentences of one demo task and split. ``pos``: every token labelled, ``meta["id"]``
    the EWT sentence id; ``wsd``/``supersense``: one labelled target token per sentence,
    ``meta`` holds ``id`` (the SemCor instance id) and ``target`` (the token index)."""
    return list(read_tsv(_task_file(task, split)))


@lru_cache(maxsize=1)
def demo_senses() -> Dict[str, DemoSense]:
    """Every sense of the demo words, by sense key (from ``senses.tsv``)."""
    path = demo_tasks_dir() / "senses.tsv"
    out: Dict[str, DemoSense] = {}
    for lineno, line in iter_lines(path):
        if lineno == 1 or not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 6 or not f[3].isdigit():
            raise InputError("expected 'key lemma pos sense_number supersense gloss'", path=path,
                             line=lineno)
        out[f[0]] = DemoSense(f[0], f[1], f[2], int(f[3]), f[4], f[5])
    return out


@lru_cache(maxsize=1)
def _inventory() -> Dict[Tuple[str, str], Tuple[str, ...]]:
    groups: Dict[Tuple[str, str], List[DemoSense]] = {}
    for sense in demo_senses().values():
        groups.setdefault((sense.lemma, normalize_pos(sense.pos)), []).append(sense)
    return {k: tuple(s.key for s in sorted(v, key=lambda s: s.number)) for k, v in groups.items()}


def demo_candidates(lemma: str, pos: str) -> Tuple[str, ...]:
    """Senses of a demo word for a POS, in sense-number order (empty for other words)."""
    return _inventory().get((lemma.lower(), normalize_pos(pos)), ())


def demo_first_sense(lemma: str, pos: str):
    """Sense 1 of a demo word for a POS, or ``None``."""
    senses = demo_candidates(lemma, pos)
    return senses[0] if senses else None


def load_demo_wsd(split: str) -> List[WsdSentence]:
    """The WSD demo task as :class:`WsdSentence` records (one instance each, with candidates)."""
    senses = demo_senses()
    out: List[WsdSentence] = []
    for sent in load_demo_task("wsd", split):
        (index, key), = sent.targets()
        lemma, pos_letter, _ = parse_sense_key(key)
        info = senses.get(key)
        if info is None:
            raise InputError(f"sense key {key!r} is not in senses.tsv", path=sent.meta.get("path"),
                             line=sent.meta.get("line"))
        inst = WsdInstance(id=str(sent.meta.get("id", f"{split}.{len(out)}")), start=index,
                           stop=index + 1, lemma=lemma, pos=info.pos, keys=(key,),
                           candidates=demo_candidates(lemma, pos_letter))
        out.append(WsdSentence(inst.id, sent.tokens, (inst,), dict(sent.meta)))
    return out
