"""The trajectories tab's state, in plain Python (no Qt): the choices, the aligned layouts, the
position of the slider and the tokens whose trails are drawn (issue 42).

:class:`TrajectoryModel` is what
:class:`~elmo_explorer.views.projection.trajectory_panel.TrajectoryPanel` keeps and
:class:`~elmo_explorer.views.projection.trajectory_view.TrajectoryView` draws.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import List, Optional, Tuple

import numpy as np

from elmo_engine.analysis.projection import TokenSet
from elmo_engine.analysis.projection.aligned import (AlignedLayer, AlignedLayouts, AlignMethod,
                                                     Half, interpolate)
from elmo_engine.analysis.projection.knn_change import KnnChanges

#: slider ticks from one layer to the next
TICKS_PER_LAYER = 100
#: at most this many tokens get a trail (a line each)
MAX_TRAILS = 12


@dataclass(frozen=True)
class MethodChoice:
    """One entry of the method box: how the layers are aligned, and (Procrustes) on what map."""

    label: str
    method: AlignMethod
    base: str

    @property
    def key(self) -> str:
        """The name a saved workspace gives it: ``procrustes-pca``, ``procrustes-umap``,
        ``umap-umap`` (AlignedUMAP)."""
        return f"{self.method.value}-{self.base}"


METHODS: Tuple[MethodChoice, ...] = (
    MethodChoice("Procrustes · PCA per layer", AlignMethod.PROCRUSTES, "pca"),
    MethodChoice("Procrustes · UMAP per layer", AlignMethod.PROCRUSTES, "umap"),
    MethodChoice("AlignedUMAP", AlignMethod.ALIGNED_UMAP, "umap"),
)

#: the names a saved workspace gives the entries of :func:`layer_sequences`, in its order
SEQUENCE_KEYS: Tuple[str, ...] = ("layers", "forward", "backward", "forward-then-backward")
#: the neighbours compared between two layers: the k box's range and default
K_RANGE, K_DEFAULT = (1, 100), 10


def layer_sequences(n_layers: int) -> List[Tuple[str, Tuple[AlignedLayer, ...]]]:
    """The sequences offered for a model with layers 0 … n_layers-1: the whole layers, each
    direction's halves, and both directions one after the other (forward up, backward down)."""
    if n_layers < 2:
        return []
    idx = range(n_layers)
    arrow = " → ".join(str(k) for k in idx)
    fwd = tuple(AlignedLayer(k, Half.FORWARD) for k in idx)
    bwd = tuple(AlignedLayer(k, Half.BACKWARD) for k in idx)
    return [(f"layers {arrow}", tuple(AlignedLayer(k) for k in idx)),
            (f"forward {arrow}", fwd),
            (f"backward {arrow}", bwd),
            (f"forward {arrow}, then backward back to 0", fwd + tuple(reversed(bwd)))]


@dataclass(frozen=True)
class TrajectorySettings:
    """The tab's choices, as a workspace saves them (:meth:`to_json`, :meth:`from_json`).

    ``reference`` and ``pair`` are positions in the chosen sequence's layers (None: the tab's
    default, the last layer and first contextual → last); the computed layouts are not saved:
    Compute makes them again from the Maps tab's tokens."""

    method: str = METHODS[0].key
    sequence: str = SEQUENCE_KEYS[0]
    reference: Optional[int] = None
    k: int = K_DEFAULT
    pair: Optional[Tuple[int, int]] = None
    trail: str = ""

    def to_json(self) -> dict:
        return {"method": self.method, "sequence": self.sequence, "reference": self.reference,
                "k": self.k, "pair": list(self.pair) if self.pair is not None else None,
                "trail": self.trail}

    @classmethod
    def from_json(cls, d: object) -> "TrajectorySettings":
        """The settings a saved dict sets validly; a missing, unknown or wrong-typed value
        keeps its default (positions are checked against the layers when applied)."""
        if not isinstance(d, dict):
            return cls()

        def index(v: object) -> Optional[int]:
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

        out = cls()
        if d.get("method") in [m.key for m in METHODS]:
            out = replace(out, method=d["method"])
        if d.get("sequence") in SEQUENCE_KEYS:
            out = replace(out, sequence=d["sequence"])
        if index(d.get("reference")) is not None:
            out = replace(out, reference=d["reference"])
        k = index(d.get("k"))
        if k is not None:
            out = replace(out, k=min(max(k, K_RANGE[0]), K_RANGE[1]))
        pair = d.get("pair")
        if isinstance(pair, list) and len(pair) == 2 and all(index(v) is not None for v in pair):
            out = replace(out, pair=(pair[0], pair[1]))
        if isinstance(d.get("trail"), str):
            out = replace(out, trail=d["trail"])
        return out


