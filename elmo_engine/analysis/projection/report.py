"""The projection view's share of a report (:mod:`elmo_engine.analysis.report` gathers the
parts): every token of the workspace's sentences projected to 2-D, one panel per layer and the
scalar mix, the compared word's occurrences drawn above the rest — seeded UMAP (McInnes et al.
2018) with the saved view's settings when the workspace holds that view and umap-learn is
installed, else PCA.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.projection.faithfulness import FAITHFULNESS_K
from elmo_engine.io import figures as F
from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.report import ReportPart, saved_figures

#: the most tokens the report projects (a fixed uniform sample, seed 0, beyond it)
PROJECTION_MAX_POINTS = 5000
#: UMAP's seed when the saved projection view names none (or asks for a random one)
PROJECTION_SEED = 42
#: the colour of the tokens that are not the compared word
OTHER_TOKENS_COLOR = "#56B4E9"
#: the compared word's groups (senses), in the order of their names (Okabe–Ito, no sky blue)
GROUP_COLORS = ("#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#000000", "#F0E442")


def projection_params(state):
    """How the report projects: ``(method, UmapParams)``. Seeded UMAP with the saved view's
    settings when the workspace holds a projection view (it draws UMAP) and umap-learn is
    installed; else PCA (deterministic, no compile)."""
    import importlib.util

    from elmo_engine.analysis.projection import UmapParams

    if not isinstance(state, dict) or importlib.util.find_spec("umap") is None:
        return "pca", UmapParams()
    u = state.get("umap") if isinstance(state.get("umap"), dict) else {}

    def whole(v, lo, hi):
        return v if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi else None

    seed = whole(u.get("seed"), 0, 2 ** 31 - 1)
    n_neighbors = whole(u.get("n_neighbors"), 2, 200) or 15
    md = u.get("min_dist")
    min_dist = float(md) if isinstance(md, (int, float)) and not isinstance(md, bool) \
        and 0.0 <= md <= 1.0 else 0.1
    epochs = whole(u.get("epochs"), 0, 5000)
    return "umap", UmapParams(n_neighbors=n_neighbors, min_dist=min_dist,
                              random_state=PROJECTION_SEED if seed is None else seed,
                              n_epochs=max(10, epochs) if epochs else None)


def projection_layers(state, n_layers: int):
    """Layers 0 … L and the scalar mix with the saved view's weights (equal by default)."""
    from elmo_engine.analysis.projection import LayerSpec

    layers = [LayerSpec.single(k) for k in range(n_layers)]
    if n_layers > 1:
        state = state if isinstance(state, dict) else {}
        w = state.get("mix_weights")
        ok = (isinstance(w, list) and len(w) == n_layers and sum(w) > 0 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in w))
        layers.append(LayerSpec.mix(w if ok else [1.0] * n_layers,
                                    state.get("layer_norm") is True))
    return layers


def group_colors(names: Sequence[str]) -> Tuple[List[str], List[Tuple[str, str]]]:
    """Per occurrence its group's colour, and the legend ``[(name (n), colour)]``: the groups in
    the order of their names (so a sense has one colour in every figure of the report), "" (no
    group) in :data:`~elmo_engine.io.figures.USER_COLOR`; groups beyond the palette share its
    last colour."""
    from elmo_engine.analysis.contexts.groups import split_group

    sense = [split_group(g)[1] if g else "" for g in names]
    named = sorted({s for s in sense if s})
    colour = {s: GROUP_COLORS[min(i, len(GROUP_COLORS) - 1)] for i, s in enumerate(named)}
    colour[""] = F.USER_COLOR
    legend = [(f"{s or 'no group'} ({sense.count(s)})", colour[s])
              for s in named + ([""] if "" in sense else [])]
    return [colour[s] for s in sense], legend


