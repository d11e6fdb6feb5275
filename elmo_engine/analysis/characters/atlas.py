"""The filter atlas: for every filter, the n-grams of a vocabulary that fire it most.

Exact, not sampled: a window's value depends only on its characters, so every distinct max-pool
window of the vocabulary (width w: the ``M − w + 1`` windows of each word's ``M`` ids, the word's
marks and padding included) is scored once by every filter of width w, and each filter keeps
its ``top`` best windows. A filter's best window over the vocabulary is therefore the largest
max-pool value any vocabulary word gives it. Search (:meth:`Atlas.search`) ranks the filters by
the best window that holds a query n-gram, relative to the filter's best window; the
categories (:func:`categorise`) say what a filter's best windows have in common.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.analysis.characters.windows import Filters, all_windows, query_ids, render_ids
from elmo_engine.errors import InputError
from elmo_engine.model.chars import BOW_CHAR, EOW_CHAR, PAD_CHAR, char_ids_for_types
from elmo_engine.progress import TaskState, check, report

#: ids are < 262 < 2**9: a window of up to 7 ids is one int64 key
BASE = 262
MAX_KEY_WIDTH = 7


class Category(str, Enum):
    """What a filter's best windows have in common (the share of them that …)."""

    CAPITALS = "capitals"          # … hold an upper-case letter
    DIGITS = "digits"              # … hold a digit
    PUNCTUATION = "punctuation"    # … hold a punctuation mark or symbol
    PREFIX = "prefix"              # … start at the begin-of-word mark
    SUFFIX = "suffix"              # … end at the end-of-word mark
    WORD_INTERNAL = "word-internal"  # none of these in most of them
    PADDING = "padding"            # the best window is padding only (fires on short words)


#: the order categories are tested in; the first with a share ≥ :data:`SHARE` wins
CATEGORY_ORDER = (Category.DIGITS, Category.CAPITALS, Category.PUNCTUATION, Category.SUFFIX,
                  Category.PREFIX)
SHARE = 0.5


@dataclass(frozen=True)
class WidthTable:
    """The distinct windows of one filter width and each filter's best ones."""

    width: int
    first_filter: int
    windows: np.ndarray        # (U, w) int16: every distinct window of the vocabulary
    first_word: np.ndarray     # (U,) int32: a word that holds it
    top: np.ndarray            # (k, T) int32: each filter's best windows (rows of windows)
    top_values: np.ndarray     # (k, T) float32: their values (conv + bias)


@dataclass(frozen=True)
class FilterEntry:
    """One filter's atlas entry."""

    filter: int
    width: int
    category: Category
    shares: Dict[Category, float]
    ngrams: Tuple[Tuple[str, float, str], ...]      # (n-gram, value, an example word)

    def to_dict(self) -> dict:
        return {"filter": self.filter, "width": self.width, "category": self.category.value,
                "shares": {c.value: round(v, 3) for c, v in self.shares.items()},
                "ngrams": [{"ngram": g, "value": round(v, 5), "example": e}
                           for g, v, e in self.ngrams]}


