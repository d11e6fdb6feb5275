"""The "Language model" view's state, plain Python (no Qt): the sentence and token shown, the
options, the results of the engine (:mod:`elmo_engine.analysis.language_model`) cached per
checkpoint and tokens, and the text the view shows for them.

The rank colours and bins are the figure module's (:mod:`elmo_engine.io.figures.language_model`), so
the screen and the exported figures agree.
"""
from __future__ import annotations

import html
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from elmo_engine.analysis.language_model import (PairScore, ReachMatrix, SentencePredictions,
                                                 TokenPrediction)
from elmo_engine.analysis.language_model.report import (BUNDLED, RECORDED_PAIRS,
                                                        read_recorded_pairs, reach_rows)
from elmo_engine.io.figures.language_model import (RANK_COLORS, RANK_LABELS, RANK_TEXT_COLORS, rank_bin)
from elmo_explorer.views.softmax_files import missing_softmax_line

__all__ = ["RANK_COLORS", "RANK_LABELS", "RANK_TEXT_COLORS", "RECORDED_PAIRS", "rank_bin",
           "read_recorded_pairs", "LanguageModelModel", "LMOptions", "LRU",
           "missing_softmax_line"]

VERSION = 1
TOP_K_RANGE = (1, 100)
#: sentences (and their results) kept per cache
CACHE_SIZE = 64

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A small least-recently-used cache."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._d: "OrderedDict[K, V]" = OrderedDict()

    def get(self, key: K) -> Optional[V]:
        if key not in self._d:
            return None
        self._d.move_to_end(key)
        return self._d[key]

    def put(self, key: K, value: V) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def __contains__(self, key) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)


@dataclass
class LMOptions:
    """The view's options (saved with a workspace)."""

    top_k: int = 10
    pairs: str = BUNDLED                  # the minimal-pair source: "bundled" or a file

    @classmethod
    def from_dict(cls, d: Any, base: Optional["LMOptions"] = None) -> "LMOptions":
        out = LMOptions(**vars(base)) if base is not None else LMOptions()
        if not isinstance(d, dict):
            return out
        k = d.get("top_k")
        if isinstance(k, int) and not isinstance(k, bool) and TOP_K_RANGE[0] <= k <= TOP_K_RANGE[1]:
            out.top_k = k
        p = d.get("pairs")
        if isinstance(p, str) and p and (p == BUNDLED or Path(p).is_file()):
            out.pairs = p
        return out


