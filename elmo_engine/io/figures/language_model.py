"""The language-model figures (the app's "Language model" view and its report part), drawn with
the helpers of :mod:`elmo_engine.io.figures`, the one figure module.

* :func:`sentence_figure`: the sentence's tokens in two rows (forward LM above, backward LM
  below), each coloured by the rank of the actual word in four bins as GLTR does (Gehrmann et
  al. 2019: top 10 / 100 / 1,000 / beyond) with its surprisal in bits, and the reach of the
  selected token (how far its vector moves per layer and direction when each other token is
  replaced by ``<UNK>``) as a heatmap under it;
* :func:`pairs_figure`: minimal-pair accuracy per set and direction, and one pair's per-token
  log-probability differences.

The rank colours are :data:`RANK_COLORS` (viridis at four steps: ordered by lightness and told
apart under the common colour-vision deficiencies); the app's view uses the same ones.

Inputs are plain values (words, ranks, arrays), so this module needs nothing above ``io``.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.io import figures as _F
from elmo_engine.io.figures import PALETTE, baseline, grouped_bars, heatmap, legend_outside

#: upper rank of each bin (rank 1 = the LM's first choice); ranks above the last: "beyond"
RANK_BINS: Tuple[int, ...] = (10, 100, 1000)
RANK_LABELS: Tuple[str, ...] = ("top 10", "top 100", "top 1,000", "beyond")
#: viridis at 0.9, 0.6, 0.3, 0.0: light = expected, dark = surprising
RANK_COLORS: Tuple[str, ...] = ("#bddf26", "#2a9d8f", "#3b528b", "#440154")
#: the text colour readable on each rank colour
RANK_TEXT_COLORS: Tuple[str, ...] = ("#000000", "#000000", "#ffffff", "#ffffff")
#: forward, backward (and combined) in line and bar plots
DIRECTION_COLORS: Tuple[str, ...] = (PALETTE[0], PALETTE[1], "#444444")
DIRECTION_NAMES: Tuple[str, ...] = ("forward", "backward", "combined")


def rank_bin(rank: int) -> int:
    """0 … 3: the GLTR bin of a rank (1-based)."""
    for k, top in enumerate(RANK_BINS):
        if rank <= top:
            return k
    return len(RANK_BINS)


def sentence_figure(tokens: Sequence[str], ranks: Optional[Sequence[Sequence[int]]],
                    surprisal: Optional[Sequence[Sequence[float]]],
                    perplexity: Optional[Tuple[float, float]], selected: Optional[int],
                    reach_rows: Optional[np.ndarray], reach_labels: Sequence[str],
                    title: str = ""):
    """The token rows (``ranks``/``surprisal``: (2, n), forward then backward; None without a
    softmax) over the reach heatmap of token ``selected`` (``reach_rows``: (rows, n), one row
    per layer and direction, labelled by ``reach_labels``; None: not computed)."""
    from matplotlib.patches import Patch, Rectangle

    n = len(tokens)
    width = max(6.0, min(18.0, 0.75 * n + 2.0))
    has_reach = reach_rows is not None and np.size(reach_rows) > 0
    fig = _F.figure(width, 4.8 if has_reach else 2.0)
    if has_reach:
        ax, ax_r = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1, 2.2]})
    else:
        ax, ax_r = fig.add_subplot(1, 1, 1), None
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(1.6, -0.6)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["forward →", "← backward"])
    ax.set_xticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    for i, word in enumerate(tokens):
        for d in range(2):
            if ranks is not None:
                k = rank_bin(int(ranks[d][i]))
                face, text = RANK_COLORS[k], RANK_TEXT_COLORS[k]
                label = f"{word}\n{surprisal[d][i]:.1f} b" if surprisal is not None else word
            else:
                face, text, label = "#eeeeee", "#000000", word
            edge = "#d95f02" if i == selected else "white"
            ax.add_patch(Rectangle((i - 0.48, d - 0.45), 0.96, 0.9, facecolor=face,
                                   edgecolor=edge, linewidth=2.5 if i == selected else 1.0))
            ax.text(i, d, label, ha="center", va="center", fontsize="small", color=text,
                    clip_on=True)
    if ranks is not None:
        handles = [Patch(facecolor=c, edgecolor="#888888", label=lab)
                   for c, lab in zip(RANK_COLORS, RANK_LABELS)]
        ax.legend(handles=handles, title="rank of the word", loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    head = title
    if perplexity is not None:
        head += ("  —  " if head else "") + (f"perplexity: forward {perplexity[0]:.1f}, "
                                             f"backward {perplexity[1]:.1f}")
    if head:
        ax.set_title(head, fontsize="medium")
    if ax_r is not None:
        heatmap(fig, ax_r, reach_rows, list(reach_labels), list(tokens),
                "cosine distance", vmin=0.0, annotate=n <= 14,
                xlabel="token replaced by <UNK>",
                ylabel=f"'{tokens[selected]}' moves" if selected is not None else "")
    return fig


def pairs_figure(sets: Sequence[str], accuracy: np.ndarray,
                 pair_tokens: Optional[Sequence[str]] = None,
                 diffs: Optional[Tuple[Sequence[float], Sequence[float]]] = None,
                 pair_title: str = ""):
    """Accuracy per set (``accuracy``: (sets, 3): forward, backward, combined) as grouped bars
    with chance (0.5) as a baseline; with ``diffs`` (forward (n+1), backward (n+1)) a second
    panel of one pair's per-token log-probability differences good − bad."""
    two = diffs is not None and pair_tokens is not None
    fig = _F.figure(11.0 if two else 6.4, 3.6)
    axes: Any = fig.subplots(1, 2 if two else 1, gridspec_kw={"width_ratios": [1, 1.4]} if two else None)
    ax = axes[0] if two else axes
    acc = np.asarray(accuracy, float)
    series = [{"label": DIRECTION_NAMES[d], "values": acc[:, d], "color": DIRECTION_COLORS[d]}
              for d in range(3)]
    grouped_bars(ax, [name.replace("_", " ") for name in sets], series, ylabel="accuracy")
    ax.set_ylim(0, 1.05)
    baseline(ax, 0.5, "chance")
    ax.set_title("minimal pairs: accuracy per set", fontsize="medium")
    for label in ax.get_xticklabels():
        label.set_rotation(20)
        label.set_horizontalalignment("right")
    legend_outside(ax)
    if two:
        assert diffs is not None and pair_tokens is not None
        ax2 = axes[1]
        fwd, bwd = np.asarray(diffs[0], float), np.asarray(diffs[1], float)
        n = len(pair_tokens)
        x = np.arange(n)
        # forward_diff: words then </S>; backward_diff: <S> then words — the words only
        ax2.bar(x - 0.2, fwd[:n], 0.4, color=DIRECTION_COLORS[0], label="forward")
        ax2.bar(x + 0.2, bwd[1:n + 1], 0.4, color=DIRECTION_COLORS[1], label="backward")
        ax2.axhline(0.0, color="#444444", linewidth=0.8)
        ax2.set_xticks(x)
        ax2.set_xticklabels(pair_tokens, rotation=45, ha="right", fontsize="small")
        ax2.set_ylabel("log p(good) − log p(bad)")
        ax2.set_title(pair_title, fontsize="medium")
        ax2.spines[["top", "right"]].set_visible(False)
        legend_outside(ax2)
    return fig