class Atlas:
    """Every filter's best n-grams over a vocabulary (see the module's docstring)."""

    def __init__(self, filters: Filters, words: Sequence[str], tables: Sequence[WidthTable]):
        self.filters = filters
        self.words = list(words)
        self.tables = list(tables)
        self._width_of = filters.widths()

    # ---- building ---------------------------------------------------------------------------
    @classmethod
    def build(cls, filters: Filters, words: Sequence[str], top: int = 10,
              state: Optional[TaskState] = None, block: int = 64) -> "Atlas":
        """Score every distinct window of ``words`` with every filter of its width and keep
        each filter's ``top`` best. ``state``: progress per filter bank, cancel between blocks."""
        words = list(dict.fromkeys(w for w in words if w))
        if not words:
            raise InputError("the vocabulary holds no word")
        if top < 1:
            raise InputError("--top must be at least 1")
        ids = char_ids_for_types(words, filters.max_chars)                  # (n, M)
        tables = []
        for b, (width, _, bias, first) in enumerate(filters.banks):
            report(state, b, len(filters.banks), f"filters of width {width}")
            windows, first_word = distinct_windows(ids, width)
            k = int(bias.shape[0])
            t = min(top, len(windows))
            top_idx = np.empty((k, t), np.int32)
            top_val = np.empty((k, t), np.float32)
            with torch.inference_mode():
                for s in range(0, len(windows), 1 << 16):                   # (U, k) in slices
                    check(state)
                    v = filters.window_values(b, windows[s:s + (1 << 16)])
                    best = torch.topk(v, min(t, v.shape[0]), dim=0)         # (t', k)
                    if s == 0:
                        cur_v, cur_i = best.values, best.indices + s
                    else:
                        both_v = torch.cat([cur_v, best.values])
                        both_i = torch.cat([cur_i, best.indices + s])
                        keep = torch.topk(both_v, t, dim=0)
                        cur_v = keep.values
                        cur_i = torch.gather(both_i, 0, keep.indices)
                top_val[:] = cur_v.T.numpy()
                top_idx[:] = cur_i.T.numpy()
            tables.append(WidthTable(width, first, windows.astype(np.int16), first_word,
                                     top_idx, top_val))
        report(state, len(filters.banks), len(filters.banks), "filters done")
        return cls(filters, words, tables)

    # ---- reading ----------------------------------------------------------------------------
    def _table(self, j: int) -> WidthTable:
        for t in self.tables:
            if t.first_filter <= j < t.first_filter + t.top.shape[0]:
                return t
        raise InputError(f"no filter {j} (the model has {self.filters.n_filters})")

    def entry(self, j: int, top: Optional[int] = None) -> FilterEntry:
        """Filter ``j``'s best n-grams, their values and an example word each, and its
        category."""
        t = self._table(j)
        row = j - t.first_filter
        n = t.top.shape[1] if top is None else min(top, t.top.shape[1])
        wins = [t.windows[i] for i in t.top[row]]
        shares = category_shares(wins)
        ngrams = tuple((render_ids(t.windows[i]), float(v), self.words[int(t.first_word[i])])
                       for i, v in zip(t.top[row][:n], t.top_values[row][:n]))
        return FilterEntry(j, t.width, categorise(wins, shares), shares, ngrams)

    def entries(self, width: Optional[int] = None, top: Optional[int] = None
                ) -> List[FilterEntry]:
        """Every filter's entry (of width ``width`` only, if given), by filter index."""
        if width is not None and width not in {t.width for t in self.tables}:
            raise InputError(f"--width {width}: the model's filter widths are "
                             + ", ".join(str(t.width) for t in self.tables))
        return [self.entry(j, top) for t in self.tables
                if width is None or t.width == width
                for j in range(t.first_filter, t.first_filter + t.top.shape[0])]

    def search(self, text: str, limit: Optional[int] = 20) -> List[Tuple[int, float, str, float]]:
        """The filters that fire most on windows holding the n-gram ``text`` (``-ness``: a
        suffix; ``un-``: a prefix): ``(filter, relative, best window, value)``, by
        ``relative`` = the best such window's value over the filter's best value
        (1.0: the query's windows are this filter's favourites); the first ``limit`` (None:
        every filter that has such a window, to be filtered, by width say, before a cut)."""
        q = np.array(query_ids(text), np.int16)
        if len(q) == 0:
            raise InputError(f"empty n-gram: {text!r}")
        hits = []
        with torch.inference_mode():
            for b, t in enumerate(self.tables):
                rows = windows_holding(t.windows, q)
                if not len(rows):
                    continue
                v = self.filters.window_values(b, t.windows[rows])             # (r, k)
                best, arg = v.max(0)
                top = t.top_values[:, 0]
                for row in range(len(top)):
                    rel = float(best[row]) / float(top[row]) if top[row] > 0 else 0.0
                    hits.append((t.first_filter + row, rel,
                                 render_ids(t.windows[rows[int(arg[row])]]), float(best[row])))
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits if limit is None else hits[:limit]

    def category_counts(self) -> Dict[int, Dict[Category, int]]:
        """Filters per width and category."""
        out: Dict[int, Dict[Category, int]] = {}
        for e in self.entries():
            d = out.setdefault(e.width, {c: 0 for c in Category})
            d[e.category] += 1
        return out

    def to_tsv(self, top: int = 10) -> str:
        """One line per filter: filter, width, category, the category shares, its best n-grams
        with their values (``ngram=value`` joined by spaces; the marks are ⟨ ⟩ ·)."""
        lines = ["filter\twidth\tcategory\t" + "\t".join(c.value for c in CATEGORY_ORDER)
                 + "\tngrams"]
        for e in self.entries(top=top):
            grams = " ".join(f"{_tsv_safe(g)}={v:.4f}" for g, v, _ in e.ngrams)
            lines.append(f"{e.filter}\t{e.width}\t{e.category.value}\t"
                         + "\t".join(f"{e.shares[c]:.2f}" for c in CATEGORY_ORDER)
                         + f"\t{grams}")
        return "\n".join(lines) + "\n"


