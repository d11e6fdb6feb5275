"""The Units view's state, without Qt: its settings, the selected sentence's internal states and
the last ranking, and the engine calls that make them (run on the worker by the controller).

The sentence rows: for the chosen layer, direction and state kind, the units whose values vary
most over the sentence's words, as a (units × words) matrix; beside them the mean forget and
input gate per word (how much the cells keep and how much they take in). The ranking: units
of every layer, direction and state ranked for the labels of the demo POS task or of a file of
the user's (:mod:`elmo_engine.analysis.units`), with the top-k against random-k curve. The
intervention panel's computations are in :mod:`.intervention`, the Unit tab's (a unit's top
contexts, several units in one run, kept) in :mod:`.unit_contexts`.
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

DIRECTIONS = ("forward", "backward")
STATES = ("c", "i", "f", "o", "g", "m", "h")
STATE_NAMES = {"c": "cell c", "i": "input gate i", "f": "forget gate f", "o": "output gate o",
               "g": "candidate g", "m": "unprojected output m", "h": "projected output h"}
RANK_KS = (1, 4, 16, 64)               # the table's columns
CURVE_KS = (1, 4, 16, 64, 256)         # the curve's points (k beyond a state's width skipped)
RANK_SEEDS = 3
RANK_TOKENS = 20_000


@dataclass
class UnitsSettings:
    """What the sentence rows show (saved with a workspace)."""

    layer: int = 0
    direction: str = "forward"
    state: str = "c"
    rows: int = 24

    @classmethod
    def from_dict(cls, d: Any) -> "UnitsSettings":
        out = cls()
        if not isinstance(d, dict):
            return out
        if isinstance(d.get("layer"), int) and 0 <= d["layer"] < 64:
            out.layer = d["layer"]
        if d.get("direction") in DIRECTIONS:
            out.direction = d["direction"]
        if d.get("state") in STATES:
            out.state = d["state"]
        if isinstance(d.get("rows"), int) and 1 <= d["rows"] <= 256:
            out.rows = d["rows"]
        return out

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RankSource:
    """Where the ranking's labels come from: ``path`` "" for the bundled demo POS task's UPOS
    tags, else a CoNLL-U or token<TAB>label TSV file of the user's (read as the Probes view reads
    its tasks) with ``label`` (upos, xpos, deprel or feats:NAME; CoNLL-U only)."""

    path: str = ""
    label: str = "upos"

    def describe(self) -> str:
        if not self.path:
            return "the demo POS task's UPOS tags"
        from pathlib import Path

        from elmo_engine.analysis.units.corpus import holds_conllu

        conllu = holds_conllu(Path(self.path))
        return f"{Path(self.path).name}" + (f" ({self.label})" if conllu else "")

    def sentences(self, max_tokens: int) -> List[Any]:
        """Its labelled sentences, up to ``max_tokens`` labelled words (InputError naming the
        file and line for bad input)."""
        if self.path:
            from elmo_engine.analysis.units.collect import labelled_file

            return labelled_file(self.path, self.label, max_tokens)
        from elmo_engine.io.datasets.demo import load_demo_task

        out, count = [], 0
        for sent in load_demo_task("pos", "train"):
            out.append(sent)
            count += len(sent.targets())
            if count >= max_tokens:
                break
        return out


@dataclass
class SentenceRows:
    """One sentence's top units: ``values`` (units × words), ``units`` their ids, and the mean
    forget and input gates per word."""

    tokens: Tuple[str, ...]
    units: Tuple[int, ...]
    values: np.ndarray
    forget: np.ndarray
    input: np.ndarray
    settings: UnitsSettings


@dataclass(frozen=True)
class CorpusFile:
    """The corpus a tab of the view runs over: a sentence file or CoNLL-U of the user's ("" for
    the tab's default) and whether a sentence file's lines are split on whitespace only
    (``pretokenized``, as ``units top/pattern --pretokenized``: text already tokenized, such as
    WikiText's ``@-@``, which the tokenizer would split again; a CoNLL-U's words are its own),
    or (``index``) a corpus index's folder (``units top/pattern --index``), whose sentences are
    tokens already."""

    path: str = ""
    pretokenized: bool = False
    index: bool = False

    @property
    def is_index(self) -> bool:
        """A corpus index of the user's (opening it says when the folder is not one)."""
        return self.index and bool(self.path)

    @property
    def split_on_spaces(self) -> bool:
        """Whether the reader is told ``pretokenized``: a sentence file of the user's only."""
        from elmo_engine.analysis.units.corpus import is_conllu

        return (self.pretokenized and bool(self.path) and not self.is_index
                and not is_conllu(Path(self.path)))

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "pretokenized": self.pretokenized, "index": self.index}

    @classmethod
    def from_saved(cls, v: Any) -> "CorpusFile":
        """A saved choice: ``{"path", "pretokenized", "index"}`` (``index`` absent: a file) or
        a plain path (workspaces saved before the switch); anything invalid is the default."""
        d = v if isinstance(v, dict) else {}
        path = v if isinstance(v, str) else d.get("path", "")
        if not (isinstance(path, str) and len(path) <= 4096 and "\x00" not in path):
            return cls()
        return cls(path, d.get("pretokenized") is True, d.get("index") is True)


