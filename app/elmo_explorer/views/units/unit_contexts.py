"""The Unit tab's computation, without Qt: a unit's highest and lowest positions over a corpus
(keyword in context, Karpathy et al. 2015) and, with a ranking shown, its values per label of
the ranking's words (run on the worker by the controller).

Several units of one layer, direction and state cost one run of the model, as ``units top
--unit 78,112,301`` (:func:`elmo_engine.analysis.units.contexts.scan_units`): selecting a row
of the ranking finds the contexts of the row's first :data:`PREFETCH_UNITS` units at once.
What was found is kept (:class:`ContextsCache`) by what it was found over (the corpus and the
file's modification time and size, the ranking's labels and their file's, the unit), so that
going back to a unit, or on to the next of the row, shows its contexts without running the
model again; a new model forgets them.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from elmo_explorer.views.units.model import (CONTEXT_SHOW, CONTEXTS_DEFAULT, DIRECTIONS,
                                             RANK_TOKENS, CorpusFile, RankSource, UnitChoice,
                                             UnitContexts, opened)

#: the units of a selected ranking row whose contexts one job finds (the row's top units)
PREFETCH_UNITS = 10
#: the units' contexts kept at most (each 2 × CONTEXT_SHOW lines), the oldest dropped first
MAX_KEPT = 512

Stamp = Tuple[int, int]


def stamp(path: str, index: bool = False) -> Stamp:
    """(modification time in ns, size) of a file, or of a corpus index's manifest; (0, 0) for
    the bundled default ("") or a path that cannot be read (the run then says why)."""
    if not path:
        return (0, 0)
    target = Path(path) / "index.json" if index else Path(path)
    try:
        st = os.stat(target)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


@dataclass(frozen=True)
class ContextsKey:
    """What a unit's contexts were found over: the corpus as chosen and its stamp, the
    ranking's labels (path, label and stamp; None without a ranking: no histogram) and the
    unit."""

    corpus: CorpusFile
    corpus_stamp: Stamp
    labels: Optional[Tuple[str, str, Stamp]]
    choice: UnitChoice

    @classmethod
    def of(cls, choice: UnitChoice, corpus: CorpusFile,
           labels: Optional[RankSource]) -> "ContextsKey":
        lab = None if labels is None else (labels.path, labels.label, stamp(labels.path))
        return cls(corpus, stamp(corpus.path, corpus.is_index), lab, choice)

    def for_unit(self, unit: int) -> "ContextsKey":
        c = self.choice
        return ContextsKey(self.corpus, self.corpus_stamp, self.labels,
                           UnitChoice(c.layer, c.direction, c.state, int(unit)))


class ContextsCache:
    """Units' contexts by :class:`ContextsKey`, at most :data:`MAX_KEPT`, the least recently
    used dropped first. Used on the GUI thread only (the worker returns results; the
    controller keeps them)."""

    def __init__(self, limit: int = MAX_KEPT):
        self.limit = int(limit)
        self._kept: "OrderedDict[ContextsKey, UnitContexts]" = OrderedDict()

    def get(self, key: ContextsKey) -> Optional[UnitContexts]:
        res = self._kept.get(key)
        if res is not None:
            self._kept.move_to_end(key)
        return res

    def put(self, key: ContextsKey, res: UnitContexts) -> None:
        self._kept[key] = res
        self._kept.move_to_end(key)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()


def units_to_find(cache: ContextsCache, key: ContextsKey, also: Sequence[int]) -> List[int]:
    """``key``'s unit, then the units ``also`` (its layer, direction and state), each once,
    those not kept in ``cache``: at most :data:`PREFETCH_UNITS`, for one run of the model."""
    units = dict.fromkeys([key.choice.unit, *(int(u) for u in also)])
    return [u for u in units if key.for_unit(u) not in cache][:PREFETCH_UNITS]


def finding_status(choice: UnitChoice, units: Sequence[int]) -> str:
    """The status line while ``units`` (from :func:`units_to_find`) are found."""
    if units[0] != choice.unit:                      # the chosen one is kept: the others
        what = f"{len(units)} more of the ranking's units"
    elif len(units) == 1:
        what = choice.describe()
    else:
        what = f"{choice.describe()} and {len(units) - 1} more of the ranking's units"
    return f"Finding the contexts of {what}…"


def found_status(shown: UnitContexts, found: Sequence[UnitContexts], kept: bool = False) -> str:
    """The status line once ``shown`` is on screen, out of the ``found`` of one run (or
    ``kept`` from an earlier one)."""
    head = f"Top contexts of {shown.choice.describe()} over {shown.corpus}"
    others = [str(r.choice.unit) for r in found if r is not shown]
    if kept or not others:
        return head + (" (found before, kept)." if kept else ".")
    return (f"{head}, found in one run with units {', '.join(others)} of the ranking's row: "
            "choosing one of them shows it at once.")


def reference_corpus() -> Tuple[List[List[str]], None, str]:
    """The Unit tab's default: the bundled reference corpus (its first ``CORPUS_TOKENS``)."""
    from elmo_engine.analysis.layers.run import reference_corpus_path
    from elmo_engine.analysis.units.corpus import CORPUS_TOKENS, read_units_corpus

    return (read_units_corpus(reference_corpus_path(), CORPUS_TOKENS).sentences, None,
            CONTEXTS_DEFAULT)


