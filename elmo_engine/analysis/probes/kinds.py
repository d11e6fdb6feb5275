"""The probe's typed seams: which kind of task, and how its predictions are scored.

A task kind decides what the examples are (a label per token for tagging; a WordNet sense per
instance, chosen among the lemma's candidates, for word sense disambiguation) and how a probe
is scored (:class:`ScoringMode`): token accuracy for tagging, Raganato et al.'s (2017) scorer
for WSD (P = correct/attempted, R = correct/total, F1), and the mean of the per-lemma
accuracies for the demo word-sense task, whose 20 lemmas are balanced that way.
"""
from __future__ import annotations

import enum

from elmo_engine.errors import InputError


class ScoringMode(str, enum.Enum):
    """How predictions are scored; the ``main`` score of a result is the mode's own."""

    ACCURACY = "accuracy"          # tagging: the fraction of tokens labelled right
    F1 = "f1"                      # WSD: Raganato et al.'s F1 (first sense for unseen lemmas)
    LEMMA = "lemma"                # demo WSD: the mean of the per-lemma accuracies


class TaskKind(str, enum.Enum):
    """The probe tasks (the ``probe`` command's ``--task`` values)."""

    POS = "pos"                                  # CoNLL-U, one column as the label
    WSD = "wsd"                                  # the WSD framework's XML + gold keys
    TSV = "tsv"                                  # token<TAB>label
    DEMO_POS = "demo-pos"                        # resources/demo_tasks: EWT UPOS
    DEMO_WSD = "demo-wsd"                        # 20 ambiguous SemCor lemmas
    DEMO_SUPERSENSE = "demo-supersense"          # the same lemmas' WordNet supersenses

    @classmethod
    def of(cls, task: "str | TaskKind") -> "TaskKind":
        """The kind named ``task``; an :class:`InputError` naming the known ones otherwise."""
        try:
            return cls(task)
        except ValueError:
            known = ", ".join(k.value for k in cls)
            raise InputError(f"unknown probe task {task!r} (known: {known})") from None

    @property
    def is_wsd(self) -> bool:
        """Word sense disambiguation: instances with candidate senses, not tagged tokens."""
        return self in (TaskKind.WSD, TaskKind.DEMO_WSD)

    @property
    def is_demo(self) -> bool:
        return self.value.startswith("demo-")

    @property
    def scoring(self) -> ScoringMode:
        if self is TaskKind.DEMO_WSD:
            return ScoringMode.LEMMA
        return ScoringMode.F1 if self is TaskKind.WSD else ScoringMode.ACCURACY


__all__ = ["ScoringMode", "TaskKind"]