def projection_figure(tokens, acts, word: Optional[str], state=None,
                      groups: Optional[Dict[Tuple[int, int], str]] = None):
    """The report's projection grid: every token of ``tokens`` (a sample of
    :data:`PROJECTION_MAX_POINTS` beyond it) projected to 2-D, one panel per layer and the mix
    (the projection view's maps, :mod:`elmo_engine.analysis.projection`); the occurrences of
    ``word`` drawn above the rest, coloured by their group (sense; ``groups``: ``{(sentence,
    token): group}``, :func:`group_colors`) and named in the legend; a map whose points are all
    the same is a note. ``state``: the saved projection view (its UMAP settings and mix
    weights).

    Each panel's title carries how faithful its map is (trustworthiness, continuity, kNN kept:
    :func:`~elmo_engine.analysis.projection.map_faithfulness`).

    Returns ``(figure, points, projections, how)``: ``how`` says in words which method drew
    the maps (for the caption)."""
    from elmo_engine.analysis.projection import (Projector, all_tokens, collapsed_note,
                                                 map_faithfulness)
    from elmo_engine.io.figures.projection import projection_grid

    points = all_tokens(tokens, f"{len(tokens)} sentences").sample(PROJECTION_MAX_POINTS, seed=0)
    method, params = projection_params(state)
    layers = projection_layers(state, acts[0].shape[0])
    projections = Projector().run(acts, points, layers, method, params, pca_fallback=True)
    mine = np.array([w == word for w in points.words], bool)
    n_mine = int(mine.sum())
    colors = [OTHER_TOKENS_COLOR] * len(points)
    where = np.flatnonzero(mine)
    groups = groups or {}
    mine_colors, mine_legend = group_colors(
        [groups.get((int(points.sentence[i]), int(points.position[i])), "") for i in where])
    for i, c in zip(where, mine_colors):
        colors[i] = c
    panels = []
    for p in projections:
        if p.method == "pca":
            ex = p.explained or (0.0, 0.0)
            title = f"PCA ({100 * ex[0]:.0f} % + {100 * ex[1]:.0f} % of variance)"
        else:
            title = "UMAP"
        note = collapsed_note(p, points.words)
        f = None if note else map_faithfulness(acts, points, p, metric=params.metric)
        panels.append({"title": "\n".join([f"{p.layer.name}: {title}",
                                           *(f.caption_lines() if f else ())]),
                       "xy": p.coords, "colors": colors, "labels": list(points.words),
                       "highlight": mine if n_mine else None, "note": note})
    legend = [(f"other tokens ({len(points) - n_mine:,})" if n_mine else
               f"tokens ({len(points):,})", OTHER_TOKENS_COLOR)]
    if len(mine_legend) > 1 or (mine_legend and not mine_legend[0][0].startswith("no group")):
        legend += [(f"'{word}': {name}", c) for name, c in mine_legend]
    fig = projection_grid(panels, legend, user_label=f"'{word}' ({n_mine})")
    used = sorted({p.method for p in projections})
    if "umap" in used:
        how = (f"UMAP (seed {params.random_state}, {params.n_neighbors} neighbours, min dist "
               f"{params.min_dist:.2f}, cosine kNN on {params.pca_dims} PCA dimensions)")
        if "pca" in used:
            how += "; PCA where there were too few distinct points for UMAP"
    else:
        how = "PCA (the first two principal components; the share of variance in each title)"
    return fig, points, projections, how


def projection_part(tokens, acts, word: Optional[str], state, figure_dir: Optional[Path],
                    style: FigureStyle, where: str,
                    groups: Optional[Dict[Tuple[int, int], str]] = None) -> ReportPart:
    """The projection grid (:func:`projection_figure`) as a figure of the report, captioned
    with the method, the tokens and ``where`` (the model and the data); empty without a
    figure folder or with fewer than two tokens."""
    part = ReportPart()
    n = sum(len(t) for t in tokens)
    if figure_dir is None or n < 2:
        return part
    fig, points, projections, how = projection_figure(tokens, acts, word, state, groups)
    n_mine = sum(w == word for w in points.words)
    mark = (f" The {n_mine} occurrences of '{word}' are ringed and drawn above the other "
            "tokens" + (", coloured by their group" if groups else "") + "." if n_mine else "")
    part.parameters |= {"projection (report)": how.split(" (")[0] + f", {len(points):,} tokens"}
    part.figures += saved_figures(
        fig, figure_dir, "projection_" + "_".join(sorted({p.method for p in projections})),
        f"The {len(points):,} tokens of the workspace's sentences ({where}"
        + (f"; a fixed sample of the {n:,}" if len(points) < n else "")
        + f") projected to 2-D per layer and for the scalar mix by {how}; equal axes, "
        f"axis units arbitrary.{mark} A panel whose tokens fall on a few points is a note. "
        f"Under each panel's title: its trustworthiness T and continuity C (Venna & Kaski "
        f"2001; 1 = the map invents no neighbour / tears none apart) and the share of each "
        f"token's {FAITHFULNESS_K} nearest neighbours in the layer's vectors (cosine) that stay "
        f"among its {FAITHFULNESS_K} nearest on the map.",
        style)
    return part