@dataclass
class UnitsModel:
    settings: UnitsSettings = field(default_factory=UnitsSettings)
    sentence: Optional[SentenceRows] = None
    #: the last ranking (:func:`elmo_engine.analysis.units.report.ranking_doc`) and its source
    ranking: Optional[Dict[str, Any]] = None
    source: RankSource = field(default_factory=RankSource)
    remeasure: Optional[Any] = None          # the last intervention.Remeasure
    showcase: List[Dict[str, Any]] = field(default_factory=list)
    showcase_note: str = ""
    contexts: Optional[Any] = None           # the last UnitContexts
    #: every unit's contexts found since the model was loaded, by what they were found over
    #: (:class:`~elmo_explorer.views.units.unit_contexts.ContextsCache`)
    contexts_cache: Any = field(default_factory=lambda: _contexts_cache())
    pattern: Optional[Any] = None            # the last PatternResult
    pattern_where: str = ""                  # the corpus it was found in, described

    #: the intervention panel's fields as typed (units as text) and the Unit tab's choice
    panel: Dict[str, Any] = field(default_factory=dict)
    #: the corpora of the Unit tab's top contexts and of the pattern search: a sentence file
    #: or CoNLL-U of the user's, "" for the defaults (the reference corpus, the demo POS
    #: sentences)
    contexts_corpus: CorpusFile = field(default_factory=CorpusFile)
    pattern_corpus: CorpusFile = field(default_factory=CorpusFile)

    @property
    def rankings(self) -> List[Dict[str, Any]]:
        return [] if self.ranking is None else list(self.ranking["rankings"])

    @property
    def shown_labels(self) -> Optional[RankSource]:
        """The labels of the ranking shown (a unit's histogram is made on them), or None."""
        return self.source if self.ranking is not None else None

    def view_state(self, checksum: Optional[str] = None) -> Dict[str, Any]:
        """Settings, the panel's fields, the ranking's labels and (with the model's
        ``checksum``) the last results (:mod:`elmo_engine.analysis.units.report`)."""
        out: Dict[str, Any] = {"settings": self.settings.to_dict(), "panel": dict(self.panel),
                               "source": {"path": self.source.path, "label": self.source.label},
                               "corpora": {"contexts": self.contexts_corpus.to_dict(),
                                           "pattern": self.pattern_corpus.to_dict()}}
        if checksum is not None and (self.ranking is not None or self.remeasure is not None
                                     or self.showcase):
            from elmo_engine.analysis.units.report import results_doc

            showcase = ({"note": self.showcase_note, "rows": self.showcase}
                        if self.showcase else None)
            out["results"] = results_doc(checksum, self.ranking,
                                         None if self.remeasure is None
                                         else self.remeasure.saved(), showcase)
        return out

    def clear_results(self) -> None:
        """Forget every result (a new model)."""
        self.ranking = self.remeasure = self.contexts = self.pattern = None
        self.contexts_cache.clear()
        self.showcase, self.showcase_note, self.pattern_where = [], "", ""

    def apply_saved(self, saved: Any) -> None:
        """Take a workspace's saved results
        (:class:`~elmo_engine.analysis.units.report.SavedResults`, already checked)."""
        from elmo_explorer.views.units.intervention import Remeasure

        if saved.ranking is not None:
            self.ranking = saved.ranking
        if saved.intervention is not None:
            self.remeasure = Remeasure.from_saved(saved.intervention)
        if saved.showcase is not None:
            self.showcase = list(saved.showcase["rows"])
            self.showcase_note = str(saved.showcase["note"])

    def restore(self, state: Any) -> Any:
        """Read a saved state (what is not valid is dropped); returns its saved results
        (:class:`~elmo_engine.analysis.units.report.SavedResults`, or None) for the controller
        to show once the model that made them is the one loaded."""
        if not isinstance(state, dict):
            return None
        from elmo_engine.analysis.units.report import saved_results

        self.settings = UnitsSettings.from_dict(state.get("settings"))
        self.panel = panel_from_dict(state.get("panel"))
        src = state.get("source")
        if (isinstance(src, dict) and isinstance(src.get("path"), str)
                and len(src["path"]) <= 4096 and isinstance(src.get("label"), str)
                and 0 < len(src["label"]) <= 64):
            self.source = RankSource(src["path"], src["label"])
        corpora = state.get("corpora")
        for key in ("contexts", "pattern"):              # missing or invalid: the default
            v = corpora.get(key) if isinstance(corpora, dict) else None
            setattr(self, f"{key}_corpus", CorpusFile.from_saved(v))
        return saved_results(state.get("results"))


