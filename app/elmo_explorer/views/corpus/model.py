"""The Corpus view's state, plain Python (no Qt): the open index, the options, the query, its
concordance lines per layer, the word's induced senses, its map and the map's box selection; the
TSV exports and the report tables are functions of this state."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.index.hits import Hit
from elmo_engine.index.senses import MIN_CLUSTER_SIZE, SenseInduction
from elmo_explorer.common.selection import Rect, normalized

#: the layers the view shows side by side (those the index holds)
DEFAULT_LAYERS: Tuple[int, ...] = (0, 1, 2)
#: characters of context on each side of a concordance line
KWIC_WIDTH = 60
TSV_COLUMNS = ("layer", "rank", "cosine", "sentence_id", "position", "left", "word", "right")
#: a box selection on the map lists (and exports) at most this many occurrences, in corpus order
SELECTION_LINES = 2000
#: the selection's TSV: the layer whose plot held the box, then each occurrence in corpus order
SELECTION_TSV_COLUMNS = ("layer", "rank", "sentence_id", "position", "left", "word", "right")


class MapScope:
    WORD = "word"                 # the occurrences of the query's word
    ALL = "all"                   # every token of the index (sampled to map_max_points)


#: what the Senses table says above its rows
SENSES_NOTE = (f"A sense needs at least {MIN_CLUSTER_SIZE} occurrences: smaller clusters are "
               "noise the silhouette rewards. Sense numbers follow the occurrences from layer "
               "to layer.")

@dataclass(frozen=True)
class CorpusOptions:
    """What the user chose; saved with a workspace."""

    k: int = 10                           # concordance lines per layer
    same_word: bool = True                # only the query word's occurrences (exact search)
    map_scope: str = MapScope.WORD
    map_max_points: int = 1_000_000       # the map samples evenly beyond this
    # (the most clusters the Senses tab tries is `senses`'s, K_MAX: not an option, so a "k_max"
    # remembered or saved before 2026-12-08 — 6 then — is not read back)

    @staticmethod
    def from_dict(d: Dict[str, Any]) -> "CorpusOptions":
        """Options from saved JSON; missing or invalid values keep their defaults."""
        out = CorpusOptions()
        if not isinstance(d, dict):
            return out
        def whole(lo: int, hi: int):
            return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi

        checks = {"k": whole(1, 1000), "same_word": lambda v: isinstance(v, bool),
                  "map_scope": lambda v: v in (MapScope.WORD, MapScope.ALL),
                  "map_max_points": whole(1000, 10_000_000)}
        good = {k: d[k] for k, ok in checks.items() if k in d and ok(d[k])}
        return replace(out, **good)


@dataclass(frozen=True)
class Query:
    """The occurrence searched for: the word and its sentence (tokens) and position."""

    word: str
    tokens: Tuple[str, ...]
    position: int
    source: str = "selection"             # "selection" (a loaded sentence) or "corpus" (a hit)

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


@dataclass(frozen=True)
class ConcordanceLine:
    """One hit as a keyword-in-context line."""

    layer: int
    rank: int
    cosine: float
    sentence_id: int
    position: int
    left: str
    word: str
    right: str
    row: int

    @staticmethod
    def from_hit(hit: Hit, rank: int, width: int = KWIC_WIDTH) -> "ConcordanceLine":
        left, word, right = hit.kwic(width)
        return ConcordanceLine(hit.layer, rank, hit.cosine, hit.sentence_id, hit.position,
                               left, word, right, hit.row)


@dataclass(frozen=True)
class MapBox:
    """A box drawn on one layer's map, as a workspace saves it: the layer, the box in that
    layer's map coordinates (the map's PCA is deterministic, so the same box selects the same
    occurrences when the map is computed again) and the word whose map it was drawn on (None:
    the map of every token)."""

    layer: int
    rect: Rect
    map_word: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"layer": self.layer, "rect": [float(v) for v in self.rect],
                "map_word": self.map_word}

    @staticmethod
    def from_json(d: Any) -> "MapBox":
        """The box of saved JSON; raises ``ValueError`` with a one-line reason when it is not
        one (a layer 0–99, four finite numbers, a word or null)."""
        if not isinstance(d, dict):
            raise ValueError(f"an object was expected, found {type(d).__name__}")
        layer, rect, word = d.get("layer"), d.get("rect"), d.get("map_word")
        if not (isinstance(layer, int) and not isinstance(layer, bool) and 0 <= layer < 100):
            raise ValueError(f"'layer' must be a whole number 0-99, found {layer!r:.40}")
        if not (isinstance(rect, list) and len(rect) == 4
                and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v) for v in rect)):
            raise ValueError(f"'rect' must be four finite numbers, found {rect!r:.60}")
        if word is not None and not (isinstance(word, str) and word):
            raise ValueError(f"'map_word' must be a word or null, found {word!r:.40}")
        return MapBox(layer, normalized((rect[0], rect[1], rect[2], rect[3])), word)

    def fits(self, map_word: Optional[str]) -> bool:
        """Whether the box was drawn on the map of ``map_word`` (None: every token)."""
        if self.map_word is None or map_word is None:
            return self.map_word is None and map_word is None
        return self.map_word.casefold() == map_word.casefold()


@dataclass(frozen=True)
class MapSelection:
    """The occurrences inside a box drawn on one layer's map (the same ones are selected in
    every layer): their rows in the index, in corpus order, and the concordance lines of the
    first :data:`SELECTION_LINES` (empty until they are read; cosine NaN: there is no query);
    ``rect``: the box (that layer's map coordinates; None: selected otherwise)."""

    layer: int
    rows: np.ndarray                      # (n,) int64
    lines: Tuple[ConcordanceLine, ...] = ()
    rect: Optional[Rect] = None

    @property
    def n(self) -> int:
        return len(self.rows)

    def tsv(self) -> str:
        """The listed lines as tab-separated values with a header."""
        out = ["\t".join(SELECTION_TSV_COLUMNS)]
        for line in self.lines:
            out.append("\t".join(_cell(getattr(line, c)) for c in SELECTION_TSV_COLUMNS))
        return "\n".join(out) + "\n"


def _cell(v: Any) -> str:
    """One TSV field: floats with 6 decimals; tabs and newlines become spaces."""
    text = f"{v:.6f}" if isinstance(v, float) else str(v)
    return text.replace("\t", " ").replace("\n", " ").replace("\r", " ")


@dataclass
class CorpusModel:
    """Everything the view shows, as values."""

    index_path: Optional[str] = None
    index_summary: str = ""               # "4,000 sentences, 96,412 tokens, layers 0,1,2"
    options: CorpusOptions = field(default_factory=CorpusOptions)
    query: Optional[Query] = None
    lines: Dict[int, List[ConcordanceLine]] = field(default_factory=dict)
    senses: Optional[SenseInduction] = None
    map_word: Optional[str] = None        # the word the map shows (None: all tokens / none)
    selection: Optional[MapSelection] = None   # a box drawn on the map
    #: a saved box waiting for its map (restored with a workspace; kept by clear_results)
    pending_box: Optional[MapBox] = None
    #: what restoring a saved state ignored, one line ("" when nothing)
    restore_note: str = ""

    # ---- results -------------------------------------------------------------------------
    def set_hits(self, hits_by_layer: Dict[int, Sequence[Hit]]) -> None:
        self.lines = {layer: [ConcordanceLine.from_hit(h, i + 1) for i, h in enumerate(hits)]
                      for layer, hits in sorted(hits_by_layer.items())}

    def clear_results(self) -> None:
        self.query, self.lines, self.senses, self.map_word = None, {}, None, None
        self.selection = None

    def concordance_tsv(self) -> str:
        """Every concordance line, layer by layer, as tab-separated values with a header (tabs
        and newlines inside a field become spaces)."""
        out = ["\t".join(TSV_COLUMNS)]
        for layer in sorted(self.lines):
            for line in self.lines[layer]:
                out.append("\t".join(_cell(getattr(line, c)) for c in TSV_COLUMNS))
        return "\n".join(out) + "\n"

    def senses_note(self) -> str:
        """What the Senses table says above its rows: the minimum per sense and, when the word
        is too rare to split, why it has one sense."""
        s = self.senses
        n = len(s.occurrences) if s is not None else 0
        if s is not None and n < 2 * MIN_CLUSTER_SIZE:
            return (f"'{s.word}' occurs {n} times: too few for two senses of at least "
                    f"{MIN_CLUSTER_SIZE} occurrences each, so it is one cluster here. "
                    + SENSES_NOTE.split(". ", 1)[1])
        return SENSES_NOTE

    def cluster_rows(self) -> List[Dict[str, Any]]:
        """One row per induced cluster: layer, cluster, size, share, silhouette, its most
        distinctive context words and its most typical sentence."""
        s = self.senses
        if s is None:
            return []
        rows = []
        for ls in s.layers:
            n = max(1, sum(c.size for c in ls.clusters))
            for c in ls.clusters:
                typical = [s.occurrences[i] for i in c.typical]
                rows.append({
                    "layer": ls.layer, "cluster": c.label + 1, "size": c.size,
                    "share": round(c.size / n, 3),
                    "silhouette": None if math.isnan(ls.silhouette) else round(ls.silhouette, 3),
                    "context_words": ", ".join(w for w, _z in c.context_words[:6]),
                    "typical": typical[0].text if typical else "",
                    "typical_position": typical[0].position if typical else -1,
                    "more_typical": " | ".join(o.text for o in typical[1:]),
                })
        return rows

    # ---- workspace state ------------------------------------------------------------------
    def box(self) -> Optional[MapBox]:
        """The box of the map selection (else a restored one still waiting for its map)."""
        sel = self.selection
        if sel is not None and sel.rect is not None:
            return MapBox(sel.layer, sel.rect, self.map_word)
        return self.pending_box

    def view_state(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {"index": self.index_path, "options": asdict(self.options)}
        if self.query is not None:
            state["query"] = {"word": self.query.word, "tokens": list(self.query.tokens),
                              "position": self.query.position}
        box = self.box()
        if box is not None:
            state["box"] = box.to_json()
        return state

    def restore_view_state(self, state: Dict[str, Any]) -> Optional[str]:
        """Apply the options of a saved state; returns the saved index path (None: none). A
        saved box waits in ``pending_box`` for its map; a bad one is ignored and said in
        ``restore_note``."""
        self.pending_box, self.restore_note = None, ""
        if not isinstance(state, dict):
            return None
        self.options = CorpusOptions.from_dict(state.get("options", {}))
        if "box" in state:
            try:
                self.pending_box = MapBox.from_json(state["box"])
            except ValueError as e:
                self.restore_note = f"the saved map selection box was ignored: {e}"
        q = state.get("query")
        if isinstance(q, dict):
            toks, pos, word = q.get("tokens"), q.get("position"), q.get("word")
            if (isinstance(toks, list) and all(isinstance(t, str) for t in toks)
                    and isinstance(pos, int) and 0 <= pos < len(toks)
                    and isinstance(word, str) and word):
                self.query = Query(word, tuple(toks), pos, "corpus")
        path = state.get("index")
        return path if isinstance(path, str) and path else None