def _tsv_safe(text: str) -> str:
    return text.replace("\t", "\\t").replace("\n", "\\n").replace(" ", "␠").replace("=", "\\=")


def distinct_windows(ids: np.ndarray, width: int) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct max-pool windows of width ``width`` over the rows ``ids`` (n, M):
    ``(windows (U, w), first_word (U,))`` sorted by their key."""
    n, m = ids.shape
    npos = m - width + 1
    if width <= MAX_KEY_WIDTH:
        keys = np.zeros((n, npos), np.int64)
        for i in range(width):
            keys = keys * BASE + ids[:, i:i + npos]
        uniq, first = np.unique(keys.ravel(), return_index=True)
        del uniq
    else:                                     # wider than a key holds: sort the rows
        flat = all_windows(ids, width).reshape(n * npos, width)
        _, first = np.unique(flat, axis=0, return_index=True)
    words, pos = np.divmod(first, npos)
    windows = all_windows(ids, width)[words, pos]                             # (U, w)
    return np.ascontiguousarray(windows), words.astype(np.int32)


def windows_holding(windows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Rows of ``windows`` (U, w) that hold ``q`` as a contiguous run (rows of a window
    narrower than ``q`` hold part of it: the window must lie inside ``q`` then)."""
    u, w = windows.shape
    if len(q) <= w:
        hit = np.zeros(u, bool)
        for s in range(w - len(q) + 1):
            hit |= (windows[:, s:s + len(q)] == q).all(1)
        return np.nonzero(hit)[0]
    inner = np.lib.stride_tricks.sliding_window_view(q, w)                    # (len(q)−w+1, w)
    hit = np.zeros(u, bool)
    for row in inner:
        hit |= (windows == row).all(1)
    return np.nonzero(hit)[0]


def _has(win: np.ndarray, test) -> bool:
    data = bytes(int(i) - 1 for i in win if 1 <= int(i) <= 256).decode("utf-8", errors="ignore")
    return any(test(ch) for ch in data)


def _punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def category_shares(windows: Sequence[np.ndarray]) -> Dict[Category, float]:
    """The share of ``windows`` in each category (:class:`Category`; a window may be in
    several)."""
    n = max(1, len(windows))
    return {
        Category.DIGITS: sum(_has(w, str.isdigit) for w in windows) / n,
        Category.CAPITALS: sum(_has(w, str.isupper) for w in windows) / n,
        Category.PUNCTUATION: sum(_has(w, _punct) for w in windows) / n,
        Category.SUFFIX: sum(bool((w == EOW_CHAR).any()) for w in windows) / n,
        Category.PREFIX: sum(bool((w == BOW_CHAR).any()) for w in windows) / n,
    }


def categorise(windows: Sequence[np.ndarray], shares: Dict[Category, float]) -> Category:
    """A filter's category: padding if its best window is padding only; else the first of
    :data:`CATEGORY_ORDER` that at least half of its best windows are in; else word-internal."""
    if len(windows) and bool((windows[0] == PAD_CHAR).all()):
        return Category.PADDING
    for c in CATEGORY_ORDER:
        if shares[c] >= SHARE:
            return c
    return Category.WORD_INTERNAL