@dataclass(frozen=True)
class TrajectoryRequest:
    """One computation, captured on the GUI thread."""

    tokens: TokenSet
    acts: list
    layers: Tuple[AlignedLayer, ...]
    choice: MethodChoice
    reference: int
    knn_pair: Tuple[int, int]
    k: int
    checksum: str


@dataclass
class TrajectoryModel:
    """What the trajectories tab computed and shows.

    Attributes
    ----------
    tokens : the token set of the layouts (the Maps tab's run they were computed from)
    layouts : the aligned layouts, or None
    changes : the kNN change between the two chosen layers, or None
    ticks : the slider's position, ``TICKS_PER_LAYER`` per layer
    trails : the tokens whose trails are drawn
    """

    tokens: Optional[TokenSet] = None
    layouts: Optional[AlignedLayouts] = None
    changes: Optional[KnnChanges] = None
    ticks: int = 0
    trails: List[int] = field(default_factory=list)

    @property
    def n_layers(self) -> int:
        return 0 if self.layouts is None else len(self.layouts.layers)

    @property
    def max_ticks(self) -> int:
        return max(0, (self.n_layers - 1) * TICKS_PER_LAYER)

    @property
    def t(self) -> float:
        """The position between layers, 0 … n_layers-1."""
        return self.ticks / TICKS_PER_LAYER

    def positions(self) -> np.ndarray:
        """The points at the slider's position: ``(N, 2)``."""
        assert self.layouts is not None
        return interpolate(self.layouts.coords, self.t)

    def where(self) -> str:
        """``layer 1`` at a layer, ``layer 1 → layer 2 (40%)`` between two."""
        if self.layouts is None:
            return ""
        names = [lay.name for lay in self.layouts.layers]
        i, frac = divmod(self.ticks, TICKS_PER_LAYER)
        if frac == 0 or i >= len(names) - 1:
            return names[min(i, len(names) - 1)]
        return f"{names[i]} → {names[i + 1]} ({frac}%)"

    def set_trails(self, indices) -> None:
        """Trails for these tokens (at most :data:`MAX_TRAILS`, in order, no repeats)."""
        out = list(dict.fromkeys(int(i) for i in indices))
        n = 0 if self.tokens is None else len(self.tokens)
        self.trails = [i for i in out if 0 <= i < n][:MAX_TRAILS]

    def trail_paths(self) -> List[np.ndarray]:
        """One ``(n_layers, 2)`` path per trailed token."""
        if self.layouts is None:
            return []
        return [np.asarray(self.layouts.coords[:, i, :]) for i in self.trails]

    def method_note(self) -> str:
        """What the layouts preserve, in one line (the guide says more)."""
        lay = self.layouts
        if lay is None:
            return ""
        if lay.method is AlignMethod.ALIGNED_UMAP:
            return ("AlignedUMAP: each layer's neighbourhoods, with tokens held near their place "
                    "in the next layer; the motion shows change, not an arbitrary rotation.")
        ref = lay.layers[lay.reference or 0].name
        res = ", ".join(f"{x.name} {r:.2f}" for x, r in zip(lay.layers, lay.residuals)
                        if r > 0)
        pca = (f" PCA for {', '.join(lay.pca_instead)} (too few distinct vectors for UMAP)."
               if lay.pca_instead else "")
        return (f"{lay.base.upper()} per layer, moved onto {ref} by rotation/reflection, scale "
                f"and shift: each map keeps its own shape. Residual spread: {res or 'none'}."
                + pca)
