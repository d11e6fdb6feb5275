"""The Characters view's state, plain Python (no Qt; tested without a window).

What the user asked for (the words of the lab, the filters shown per word, the vocabulary of
the known words, the sentence and word of the perturbation sweep, the atlas's search and width,
the nonce word's sentence and the corpus index it is looked up in) and the last results, as the
engine's JSON-ready dicts: the word lab's per-word reports, the atlas's filter entries, the
sweep's mean per type, the nonce word's predictions and nearest occurrences per layer. The view
draws them; the controller fills them from jobs.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from elmo_engine.index.hits import kwic

#: what the view opens with: a nonce word, a typo and a long rare word
DEFAULT_WORDS = "blorft recieve Antidisestablishmentarianism"
#: the perturbation sweep it opens with
DEFAULT_SENTENCE = "He sat on the bank of the river and watched the water ."
DEFAULT_WORD = "river"
#: the nonce word in context it opens with
DEFAULT_NONCE_SENTENCE = "He sat on the blorft of the river ."
DEFAULT_NONCE_WORD = "blorft"
#: the example words the view offers (a nonce word, typos, capitals, digits, other scripts)
EXAMPLES: Tuple[str, ...] = ("blorft", "recieve", "teh", "definately", "RIVER", "2nd",
                             "naïve", "Москва", "🙂", "unhappiness")
MAX_WORDS = 20
#: the atlas search's best filters shown, of the width chosen
SEARCH_ROWS = 200
FILTER_CHOICES = (5, 10, 20, 50)
#: nearest occurrences per layer of the nonce word in the corpus index; KWIC width per side
INDEX_K = 5
KWIC_WIDTH = 40


class VocabSource(str, enum.Enum):
    """Where the word lab's known words (nearest at layer 0, norm percentile) come from."""

    REFERENCE = "reference"          # the bundled reference corpus's word types
    MODEL = "model"                  # the vocab.txt beside the loaded checkpoint
    FILE = "file"                    # a file of the user's, one word a line


VOCAB_LABELS = {VocabSource.REFERENCE: "Reference corpus",
                VocabSource.MODEL: "The model's vocab.txt",
                VocabSource.FILE: "A file…"}


class IndexSource(str, enum.Enum):
    """The corpus index the nonce word's nearest occurrences are searched in."""

    CORPUS = "corpus"                # the Corpus view's index of the loaded model, if built
    NONE = "none"
    FOLDER = "folder"                # a folder of the user's


INDEX_LABELS = {IndexSource.CORPUS: "The Corpus view's index",
                IndexSource.NONE: "No index",
                IndexSource.FOLDER: "Index…"}


def not_a_token(word: str, tokens: Sequence[str], tokenization: str) -> str:
    """The line for a word that is not one of its sentence's tokens; with the sentence split
    on spaces it says so (Settings ▸ Tokenization ▸ Pretokenized)."""
    how = (" (split on spaces: Settings ▸ Tokenization is Pretokenized)"
           if tokenization == "whitespace" else "")
    return f"'{word}' is not a token of the sentence ({' '.join(tokens)}){how}"


def parse_words(text: str) -> List[str]:
    """The lab's words: whitespace-separated, distinct, at most :data:`MAX_WORDS`."""
    return list(dict.fromkeys(text.split()))[:MAX_WORDS]


def words_note(text: str) -> str:
    """What the lab left out of the words typed ("" when nothing): those over
    :data:`MAX_WORDS` and the repeats (``chars`` takes any number, each as typed)."""
    typed = text.split()
    distinct = list(dict.fromkeys(typed))
    parts = []
    if len(distinct) > MAX_WORDS:
        parts.append(f"the first {MAX_WORDS} of {len(distinct)} words (`elmo-explorer chars` "
                     "takes any number)")
    if len(typed) > len(distinct):
        parts.append(f"{len(typed) - len(distinct)} repeated word(s) once")
    return ("The lab shows " + "; ".join(parts) + ".") if parts else ""