def _contexts_cache() -> Any:
    from elmo_explorer.views.units.unit_contexts import ContextsCache

    return ContextsCache()


def panel_from_dict(d: Any) -> Dict[str, Any]:
    """The saved panel fields that are valid (anything else is dropped, never an error)."""
    out: Dict[str, Any] = {}
    if not isinstance(d, dict):
        return out
    checks = {"layer": lambda v: isinstance(v, int) and 0 <= v < 64,
              "direction": lambda v: v in INTERVENE_DIRECTIONS,
              "state": lambda v: v in INTERVENE_STATES,
              "units": lambda v: isinstance(v, str) and len(v) <= 10_000,
              "op": lambda v: v in OPS,
              "value": lambda v: isinstance(v, (int, float)) and abs(v) <= 100,
              "position": lambda v: isinstance(v, int) and 0 <= v <= 10_000,
              "donor": lambda v: isinstance(v, str) and len(v) <= 10_000,
              "unit_layer": lambda v: isinstance(v, int) and 0 <= v < 64,
              "unit_direction": lambda v: v in DIRECTIONS,
              "unit_state": lambda v: v in STATES,
              "unit": lambda v: isinstance(v, int) and 0 <= v <= 100_000,
              "word": lambda v: isinstance(v, str) and len(v) <= 200}
    for key, ok in checks.items():
        v = d.get(key)
        if v is not None and not isinstance(v, bool) and ok(v):
            out[key] = v
    return out


def sentence_rows(model, tokens: Sequence[str], settings: UnitsSettings) -> SentenceRows:
    """The engine's states of ``tokens`` for ``settings`` (runs the model: call on the worker)."""
    import torch

    from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect

    kind = StateKind(settings.state)
    d = DIRECTIONS.index(settings.direction)
    layer = min(settings.layer, model.opts.n_layers - 1)
    kinds = tuple(dict.fromkeys((kind, StateKind.FG, StateKind.IG)))
    tok, lengths = framed_tokens(model, [list(tokens)])
    res = inspect(model, tok.to(model.device), lengths,
                  Capture(kinds=kinds, layers=(layer,), directions=(d,), dtype=torch.float32),
                  states_only=True)
    n = len(tokens)

    def words(k) -> np.ndarray:
        return res.states[(layer, d, k)][0, 1:n + 1].cpu().numpy()      # (n, width)

    values = words(kind)
    units = top_units(values, settings.rows)
    return SentenceRows(tokens=tuple(tokens), units=units, values=values[:, list(units)].T,
                        forget=words(StateKind.FG).mean(1), input=words(StateKind.IG).mean(1),
                        settings=UnitsSettings(layer, settings.direction, settings.state,
                                               settings.rows))


def top_units(values: np.ndarray, rows: int) -> Tuple[int, ...]:
    """The ``rows`` units (columns of ``values``, words × units) that vary most over the words,
    then by largest mean magnitude; ties by id."""
    spread = values.std(0) if values.shape[0] > 1 else np.abs(values).mean(0)
    order = np.lexsort((np.arange(values.shape[1]), -np.abs(values).mean(0), -spread))
    return tuple(int(u) for u in order[:rows])


def rank_labels(model, source: RankSource, token_vectors=None, state=None) -> Dict[str, Any]:
    """Units of every layer and direction (c and h) ranked for ``source``'s labels (its first
    :data:`RANK_TOKENS` labelled words), with the top-k curve (k = :data:`CURVE_KS`, 3 seeds):
    the saved form of :func:`elmo_engine.analysis.units.report.ranking_doc`."""
    from elmo_engine.analysis.units.collect import collect
    from elmo_engine.analysis.units.rank import RankSettings, rank_units, ranking_json
    from elmo_engine.analysis.units.report import ranking_doc
    from elmo_engine.model.lstm_inspect import StateKind

    sents = source.sentences(RANK_TOKENS)
    data = collect(model, sents, [StateKind.C, StateKind.H], max_tokens=RANK_TOKENS,
                   token_vectors=token_vectors, state=state)
    results = rank_units(data, RankSettings(ks=CURVE_KS, seeds=RANK_SEEDS), state=state)
    return ranking_doc([ranking_json(r, 8) for r in results], source.describe(), len(data),
                       data.classes)


def curve_point(ranking: Dict[str, Any], k: int, method: str = "mean-diff"
                ) -> Optional[Dict[str, Any]]:
    """The curve point of ``ranking`` at ``k`` for ``method`` (None when not computed)."""
    return next((p for p in ranking["curve"] if p["k"] == k and p["method"] == method), None)


