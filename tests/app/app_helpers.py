"""Small builders the app's tests share (import them: ``from app_helpers import …``); the shared
fixtures are in ``tests/app/conftest.py``."""
from __future__ import annotations

from elmo_engine.analysis.probes.tasks import TaskData
from elmo_engine.io.datasets.records import LabelledSentence
from elmo_explorer.views.probes.controller import ProbeTask

WORDS = [("the", "DET"), ("dog", "NOUN"), ("runs", "VERB"), ("a", "DET"), ("cat", "NOUN"),
         ("sleeps", "VERB"), ("one", "NUM"), ("bird", "NOUN"), ("sings", "VERB")]


def tagged_sentences(n: int, offset: int):
    """``n`` four-word sentences tagged with UPOS, cycling through :data:`WORDS`."""
    out = []
    for s in range(n):
        ws = [WORDS[(s + offset + j) % len(WORDS)] for j in range(4)]
        out.append(LabelledSentence(tuple(w for w, _ in ws), tuple(t for _, t in ws)))
    return out


def tiny_probe_task(name: str = "tiny POS") -> ProbeTask:
    """A POS task of 30 / 8 / 8 sentences (train / dev / test): trains in seconds."""
    data = TaskData(tagged_sentences(30, 0), tagged_sentences(8, 5), tagged_sentences(8, 2),
                    "upos")
    return ProbeTask(name, "tsv", lambda: data)
