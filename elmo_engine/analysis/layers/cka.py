"""Linear CKA: how alike are two layers (of one model or of two) on the same tokens?

S. Kornblith, M. Norouzi, H. Lee, G. Hinton, "Similarity of Neural Network Representations
Revisited", ICML 2019. For representations ``X`` (n × p) and ``Y`` (n × q) of the same *n* tokens,
with linear kernels ``K = XXᵀ``, ``L = YYᵀ``::

    CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L))

* **Biased** (Kornblith et al., eq. 3): ``HSIC(K, L) = tr(KHLH) / (n − 1)²`` with the centring
  matrix ``H``; for linear kernels ``CKA = ‖Yᶜᵀ Xᶜ‖²_F / (‖Xᶜᵀ Xᶜ‖_F ‖Yᶜᵀ Yᶜ‖_F)`` (``ᶜ``: columns
  centred). It is biased upwards on small samples: two independent random matrices score well
  above 0 when *n* is not much larger than the width.
* **Unbiased** (``unbiased=True``, the default): the unbiased HSIC estimator of Song et al.,
  "Feature Selection via Dependence Maximization", JMLR 2012, as used for CKA by Nguyen, Raghu &
  Kornblith, "Do Wide and Deep Networks Learn the Same Things?", ICLR 2021::

      HSIC₁(K, L) = 1/(n(n−3)) · [ tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((n−1)(n−2)) − 2/(n−2) · 1ᵀK̃L̃1 ]

  with ``K̃``, ``L̃`` the kernels with their diagonals set to zero (needs n ≥ 4). Independent
  representations score ≈ 0 (it can be slightly negative).

Both are 1 for ``X`` against itself, symmetric, and invariant to orthogonal transforms and
isotropic scaling of either side. HSIC₁ with a linear kernel does not change when a constant is
added to every row, so the columns are centred first (for precision) and then, with
``d_i = ‖x_i‖²``: ``tr(K̃L̃) = ‖XᵀY‖²_F − d_x·d_y``, ``1ᵀK̃1 = −Σd_x``, ``1ᵀK̃L̃1 = d_x·d_y``.

Cost: when *n* exceeds the widths the feature-space products ``XᵀY`` (p × q, accumulated in
float64 over row chunks) are used instead of *n × n* Gram matrices, so 50,000 tokens cost a few
``(p × n)(n × q)`` products, not 50,000² kernels; for small *n* the Gram matrices are cheaper.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from elmo_engine.analysis.activations import direction_slice
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

#: rows per float64 chunk of the feature-space products
ROW_CHUNK = 8192

Layers = Union[np.ndarray, Sequence[np.ndarray]]

DESCRIPTION = (
    "Linear CKA (Kornblith et al. 2019) between layers on the same tokens: 'matrix'[a][b] compares "
    "layer a with layer b (rows: model A's layers 0..L; columns: the same layers, or with "
    "'compare' model B's). 1 = the same representation up to rotation and scale; with the "
    "unbiased estimator (Song et al. 2012, as in Nguyen et al. 2021) unrelated representations "
    "score about 0, with the biased one above 0 on small samples. 'tokens': how many token "
    "vectors (all tokens of 'sentences' sampled sentences) were compared.")


@dataclass
class _Prepared:
    """One representation, centred: float32 storage, column means, row norms² ``d``."""

    x: np.ndarray          # (n, p) as given
    mean: np.ndarray       # (p,) float64
    d: np.ndarray          # (n,) float64, ‖x_i − mean‖²

    @property
    def n(self) -> int:
        return self.x.shape[0]

    def centred(self, a: int, b: int) -> np.ndarray:
        return self.x[a:b].astype(np.float64) - self.mean


def _prepare(x: np.ndarray) -> _Prepared:
    if x.ndim != 2:
        raise InputError(f"a representation must be (tokens, features), got shape {x.shape}")
    n = x.shape[0]
    mean = np.zeros(x.shape[1])
    for a in range(0, n, ROW_CHUNK):
        mean += x[a:a + ROW_CHUNK].astype(np.float64).sum(axis=0)
    mean /= max(n, 1)
    d = np.empty(n)
    for a in range(0, n, ROW_CHUNK):
        c = x[a:a + ROW_CHUNK].astype(np.float64) - mean
        d[a:a + ROW_CHUNK] = np.einsum("ij,ij->i", c, c)
    return _Prepared(x, mean, d)


def _cross_norm2(a: _Prepared, b: _Prepared) -> float:
    """‖Aᶜᵀ Bᶜ‖²_F, accumulated over row chunks in float64."""
    acc = np.zeros((a.x.shape[1], b.x.shape[1]))
    for s in range(0, a.n, ROW_CHUNK):
        acc += a.centred(s, s + ROW_CHUNK).T @ b.centred(s, s + ROW_CHUNK)
    return float(np.einsum("ij,ij->", acc, acc))


def _gram(p: _Prepared) -> np.ndarray:
    c = p.centred(0, p.n)
    return c @ c.T


def _hsic(cross: float, a: _Prepared, b: _Prepared, unbiased: bool) -> float:
    """HSIC from ``‖AᶜᵀBᶜ‖²`` (= ⟨K, L⟩ of the centred kernels) and the row norms."""
    n = a.n
    if not unbiased:
        return cross / (n - 1) ** 2
    dd = float(a.d @ b.d)
    sa, sb = float(a.d.sum()), float(b.d.sum())
    return (cross - dd + sa * sb / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * dd) / (n * (n - 3))


def min_tokens(unbiased: bool) -> int:
    """The fewest tokens CKA is defined on: 4 for the unbiased estimator, else 2."""
    return 4 if unbiased else 2


def _check_n(n: int, unbiased: bool) -> None:
    if n < min_tokens(unbiased):
        raise InputError(f"CKA needs at least {min_tokens(unbiased)} tokens"
                         f"{' for the unbiased estimator' if unbiased else ''}; got {n}")


def _use_gram(n: int, widths: Sequence[int], method: str) -> bool:
    if method not in ("auto", "feature", "gram"):
        raise InputError(f"unknown CKA method {method!r} (auto, feature or gram)")
    if method == "auto":
        return n < max(widths)
    return method == "gram"


def _cka_from(h_ab: float, h_aa: float, h_bb: float) -> float:
    den = h_aa * h_bb
    return h_ab / np.sqrt(den) if den > 0 else float("nan")


def linear_cka(x: np.ndarray, y: np.ndarray, unbiased: bool = True, method: str = "auto") -> float:
    """Linear CKA between ``x`` (n × p) and ``y`` (n × q), rows = the same tokens."""
    if x.shape[0] != y.shape[0]:
        raise InputError(f"CKA compares the same tokens: {x.shape[0]} rows against {y.shape[0]}")
    _check_n(x.shape[0], unbiased)
    a, b = _prepare(x), _prepare(y)
    if _use_gram(a.n, (x.shape[1], y.shape[1]), method):
        ka, kb = _gram(a), _gram(b)
        f_ab, f_aa, f_bb = (float(np.einsum("ij,ij->", u, v)) for u, v in
                            ((ka, kb), (ka, ka), (kb, kb)))
    else:
        f_ab, f_aa, f_bb = _cross_norm2(a, b), _cross_norm2(a, a), _cross_norm2(b, b)
    return _cka_from(_hsic(f_ab, a, b, unbiased), _hsic(f_aa, a, a, unbiased),
                     _hsic(f_bb, b, b, unbiased))


def _as_list(layers: Layers, direction: str) -> List[np.ndarray]:
    out = []
    for x in layers:
        x = np.asarray(x)
        if x.ndim != 2:
            raise InputError(f"each layer must be (tokens, features), got shape {x.shape}")
        out.append(x[:, direction_slice(direction, x.shape[1])])
    if not out:
        raise InputError("no layers to compare")
    n = out[0].shape[0]
    if any(x.shape[0] != n for x in out):
        raise InputError("the layers hold different numbers of tokens")
    return out


def _norm2_table(xs: List[_Prepared], pairs: List[Tuple[int, int]], gram: bool,
                 state: Optional[TaskState], what: str) -> Dict[Tuple[int, int], float]:
    out: Dict[Tuple[int, int], float] = {}
    grams: Dict[int, np.ndarray] = {}
    for i, (a, b) in enumerate(pairs):
        check(state)
        if gram:
            for j in (a, b):
                if j not in grams:
                    grams[j] = _gram(xs[j])
            out[(a, b)] = float(np.einsum("ij,ij->", grams[a], grams[b]))
        else:
            out[(a, b)] = _cross_norm2(xs[a], xs[b])
        report(state, i + 1, len(pairs), f"{what} ({i + 1}/{len(pairs)} layer pairs)")
    return out


def cka_matrix(layers: Layers, unbiased: bool = True, direction: str = "both",
               method: str = "auto", state: Optional[TaskState] = None) -> np.ndarray:
    """CKA between every pair of layers of one model: symmetric ``(K, K)``, ones on the diagonal.

    ``layers`` is a ``(K, n, D)`` array or a sequence of ``(n, D_k)`` arrays (the same tokens in
    every layer); ``direction`` compares only the forward or backward halves.
    """
    xs = [_prepare(x) for x in _as_list(layers, direction)]
    n, k = xs[0].n, len(xs)
    _check_n(n, unbiased)
    pairs = [(a, b) for a in range(k) for b in range(a, k)]
    f = _norm2_table(xs, pairs, _use_gram(n, [x.x.shape[1] for x in xs], method), state, "CKA")
    h = {p: _hsic(v, xs[p[0]], xs[p[1]], unbiased) for p, v in f.items()}
    m = np.eye(k)
    for a, b in pairs:
        if a != b:
            m[a, b] = m[b, a] = _cka_from(h[(a, b)], h[(a, a)], h[(b, b)])
    return m


def cross_cka(layers_a: Layers, layers_b: Layers, unbiased: bool = True, direction: str = "both",
              method: str = "auto", state: Optional[TaskState] = None) -> np.ndarray:
    """CKA between every layer of model A (rows) and every layer of model B (columns), on the
    same tokens: ``(K_A, K_B)``, not symmetric in general."""
    xa = [_prepare(x) for x in _as_list(layers_a, direction)]
    xb = [_prepare(x) for x in _as_list(layers_b, direction)]
    if xa[0].n != xb[0].n:
        raise InputError(f"the two models' activations hold {xa[0].n} and {xb[0].n} tokens; CKA "
                         "compares the same tokens")
    _check_n(xa[0].n, unbiased)
    xs = xa + xb
    ka = len(xa)
    pairs = ([(i, i) for i in range(len(xs))]
             + [(a, ka + b) for a in range(ka) for b in range(len(xb))])
    gram = _use_gram(xa[0].n, [x.x.shape[1] for x in xs], method)
    f = _norm2_table(xs, pairs, gram, state, "cross-model CKA")
    h = {p: _hsic(v, xs[p[0]], xs[p[1]], unbiased) for p, v in f.items()}
    m = np.empty((ka, len(xb)))
    for a in range(ka):
        for b in range(len(xb)):
            m[a, b] = _cka_from(h[(a, ka + b)], h[(a, a)], h[(ka + b, ka + b)])
    return m


@dataclass
class CKAResult:
    """A CKA matrix and what it compared (for the JSON and the table)."""

    matrix: np.ndarray
    rows: List[str]
    columns: List[str]
    unbiased: bool
    n_tokens: int
    n_sentences: int
    direction: str = "both"
    extra: Dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"description": DESCRIPTION,
                "estimator": "unbiased" if self.unbiased else "biased",
                "direction": self.direction, "tokens": self.n_tokens,
                "sentences": self.n_sentences, "rows": self.rows, "columns": self.columns,
                "matrix": [[None if not np.isfinite(v) else float(v) for v in row]
                           for row in self.matrix], **self.extra}


__all__ = ["CKAResult", "DESCRIPTION", "cka_matrix", "cross_cka", "linear_cka"]