# ---- the intervention panel's choices ---------------------------------------------------------
OPS = ("zero", "clamp", "scale", "patch")
INTERVENE_DIRECTIONS = ("forward", "backward", "both")
INTERVENE_STATES = ("c", "m", "h")


# ---- one unit's contexts ----------------------------------------------------------------------
#: lines of a unit's contexts shown (the words read: ``units top``'s, CORPUS_TOKENS of
#: elmo_engine.analysis.units.corpus)
CONTEXT_SHOW = 25


@dataclass(frozen=True)
class UnitChoice:
    layer: int = 1
    direction: str = "forward"
    state: str = "c"
    unit: int = 0

    def describe(self) -> str:
        return f"unit {self.unit} of layer {self.layer} {self.direction} {STATE_NAMES[self.state]}"


@dataclass
class UnitContexts:
    """A unit over a corpus (``corpus`` says which): its highest and lowest positions
    (keyword in context), the ``positions`` looked at, and (when a ranking is shown) its values
    per label of the ranking as a histogram."""

    choice: UnitChoice
    positions: int
    highest: List[Any]                # elmo_engine.analysis.units.contexts.Context
    lowest: List[Any]
    histogram: Optional[Any] = None   # elmo_engine.analysis.units.contexts.LabelHistogram
    corpus: str = ""


@contextlib.contextmanager
def opened(corpus: "CorpusFile", default):
    """The sentences a tab runs over, as ``units top``/``pattern`` read them: a corpus index's,
    read a batch at a time (opened and closed after); a sentence file's or CoNLL-U's first
    ``CORPUS_TOKENS`` words; or, with no path, ``default()`` → (sentences, labels,
    description). Yields (a SentenceSource, the labels or None, the description)."""
    from elmo_engine.io.datasets.sentence_source import SentenceSource

    if corpus.is_index:
        from elmo_engine.index.search import open_sentences

        with open_sentences(corpus.path) as source:
            yield (source, None,
                   f"the corpus index {Path(corpus.path).name} ({source.n_tokens:,} words)")
        return
    if corpus.path:
        from elmo_engine.analysis.units.corpus import CORPUS_TOKENS, read_units_corpus

        read = read_units_corpus(corpus.path, CORPUS_TOKENS, corpus.split_on_spaces)
        sents, labels, where = read.sentences, read.labels, read.describe()
    else:
        sents, labels, where = default()
    yield SentenceSource.of(sents), labels, where


#: what the Unit tab's contexts and the pattern search run over when no file is chosen
CONTEXTS_DEFAULT = "the reference corpus"
PATTERN_DEFAULT = f"the demo POS task's sentences (EWT, its first {RANK_TOKENS:,} words)"


# ---- pattern search ---------------------------------------------------------------------------
PATTERN_SHOW = 30


@dataclass(frozen=True)
class PatternQuery:
    """A span of the selected sentence (words ``start`` … ``end``, 1-based, inclusive) and
    the threshold above which a unit of ``layer``/``direction``/``state`` is on."""

    layer: int = 1
    direction: str = "forward"
    state: str = "c"
    start: int = 1
    end: int = 1
    threshold: float = 0.3


def pattern_corpus() -> Tuple[List[List[str]], List[List[Optional[str]]]]:
    """The corpus the view searches: the demo POS task's sentences (EWT, with their UPOS) up
    to :data:`RANK_TOKENS` words."""
    from elmo_engine.io.datasets.demo import load_demo_task

    sents: List[List[str]] = []
    labels: List[List[Optional[str]]] = []
    count = 0
    for s in load_demo_task("pos", "train"):
        sents.append(list(s.tokens))
        labels.append(list(s.labels))
        count += len(s)
        if count >= RANK_TOKENS:
            break
    return sents, labels


def pattern_search(model, tokens: Sequence[str], q: PatternQuery, token_vectors=None,
                   state=None, corpus: CorpusFile = CorpusFile()):
    """:func:`elmo_engine.analysis.units.pattern.find_pattern` of ``q`` over ``corpus`` (a
    sentence file or CoNLL-U, its first ``CORPUS_TOKENS`` words as ``units pattern`` reads it;
    its path "" for :func:`pattern_corpus`; or every sentence of a corpus index, as
    ``units pattern --index``)
    (run on the worker). Returns (the corpus described, the result)."""
    from elmo_engine.analysis.units.pattern import find_pattern
    from elmo_engine.model.lstm_inspect import StateKind

    with opened(corpus, lambda: (*pattern_corpus(), PATTERN_DEFAULT)) as (source, labels,
                                                                          where):
        return where, find_pattern(model, list(tokens), (q.start, q.end), q.threshold, q.layer,
                                   DIRECTIONS.index(q.direction), StateKind(q.state), source,
                                   labels=labels, show=PATTERN_SHOW,
                                   token_vectors=token_vectors, task=state)
