"""What :mod:`.contextuality` returns: the measures per layer and direction, and the JSON form.

See :mod:`.contextuality` for the definitions (Ethayarajh 2019, §3.3–3.4).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

DESCRIPTION = (
    "Contextuality per layer and direction (Ethayarajh 2019). 'self_similarity': mean over words "
    "with >= min_count occurrences of the average cosine between a word's occurrence vectors in "
    "different positions; 'intra_sentence_similarity': mean over sentences of the average cosine "
    "between each token and its sentence's mean vector; 'max_explainable_variance': mean over the "
    "same words of sigma_1^2 / sum sigma_i^2 of the word's occurrence matrix (the share of the "
    "variance its first principal component explains; centred only if 'centre_mev'). Each has "
    "'value', 'baseline' (the same measure on random tokens: for the two similarities the average "
    "cosine between occurrences from different sentences, computed exactly over all such pairs; "
    "for MEV the MEV of 'baseline_samples' uniformly sampled occurrences) and 'adjusted' = value - "
    "baseline (anisotropy-adjusted). Layer 0 is the context-free token layer ([tok, tok]): it has "
    "only 'both'. Lower self-similarity / MEV = more context-specific.")


@dataclass
class Measure:
    """One measure on one layer: the value, its anisotropy baseline and ``value − baseline``."""

    value: float
    baseline: float

    @property
    def adjusted(self) -> float:
        return self.value - self.baseline

    def to_dict(self) -> dict:
        return {"value": _json_float(self.value), "baseline": _json_float(self.baseline),
                "adjusted": _json_float(self.adjusted)}


@dataclass
class LayerContextuality:
    """The three measures on one layer and direction."""

    layer: int
    direction: str
    self_similarity: Measure
    intra_sentence_similarity: Measure
    max_explainable_variance: Measure
    n_words: int
    n_sentences: int

    def to_dict(self) -> dict:
        return {"self_similarity": self.self_similarity.to_dict(),
                "intra_sentence_similarity": self.intra_sentence_similarity.to_dict(),
                "max_explainable_variance": self.max_explainable_variance.to_dict(),
                "words": self.n_words, "sentences": self.n_sentences}


@dataclass
class ContextualityResult:
    """Everything :func:`contextuality` found.

    ``rows`` holds one :class:`LayerContextuality` per (layer, direction) in order; the per-word
    arrays ``word_self_similarity`` and ``word_mev`` are ``(len(rows), len(words))``.
    """

    rows: List[LayerContextuality]
    words: List[str]
    counts: np.ndarray
    word_self_similarity: np.ndarray
    word_mev: np.ndarray
    n_sentences: int
    n_tokens: int
    settings: Dict[str, object] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return 1 + max(r.layer for r in self.rows)

    def index(self, layer: int, direction: str = "both") -> int:
        for i, r in enumerate(self.rows):
            if r.layer == layer and r.direction == direction:
                return i
        raise KeyError(f"no row for layer {layer}, direction {direction!r}")

    def row(self, layer: int, direction: str = "both") -> LayerContextuality:
        return self.rows[self.index(layer, direction)]

    def word_table(self, layer: int, direction: str = "both"
                   ) -> List[Tuple[str, int, float, float]]:
        """``(word, occurrences, self-similarity, MEV)`` of every counted word on one row."""
        i = self.index(layer, direction)
        return [(w, int(c), float(s), float(m)) for w, c, s, m in
                zip(self.words, self.counts, self.word_self_similarity[i], self.word_mev[i])]

    def to_dict(self) -> dict:
        layers = []
        for layer in range(self.n_layers):
            dirs = {r.direction: r.to_dict() for r in self.rows if r.layer == layer}
            layers.append({"layer": layer, "directions": dirs})
        return {"description": DESCRIPTION, "sentences": self.n_sentences,
                "tokens": self.n_tokens, "words": len(self.words), **self.settings,
                "layers": layers}


def _json_float(v: float) -> Optional[float]:
    return None if v is None or not np.isfinite(v) else float(v)


__all__ = ["DESCRIPTION", "ContextualityResult", "LayerContextuality", "Measure"]