@dataclass
class LanguageModelModel:
    """What the view shows. ``sentence``/``token``: the workspace's selection (or the first
    sentence's middle token before anything is selected)."""

    options: LMOptions = field(default_factory=LMOptions)
    checksum: str = ""
    sentence: Optional[int] = None
    token: Optional[int] = None
    tokens: Tuple[str, ...] = ()
    predictions: Optional[SentencePredictions] = None
    reach: Optional[ReachMatrix] = None
    #: one line when the checkpoint has no usable softmax ("" while it has, or is being read)
    softmax_problem: str = ""
    pair_scores: Tuple[PairScore, ...] = ()
    pairs_source: str = ""                # the source the shown scores came from
    pairs_recorded: bool = False          # the shown scores are the recorded ones
    pair: Optional[int] = None
    cache_predictions: LRU = field(default_factory=LRU)
    cache_reach: LRU = field(default_factory=LRU)
    cache_pairs: LRU = field(default_factory=lambda: LRU(8))

    # ---- keys and cache -----------------------------------------------------------------------
    def prediction_key(self, tokens: Sequence[str]) -> tuple:
        return (self.checksum, tuple(tokens), self.options.top_k)

    def reach_key(self, tokens: Sequence[str]) -> tuple:
        return (self.checksum, tuple(tokens))

    def reach_problem(self) -> str:
        """Why the shown sentence has no reach matrix ("" when it can have one): a sentence
        over the engine's bound (it runs n+1 variants); its predictions are computed all the
        same, as ``lm`` computes them without ``--reach``."""
        from elmo_engine.analysis.language_model.reach import MAX_REACH_TOKENS

        n = len(self.tokens)
        if n <= MAX_REACH_TOKENS:
            return ""
        return f"No reach: {n:,} tokens, more than {MAX_REACH_TOKENS}"   # (it runs n+1 variants)

    def reach_done(self) -> bool:
        """Whether the shown sentence's reach is there or is not to be computed."""
        return self.reach is not None or bool(self.reach_problem())

    def pairs_key(self, source: str) -> tuple:
        return (self.checksum, source)

    def model_changed(self, checksum: str) -> None:
        """A new checkpoint: its results are computed afresh (the caches key on the checksum)."""
        self.checksum = checksum
        self.predictions, self.reach, self.softmax_problem = None, None, ""
        self.pair_scores, self.pairs_source, self.pair = (), "", None
        self.pairs_recorded = False

    def show_sentence(self, sentence: int, tokens: Sequence[str], token: Optional[int]) -> bool:
        """Show ``tokens`` (sentence ``sentence``) with ``token`` selected; True when the results
        are all cached (nothing to compute), with them filled in."""
        self.sentence, self.tokens = sentence, tuple(tokens)
        self.token = token if token is not None and 0 <= token < len(tokens) else (
            len(tokens) // 2 if tokens else None)
        self.predictions = self.cache_predictions.get(self.prediction_key(self.tokens))
        self.reach = self.cache_reach.get(self.reach_key(self.tokens))
        return self.reach_done() and (self.predictions is not None
                                      or bool(self.softmax_problem))

    def needs(self) -> Tuple[bool, bool]:
        """(predictions, reach) still to compute for the shown tokens."""
        if not self.tokens:
            return False, False
        return (self.predictions is None and not self.softmax_problem, not self.reach_done())

    def store(self, tokens: Sequence[str], top_k: int, predictions: Optional[SentencePredictions],
              reach: Optional[ReachMatrix]) -> None:
        """Results of a job (for ``tokens`` at ``top_k``); shown when they are the current ones."""
        tokens = tuple(tokens)
        if predictions is not None:
            self.cache_predictions.put((self.checksum, tokens, top_k), predictions)
        if reach is not None:
            self.cache_reach.put(self.reach_key(tokens), reach)
        if tokens == self.tokens:
            if predictions is not None and top_k == self.options.top_k:
                self.predictions = predictions
            if reach is not None:
                self.reach = reach

    def store_pairs(self, source: str, scores: Tuple[PairScore, ...],
                    recorded: bool = False) -> None:
        """Show ``scores`` of ``source``; computed ones are cached, recorded ones not (Score
        computes them)."""
        if not recorded:
            self.cache_pairs.put(self.pairs_key(source), scores)
        self.pair_scores, self.pairs_source, self.pairs_recorded = scores, source, recorded
        self.pair = 0 if scores else None

    # ---- what the view draws ------------------------------------------------------------------
    def token_bins(self) -> Optional[List[Tuple[int, int]]]:
        """Per token (forward bin, backward bin), 0 … 3 (:func:`rank_bin`); None without
        predictions."""
        p = self.predictions
        if p is None:
            return None
        return [(rank_bin(f.rank), rank_bin(b.rank)) for f, b in zip(p.forward, p.backward)]

    def perplexity_text(self) -> str:
        p = self.predictions
        if p is None:
            return ""
        return (f"Perplexity: forward {p.perplexity[0]:,.1f} · backward {p.perplexity[1]:,.1f} "
                f"({len(p.tokens) + 1} predictions each)")

    def token_tip(self, i: int) -> str:
        """The one-line hover text of token ``i``."""
        p = self.predictions
        word = self.tokens[i]
        if p is None:
            return f"{word}: click for its reach"
        f, b = p.forward[i], p.backward[i]
        return (f"{word}: forward rank {f.rank:,} ({f.surprisal:.2f} bits), backward rank "
                f"{b.rank:,} ({b.surprisal:.2f} bits)")

    def detail_html(self, i: Optional[int]) -> str:
        """Both directions' record of token ``i`` (rank, probability, surprisal, entropy,
        top-k) and the substitutes, as HTML for a text browser."""
        if i is None or not (0 <= i < len(self.tokens)):
            return "<p>Click a token.</p>"
        word = html.escape(self.tokens[i])
        p = self.predictions
        out = [f"<p><b>{word}</b> (token {i + 1} of {len(self.tokens)})</p>"]
        if p is None:
            out.append("<p>" + html.escape(self.softmax_problem or "Computing the predictions…")
                       + "</p>")
            return "".join(out)
        if not p.forward[i].in_vocabulary:
            out.append("<p><i>Not in the softmax vocabulary: scored as &lt;UNK&gt;.</i></p>")
        out.append("<table cellspacing='0' cellpadding='2'><tr>")
        for name, rec, side in (("Forward LM", p.forward[i], "sees the words to the left"),
                                ("Backward LM", p.backward[i], "sees the words to the right")):
            out.append("<td valign='top' style='padding-right:14px'>"
                       + _record_html(name, side, rec) + "</td>")
        subs = p.substitutes[i]
        out.append("<td valign='top'><b>Substitutes</b><br><small>both directions agree</small>"
                   + _candidates_html(subs) + "</td></tr></table>")
        return "".join(out)

    def reach_heatmap(self) -> Tuple[Optional[np.ndarray], List[str]]:
        """The selected token's reach rows: (2·(L+1), n) and their labels (None: not yet)."""
        if self.reach is None or self.token is None:
            return None, []
        return reach_rows(self.reach, self.token)

    def reach_top(self) -> Optional[float]:
        """The colour scale's upper end: the largest distance caused by *another* token
        (replacing the token itself moves it most and would wash out the rest); None when
        there is none (then the largest value)."""
        m, _ = self.reach_heatmap()
        if m is None or self.token is None or m.shape[1] < 2:
            return None
        others = np.delete(m, self.token, axis=1)
        top = float(others.max())
        return top if top > 0 else None

    def reach_hover(self, row: int, j: int) -> str:
        m, labels = self.reach_heatmap()
        if m is None or self.token is None or not (0 <= row < m.shape[0] and 0 <= j < m.shape[1]):
            return ""
        return (f"'{self.tokens[self.token]}', {labels[row]}: moves {m[row, j]:.4f} (cosine "
                f"distance) when '{self.tokens[j]}' is replaced by <UNK>")

    # ---- minimal pairs ------------------------------------------------------------------------
    def accuracy_rows(self) -> List[Tuple[str, int, float, float, float]]:
        from elmo_engine.analysis.language_model import accuracy_by_set

        return [(a.set, a.pairs, *a.accuracy) for a in accuracy_by_set(self.pair_scores)]

    def pair_rows(self) -> List[Tuple[str, str, str, bool, bool]]:
        """Per pair: set, good, bad, forward right, backward right."""
        return [(s.pair.set, " ".join(s.pair.good), " ".join(s.pair.bad), s.correct(0),
                 s.correct(1)) for s in self.pair_scores]

    def pair_differences(self, k: Optional[int] = None):
        """Pair ``k``'s (default: the selected) words and per-word log-probability differences
        good − bad: (words, forward (n,), backward (n,)); None without pairs."""
        k = self.pair if k is None else k
        if k is None or not (0 <= k < len(self.pair_scores)):
            return None
        s = self.pair_scores[k]
        n = len(s.pair.good)
        words = [g if g == b else f"{g}/{b}" for g, b in zip(s.pair.good, s.pair.bad)]
        return (words, np.array(s.forward_diff[:n], float), np.array(s.backward_diff[1:n + 1],
                                                                     float))

    # ---- workspace state ----------------------------------------------------------------------
    def view_state(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {"version": VERSION, "top_k": self.options.top_k}
        if self.sentence is not None:
            state["sentence"] = self.sentence
        if self.token is not None:
            state["token"] = self.token
        if self.pairs_source:
            state["pairs"] = self.pairs_source
            if self.pair is not None:
                state["pair"] = self.pair
        elif self.options.pairs != BUNDLED:
            state["pairs_file"] = self.options.pairs
        return state

    def restore(self, state: Any) -> Tuple[Optional[Tuple[int, int]], Optional[str],
                                           Optional[int]]:
        """Apply a saved ``view_state()`` (invalid keys ignored). Returns the saved (sentence,
        token), the pairs source that was scored, and the selected pair, for the panel to act
        on."""
        if not isinstance(state, dict):
            return None, None, None
        self.options = LMOptions.from_dict(
            {"top_k": state.get("top_k"),
             "pairs": state.get("pairs") or state.get("pairs_file")}, self.options)
        s, t = state.get("sentence"), state.get("token")
        where = (s, t) if isinstance(s, int) and isinstance(t, int) and s >= 0 and t >= 0 else None
        src = state.get("pairs")
        src = src if isinstance(src, str) and src == self.options.pairs else None
        pair = state.get("pair")
        pair = pair if isinstance(pair, int) and not isinstance(pair, bool) and pair >= 0 else None
        return where, src, pair


def _record_html(name: str, side: str, rec: TokenPrediction) -> str:
    k = rank_bin(rec.rank)
    label = RANK_LABELS[k].replace(" ", "&nbsp;")          # a badge never breaks in two
    swatch = (f"<span style='background:{RANK_COLORS[k]};color:{RANK_TEXT_COLORS[k]}'>"
              f"&nbsp;{label}&nbsp;</span>")
    return (f"<b>{name}</b><br><small>{side}</small><br>"
            f"rank {rec.rank:,} {swatch}<br>p = {rec.prob:.4g}<br>"
            f"surprisal {rec.surprisal:.2f} bits<br>entropy {rec.entropy:.2f} bits"
            + _candidates_html(rec.top, rec.word))


def _candidates_html(cands, actual: Optional[str] = None) -> str:
    rows = []
    for c in cands:
        w = html.escape(c.word)
        if actual is not None and c.word == actual:
            w = f"<b>{w}</b>"
        rows.append(f"<tr><td>{w}</td><td align='right'>{c.prob:.3f}</td></tr>")
    return "<table cellspacing='0' cellpadding='1'>" + "".join(rows) + "</table>"
