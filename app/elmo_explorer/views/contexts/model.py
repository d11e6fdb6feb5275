"""The contexts view's state, in plain Python: the word, its comparison, the neighbours.

No Qt here: :class:`ContextsModel` is what
:class:`~elmo_explorer.views.contexts.controller.ContextsPanel` (the controller) keeps,
:class:`~elmo_explorer.views.contexts.view.ContextsView` draws, and a workspace file saves
(:meth:`ContextsModel.view_state`; the view's settings come in as a
:class:`ContextsSettings`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.contexts.neighbours import NeighbourIndex, NeighbourTable
from elmo_explorer.views.reading import CorpusReading

#: the version of the dict written by ``view_state`` (restore accepts older/partial ones)
STATE_VERSION = 1
Occ = Tuple[int, int]


@dataclass
class ContextsSettings:
    """What the user set in the view: how to compare (the widgets hold it)."""

    ignore_case: bool = False
    direction: str = "both"
    corrected: bool = False
    weights: List[float] = field(default_factory=list)    # mix weights over layers 0..L
    k: int = 8                                            # neighbours per layer
    layer_norm: bool = True                               # normalise the layers before mixing
    reference_set: bool = True                            # the word's reference-set sentences


@dataclass
class ContextsModel:
    """The word compared across contexts, its results, and the neighbour corpus.

    Attributes
    ----------
    word : the word compared ("" before the first one)
    comparison, vectors : the last comparison and the ``(L+1, n, 2P)`` vectors of its
        occurrences (None: none yet, or the word does not occur)
    query : the occurrence whose neighbours are shown
    index, table : the neighbour index over the corpus, and the neighbour table shown
    reference_path, reference_tokens : the optional reference text added to the corpus
    reference_reading : how it was read (as ``contexts --reference`` reads it)
    groups : word → {occurrence → group label} typed by the user
    pending : the jobs ("compare", "neighbours") still to finish before the view is ready
    """

    word: str = ""
    comparison: Optional[cmp.Comparison] = None
    vectors: Any = None
    query: Optional[Occ] = None
    index: Optional[NeighbourIndex] = None
    table: Optional[NeighbourTable] = None
    reference_path: Optional[Path] = None
    reference_tokens: List[List[str]] = field(default_factory=list)
    reference_reading: CorpusReading = field(default_factory=CorpusReading)
    groups: Dict[str, Dict[Occ, str]] = field(default_factory=dict)
    index_sig: Any = None
    reference_size: int = 0
    sentences_seen: List[str] = field(default_factory=list)
    keep_word: Optional[str] = None          # set while a saved view is being restored
    pending: Set[str] = field(default_factory=lambda: {"compare", "neighbours"})
    ready: bool = False

    def reset_ready(self) -> None:
        self.ready = False
        self.pending = {"compare", "neighbours"}

    def done(self, what: str) -> bool:
        """Mark a job finished; True when the view has just become ready."""
        self.pending.discard(what)
        if not self.pending and not self.ready:
            self.ready = True
            return True
        return False

    def carry_groups(self, sentences: Sequence[str]) -> None:
        """Keep the user's group labels on sentences that are still there (found by text)."""
        old, new = self.sentences_seen, list(sentences)
        if old == new:
            return
        where: Dict[str, int] = {}
        for i, text in enumerate(new):
            where.setdefault(text, i)
        self.groups = {w: {(where[old[s]], t): g for (s, t), g in labels.items()
                           if s < len(old) and old[s] in where}
                       for w, labels in self.groups.items()}
        self.sentences_seen = new

    # ---- saved with a workspace -------------------------------------------------------------
    def view_state(self, settings: ContextsSettings) -> Dict[str, Any]:
        """The view's parameters as JSON values (see docs/guide/contexts.md)."""
        groups = {w: [{"sentence": s, "token": t, "group": g}
                      for (s, t), g in sorted(labels.items())]
                  for w, labels in self.groups.items() if labels}
        return {"version": STATE_VERSION, "word": self.word,
                "ignore_case": settings.ignore_case,
                "weights": [float(w) for w in settings.weights],
                "direction": settings.direction,
                "corrected": settings.corrected,
                "groups": groups,
                "selected": (None if self.query is None else
                             {"sentence": int(self.query[0]), "token": int(self.query[1])}),
                "k": settings.k, "layer_norm": settings.layer_norm,
                "reference_set": settings.reference_set,
                "reference_file": str(self.reference_path) if self.reference_path else None,
                "reference_reading": self.reference_reading.to_dict()}


def settings_from_state(state: Dict[str, Any], current: ContextsSettings) -> ContextsSettings:
    """``current`` with what a saved ``view_state`` sets validly (the rest ignored)."""
    out = ContextsSettings(current.ignore_case, current.direction, current.corrected,
                           list(current.weights), current.k, current.layer_norm,
                           current.reference_set)
    if isinstance(state.get("layer_norm"), bool):
        out.layer_norm = state["layer_norm"]
    if isinstance(state.get("reference_set"), bool):
        out.reference_set = state["reference_set"]
    if isinstance(state.get("ignore_case"), bool):
        out.ignore_case = state["ignore_case"]
    if isinstance(state.get("corrected"), bool):
        out.corrected = state["corrected"]
    if state.get("direction") in cmp.DIRECTIONS:
        out.direction = state["direction"]
    k = state.get("k")
    if isinstance(k, int) and not isinstance(k, bool):
        out.k = k
    w = state.get("weights")
    if (isinstance(w, list) and len(w) == len(current.weights) and
            all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in w)):
        out.weights = list(w)
    return out


def valid_ref(tokens: Sequence[Sequence[str]], s, t) -> bool:
    """``(s, t)`` is a token of the sentences."""
    return (isinstance(s, int) and isinstance(t, int) and not isinstance(s, bool)
            and not isinstance(t, bool) and 0 <= s < len(tokens) and 0 <= t < len(tokens[s]))


def groups_from_state(groups: Any, tokens: Sequence[Sequence[str]]
                      ) -> Optional[Dict[str, Dict[Occ, str]]]:
    """The group labels of a saved ``view_state`` that still fit the sentences (None: the
    state has none to give)."""
    if not isinstance(groups, dict):
        return None
    out: Dict[str, Dict[Occ, str]] = {}
    for word, items in groups.items():
        if not isinstance(word, str) or not isinstance(items, list):
            continue
        labels = {}
        for it in items:
            if not isinstance(it, dict) or not isinstance(it.get("group"), str):
                continue
            s, t = it.get("sentence"), it.get("token")
            if (isinstance(s, int) and isinstance(t, int) and valid_ref(tokens, s, t) and it["group"].strip()
                    and tokens[s][t].casefold() == word.casefold()):
                labels[(s, t)] = it["group"].strip()
        if labels:
            out[word] = labels
    return out


def neighbour_corpus(loaded: Sequence[Sequence[str]], reference_set: Sequence[Sequence[str]],
                     reference_text: Sequence[Sequence[str]]) -> List[List[str]]:
    """The neighbour corpus: the loaded sentences first (their indices match the workspace's),
    then the word's sentences of the bundled reference set, then the reference text."""
    return [list(t) for t in (*loaded, *reference_set, *reference_text)]