def units_contexts(model, choice: UnitChoice, units: Sequence[int],
                   labels: Optional[RankSource], token_vectors=None, state=None,
                   corpus: CorpusFile = CorpusFile()) -> List[UnitContexts]:
    """The top contexts of ``units`` (of ``choice``'s layer, direction and state; its own unit
    is not implied) over ``corpus`` (a sentence file or CoNLL-U, its first ``CORPUS_TOKENS``
    words as ``units top`` reads it; its path "" for the bundled reference corpus; or a corpus
    index, every sentence, as ``units top --index``) in one run of the model, and with
    ``labels`` (the shown ranking's) each unit's histogram per label on the words the ranking
    used (one more run over those). One result per unit, each once, in the order given."""
    from elmo_engine.analysis.units.contexts import (UnitTop, label_histogram, scan_units,
                                                     units_values)
    from elmo_engine.model.lstm_inspect import StateKind

    units = list(dict.fromkeys(int(u) for u in units))
    kind = StateKind(choice.state)
    d = DIRECTIONS.index(choice.direction)
    # the tab shows positions, not words: no sum per distinct word is kept
    tops = {u: [UnitTop(CONTEXT_SHOW, words=False),
                UnitTop(CONTEXT_SHOW, lowest=True, words=False)] for u in units}
    with opened(corpus, reference_corpus) as (source, _, where):
        scan_units(model, source, choice.layer, d, kind, tops, token_vectors=token_vectors,
                   task=state)
    hists: List[Optional[object]] = [None] * len(units)
    if labels is not None:
        labelled = labels.sentences(RANK_TOKENS)
        values = units_values(model, [s.tokens for s in labelled], choice.layer, d, kind,
                              units, token_vectors, state)
        tags = [s.labels for s in labelled]
        hists = [label_histogram(tags, [v[:, j] for v in values]) for j in range(len(units))]
    out = []
    for u, hist in zip(units, hists):
        highest, lowest = tops[u]
        out.append(UnitContexts(choice=UnitChoice(choice.layer, choice.direction, choice.state, u),
                                positions=highest.positions, highest=highest.contexts(),
                                lowest=lowest.contexts(), histogram=hist, corpus=where))
    return out


def unit_contexts(model, choice: UnitChoice, labels: Optional[RankSource], token_vectors=None,
                  state=None, corpus: CorpusFile = CorpusFile()) -> UnitContexts:
    """``choice``'s unit alone (:func:`units_contexts`)."""
    return units_contexts(model, choice, [choice.unit], labels, token_vectors, state, corpus)[0]
