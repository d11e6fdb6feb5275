"""Minimal pairs: two sentences that differ in one place, scored by each of ELMo's LMs.

In the style of Marvin & Linzen (2018) and BLiMP (Warstadt et al. 2020): a model "prefers" the
grammatical sentence when it gives it the higher log-probability. Each pair is scored by the
forward LM, the backward LM and their combination (the sum of the two log-probabilities, i.e. the
mean of the two directions' log-likelihoods), with the per-token log-probability differences
(good − bad, natural log) that show *where* each direction notices the difference: the forward LM
only at and after the changed word, the backward LM only at and before it.

The sets shipped in ``resources/minimal_pairs/`` (written for this project, not copied from
BLiMP): a TSV with the header ``set  good  bad``, pre-tokenized sentences (tokens separated by
single spaces), the two sentences of a pair of equal length.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from elmo_engine.analysis.language_model.predictions import (BACKWARD, FORWARD, LN2,
                                                             MAX_SENTENCE_TOKENS, predict)
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

#: the most pairs one file may hold, the largest file read, the longest sentence of a pair
#: (issue 38: the file is refused before anything is scored; /dev/zero and a FIFO are not files)
MAX_PAIRS = 10_000
MAX_PAIRS_BYTES = 4 << 20
MAX_PAIR_TOKENS = MAX_SENTENCE_TOKENS
DIRECTIONS = ("forward", "backward", "combined")


@dataclass(frozen=True)
class MinimalPair:
    set: str
    good: Tuple[str, ...]
    bad: Tuple[str, ...]
    line: int = 0


@dataclass(frozen=True)
class PairScore:
    """``log_prob`` (good, bad) per direction (forward, backward, combined), natural log;
    ``forward_diff`` (n+1: words then ``</S>``) and ``backward_diff`` (n+1: ``<S>`` then words)
    per-prediction log-probability differences good − bad."""

    pair: MinimalPair
    log_prob: Tuple[Tuple[float, float], Tuple[float, float], Tuple[float, float]]
    forward_diff: Tuple[float, ...]
    backward_diff: Tuple[float, ...]

    def correct(self, direction: int) -> bool:
        good, bad = self.log_prob[direction]
        return good > bad


@dataclass(frozen=True)
class SetAccuracy:
    set: str
    pairs: int
    accuracy: Tuple[float, float, float]          # forward, backward, combined


def read_pairs(path: Path) -> List[MinimalPair]:
    """Read a minimal-pair TSV (see the module docstring); :class:`InputError` naming the line.
    Only a regular file of at most :data:`MAX_PAIRS_BYTES` is read, with at most
    :data:`MAX_PAIRS` pairs of sentences of at most :data:`MAX_PAIR_TOKENS` tokens."""
    from elmo_engine.files import not_utf8, read_bounded

    path = Path(path)
    try:
        data = read_bounded(path, MAX_PAIRS_BYTES)
        text = data.decode("utf-8")
    except OSError as e:
        raise InputError(f"cannot read ({e.strerror or e})", path=path) from None
    except UnicodeDecodeError as e:
        raise InputError(not_utf8(data, e.start), path=path) from None
    except ValueError as e:
        raise InputError(f"{e} (a minimal-pair file is at most {MAX_PAIRS_BYTES >> 20} MiB and "
                         f"{MAX_PAIRS:,} pairs); split it", path=path) from None
    # lines end at \n, \r\n or \r only: splitlines() would also cut at U+2028 and the like,
    # splitting a pair and moving every line number after it; a byte-order mark is dropped
    lines = re.split(r"\r\n|\n|\r", text.removeprefix("\ufeff"))
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0].strip().split("\t") != ["set", "good", "bad"]:
        raise InputError("the first line must be the header 'set<TAB>good<TAB>bad'", path=path,
                         line=1)
    pairs: List[MinimalPair] = []
    for no, raw in enumerate(lines[1:], start=2):
        if not raw.strip() or raw.startswith("#"):
            continue
        cols = raw.split("\t")
        if len(cols) != 3:
            raise InputError(f"expected 3 tab-separated columns, found {len(cols)}", path=path,
                             line=no)
        good, bad = tuple(cols[1].split()), tuple(cols[2].split())
        if not cols[0].strip() or not good or not bad:
            raise InputError("empty set name or sentence", path=path, line=no)
        if len(good) > MAX_PAIR_TOKENS:
            raise InputError(f"a sentence of {len(good):,} tokens; a minimal pair's sentences "
                             f"have at most {MAX_PAIR_TOKENS:,}", path=path, line=no)
        if len(good) != len(bad):
            raise InputError(f"the two sentences differ in length ({len(good)} vs {len(bad)} "
                             "tokens); a minimal pair differs in one place", path=path, line=no)
        if len(pairs) >= MAX_PAIRS:
            raise InputError(f"more than {MAX_PAIRS:,} pairs; split the file", path=path,
                             line=no)
        pairs.append(MinimalPair(cols[0].strip(), good, bad, no))
    if not pairs:
        raise InputError("no minimal pairs in the file", path=path)
    return pairs


def score_pairs(embedder, softmax, pairs: Sequence[MinimalPair],
                state: Optional[TaskState] = None) -> Tuple[PairScore, ...]:
    """Score every pair in both directions (see the module docstring)."""
    out = []
    for k, pair in enumerate(pairs):
        check(state)
        good, bad = predict(embedder, softmax, [pair.good, pair.bad], top_k=1)
        lp = []
        for d in (FORWARD, BACKWARD):
            lp.append((good.log_prob(d), bad.log_prob(d)))
        lp.append((lp[0][0] + lp[1][0], lp[0][1] + lp[1][1]))

        def diffs(a, b) -> Tuple[float, ...]:
            return tuple((rb.surprisal - ra.surprisal) * LN2 for ra, rb in zip(a, b))

        out.append(PairScore(
            pair=pair, log_prob=(lp[0], lp[1], lp[2]),
            forward_diff=diffs(good.forward + (good.forward_end,),
                               bad.forward + (bad.forward_end,)),
            backward_diff=diffs((good.backward_start,) + good.backward,
                                (bad.backward_start,) + bad.backward)))
        report(state, k + 1, len(pairs), "scoring minimal pairs")
    return tuple(out)


def accuracy_by_set(scores: Sequence[PairScore]) -> Tuple[SetAccuracy, ...]:
    """Per set (in order of first appearance) the share of pairs each direction gets right."""
    groups: Dict[str, List[PairScore]] = {}
    for s in scores:
        groups.setdefault(s.pair.set, []).append(s)

    def share(g: List[PairScore], d: int) -> float:
        return sum(s.correct(d) for s in g) / len(g)

    return tuple(SetAccuracy(name, len(g), (share(g, 0), share(g, 1), share(g, 2)))
                 for name, g in groups.items())


def bundled_pairs() -> List[Path]:
    """The minimal-pair sets shipped with the app."""
    from elmo_engine.resources import minimal_pairs_folder

    return sorted(minimal_pairs_folder().glob("*.tsv"))
