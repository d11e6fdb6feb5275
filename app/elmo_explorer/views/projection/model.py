"""The projection view's state, in plain Python: what is projected and what is drawn.

No Qt here: :class:`ProjectionModel` is what
:class:`~elmo_explorer.views.projection.controller.ProjectionPanel` (the controller) keeps and
:class:`~elmo_explorer.views.projection.view.ProjectionView` draws. The helpers below read a
saved view state (see :mod:`.projection_report`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from elmo_engine.analysis.projection import (Faithfulness, LayerSpec, Projection, TokenSet,
                                             UmapParams)

#: the version of the dict written by ``view_state`` (restore accepts older/partial ones)
STATE_VERSION = 1


@dataclass
class ProjectionModel:
    """The projected tokens, their layers and the projections drawn.

    Attributes
    ----------
    tokens, acts, layers : the token set drawn, its sentences' activations, the layers (one plot
        each: 0 … L, then the mix)
    shown : plot index → the projection drawn there (PCA, then UMAP)
    dataset, dataset_path : a labelled data set opened for projection, and its file
    params : the UMAP settings of the current run
    checksum : the model's checksum (part of the projector's cache key)
    dirty : the data changed since the last run
    """

    tokens: Optional[TokenSet] = None
    acts: Optional[list] = None
    layers: List[LayerSpec] = field(default_factory=list)
    shown: Dict[int, Projection] = field(default_factory=dict)
    dataset: Optional[TokenSet] = None
    dataset_path: Optional[Path] = None
    params: UmapParams = field(default_factory=UmapParams)
    checksum: str = ""
    dirty: bool = True
    ready: bool = False
    current_plot: int = 0
    warm_submitted: bool = False
    legend_codes: Optional[np.ndarray] = None
    #: sentence tokens → (group, sense, typed) of the current run's sentences
    sentence_info: Dict[tuple, tuple] = field(default_factory=dict)
    #: word → its reference-set sentences [ReferenceSentence]
    reference_cache: Dict[str, list] = field(default_factory=dict)
    #: sentence tokens → its ReferenceSentence, for the sense-tagged ones (senses, UPOS)
    reference_labels: Dict[tuple, Any] = field(default_factory=dict)
    job_label: str = ""
    compiled_here: bool = False
    umap_errors: List[str] = field(default_factory=list)
    #: plot index → how faithful its drawn map is (None: nothing to measure; absent: measuring)
    faith: Dict[int, Optional[Faithfulness]] = field(default_factory=dict)

    def clear(self) -> None:
        """Nothing drawn."""
        self.tokens, self.acts, self.shown, self.faith = None, None, {}, {}

    def drawn(self) -> List[Projection]:
        """The projections drawn, in plot order."""
        return [self.shown[k] for k in sorted(self.shown)]


def as_int(v: Any) -> Optional[int]:
    """``v`` when it is an int (not a bool), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_float(v: Any) -> Optional[float]:
    """``v`` as a float when it is a finite number (not a bool), else None."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
    return float(v) if ok else None


def mix_weights_text(state: Dict[str, Any]) -> Optional[str]:
    """The mix-weights text a saved state asks for: "" for equal weights, None to keep."""
    w = state.get("mix_weights")
    if w is None and "mix_weights" in state:
        return ""
    if (isinstance(w, list) and w and
            all(as_float(x) is not None and x >= 0 for x in w) and sum(w) > 0):
        return ", ".join(f"{float(x):g}" for x in w)
    return None


def parse_weights(text: str) -> Optional[List[float]]:
    """Mix weights typed as "0.2, 0.3 0.5" (None: empty or not numbers)."""
    try:
        text = text.replace(";", ",").replace(" ", ",")
        return [float(v) for v in text.split(",") if v] or None
    except ValueError:
        return None