@dataclass
class CharactersModel:
    """The view's parameters and results."""

    words_text: str = DEFAULT_WORDS
    filters_shown: int = 10
    sentence: str = DEFAULT_SENTENCE
    word: str = DEFAULT_WORD
    search: str = ""
    width: int = 0                                   # 0: every width
    lab: List[dict] = field(default_factory=list)    # WordReport.to_dict per word
    vocabulary: str = ""                             # where the known words came from
    vocabulary_size: int = 0
    atlas: List[dict] = field(default_factory=list)  # FilterEntry.to_dict per filter
    atlas_words: int = 0
    search_hits: List[dict] = field(default_factory=list)
    sweep: Optional[dict] = None                     # Sweep.to_dict
    nonce_sentence: str = DEFAULT_NONCE_SENTENCE
    nonce_word: str = DEFAULT_NONCE_WORD
    nonce: Optional[dict] = None                     # InContext.to_dict
    nonce_problem: str = ""                          # why there are no predictions
    vocab_source: VocabSource = VocabSource.REFERENCE
    vocab_file: str = ""                             # with VocabSource.FILE
    index_source: IndexSource = IndexSource.CORPUS
    index_folder: str = ""                           # with IndexSource.FOLDER
    nonce_index: str = ""                            # the index the hits below came from
    nonce_hits: Dict[int, List[dict]] = field(default_factory=dict)   # layer → Hit.to_dict
    checksum: str = ""                               # the model the results belong to

    # ---- results ------------------------------------------------------------------------------
    def model_changed(self, checksum: str) -> None:
        """A new model: every result belongs to the old one."""
        if checksum != self.checksum:
            self.lab, self.atlas, self.search_hits, self.sweep = [], [], [], None
            self.nonce, self.nonce_problem = None, ""
            self.nonce_index, self.nonce_hits = "", {}
            self.checksum = checksum

    def set_vocabulary(self, source: VocabSource, path: str = "") -> None:
        """The known words' source (a file's path with :attr:`VocabSource.FILE`)."""
        self.vocab_source = VocabSource(source)
        if self.vocab_source is VocabSource.FILE:
            self.vocab_file = str(path)

    def set_index(self, source: IndexSource, path: str = "") -> None:
        """The nonce word's corpus index (a folder's path with :attr:`IndexSource.FOLDER`)."""
        self.index_source = IndexSource(source)
        if self.index_source is IndexSource.FOLDER:
            self.index_folder = str(path)

    def words(self) -> List[str]:
        return parse_words(self.words_text)

    def widths(self) -> List[int]:
        return sorted({int(e["width"]) for e in self.atlas})

    def atlas_rows(self) -> List[dict]:
        """The atlas's filters shown: those of :attr:`width` (0: all); with a search, the
        filters of that width the search found, best first, the first :data:`SEARCH_ROWS`
        (the width chosen before the cut, as ``chars filters --search --width`` does)."""
        if self.search.strip() and self.search_hits:
            by_filter = {e["filter"]: e for e in self.atlas}
            rows = []
            for h in self.search_hits:
                e = by_filter.get(h["filter"])
                if e is not None and (not self.width or e["width"] == self.width):
                    rows.append(dict(e, relative=h["relative"], window=h["window"]))
            return rows[:SEARCH_ROWS]
        return [e for e in self.atlas if not self.width or e["width"] == self.width]

    def category_counts(self) -> Dict[int, Dict[str, int]]:
        """Filters per width and category (the map)."""
        out: Dict[int, Dict[str, int]] = {}
        for e in self.atlas:
            d = out.setdefault(int(e["width"]), {})
            d[e["category"]] = d.get(e["category"], 0) + 1
        return out

    def sweep_table(self) -> Tuple[List[str], List[str], List[List[float]]]:
        """The sweep's mean per type as ``(row labels, column labels, values)``: a row per
        perturbation type, columns layer 0 then each biLSTM layer's forward and backward."""
        if not self.sweep:
            return [], [], []
        means = self.sweep["mean_per_type"]
        n = len(self.sweep["layers"])
        cols = ["L0"] + [f"L{i} {d}" for i in range(1, n) for d in ("fwd", "bwd")]
        rows, values = [], []
        for kind, m in means.items():
            rows.append(kind)
            values.append([m[0][0]] + [m[i][j] for i in range(1, n) for j in (1, 2)])
        return rows, cols, values

    def nonce_columns(self) -> List[Tuple[str, List[Tuple[str, float]]]]:
        """The In context tab's columns: (title, [(word, value)]) — layer 0's neighbours, the
        forward and backward LMs' predictions, the words both agree on."""
        if not self.nonce:
            return []
        d = self.nonce
        return [("layer 0: nearest known words (cosine)", [tuple(p) for p in d["layer0_neighbours"]]),
                ("forward LM (probability)", [tuple(p) for p in d["forward_predictions"]]),
                ("backward LM", [tuple(p) for p in d["backward_predictions"]]),
                ("both agree", [tuple(p) for p in d["both_agree"]])]

    def nonce_kwic(self, width: int = KWIC_WIDTH
                   ) -> List[Tuple[int, List[Tuple[float, str, str, str]]]]:
        """The nonce word's nearest occurrences per layer as ``(layer, [(cosine, left, word,
        right)])``: keyword in context (:func:`~elmo_engine.index.search.kwic`), the left side
        right-aligned in ``width`` characters so that the occurrences of a layer stack, centred,
        in a fixed-width font (``left + " [" + word + "] " + right`` is the engine's
        :func:`~elmo_engine.index.search.kwic_line`)."""
        out = []
        for layer, hits in sorted(self.nonce_hits.items()):
            rows = []
            for h in hits:
                left, word, right = kwic(str(h["text"]).split(" "), int(h["position"]), width)
                rows.append((float(h["cosine"]), f"{left:>{width}}", word, right))
            out.append((layer, rows))
        return out

    def repaired(self) -> List[str]:
        """The types where the top layer (both directions' mean) is closer to the original than
        layer 0: the context repairs the change."""
        rows, _, values = self.sweep_table()
        return [r for r, v in zip(rows, values) if (v[-1] + v[-2]) / 2 > v[0]]

    # ---- state --------------------------------------------------------------------------------
    def view_state(self) -> Dict[str, Any]:
        return {"words": self.words_text, "filters": self.filters_shown,
                "sentence": self.sentence, "word": self.word, "search": self.search,
                "width": self.width, "nonce_sentence": self.nonce_sentence,
                "nonce_word": self.nonce_word, "vocabulary": self.vocab_source.value,
                "vocabulary_file": self.vocab_file, "index": self.index_source.value,
                "index_folder": self.index_folder}

    def restore(self, state: Dict[str, Any]) -> None:
        """Apply a saved :meth:`view_state`; missing or invalid keys are ignored."""
        if not isinstance(state, dict):
            return
        for key, attr in (("words", "words_text"), ("sentence", "sentence"), ("word", "word"),
                          ("search", "search"), ("nonce_sentence", "nonce_sentence"),
                          ("nonce_word", "nonce_word"), ("vocabulary_file", "vocab_file"),
                          ("index_folder", "index_folder")):
            v = state.get(key)
            if isinstance(v, str):
                setattr(self, attr, v[:2000])
        f = state.get("filters")
        if isinstance(f, int) and not isinstance(f, bool) and 1 <= f <= 100:
            self.filters_shown = f
        w = state.get("width")
        if isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= 64:
            self.width = w
        v = state.get("vocabulary")
        if v in {e.value for e in VocabSource}:
            self.vocab_source = VocabSource(v)
        if self.vocab_source is VocabSource.FILE and not self.vocab_file:
            self.vocab_source = VocabSource.REFERENCE
        i = state.get("index")
        if i in {e.value for e in IndexSource}:
            self.index_source = IndexSource(i)
        if self.index_source is IndexSource.FOLDER and not self.index_folder:
            self.index_source = IndexSource.CORPUS

    def vocabulary_label(self) -> str:
        """The vocabulary choice as the view names it (a file by its name)."""
        if self.vocab_source is VocabSource.FILE and self.vocab_file:
            return f"File: {Path(self.vocab_file).name}"
        return VOCAB_LABELS[self.vocab_source]

    def index_label(self) -> str:
        if self.index_source is IndexSource.FOLDER and self.index_folder:
            return f"Index: {Path(self.index_folder).name}"
        return INDEX_LABELS[self.index_source]


def format_ngrams(ngrams: Sequence[dict], n: int = 6) -> str:
    """``"ness⟩ 1.23  less⟩ 1.10 …"``: a filter's best n-grams as one line."""
    return "  ".join(f"{g['ngram']} {g['value']:.2f}" for g in ngrams[:n])
