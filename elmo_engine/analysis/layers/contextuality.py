"""How contextual is each layer? The three measures of Ethayarajh (2019), per layer and direction.

K. Ethayarajh, "How Contextual are Contextualized Word Representations? Comparing the Geometry of
BERT, ELMo, and GPT-2 Embeddings", EMNLP 2019, §3.3–3.4. With ``f_l(s, i)`` the layer-*l* vector
of token *i* of sentence *s*:

* **Self-similarity** (Definition 1) of a word *w* occurring at ``(s_1, i_1) … (s_n, i_n)``:
  ``SelfSim_l(w) = 1/(n² − n) Σ_j Σ_{k≠j} cos(f_l(s_j, i_j), f_l(s_k, i_k))``.
* **Intra-sentence similarity** (Definition 2) of a sentence of *n* tokens:
  ``IntraSim_l(s) = 1/n Σ_i cos(s⃗_l, f_l(s, i))`` with ``s⃗_l = 1/n Σ_i f_l(s, i)``.
* **Maximum explainable variance** (Definition 3): with ``σ_1 … σ_m`` the singular values of
  *w*'s occurrence matrix ``[f_l(s_1, i_1) … f_l(s_n, i_n)]``, ``MEV_l(w) = σ_1² / Σ_i σ_i²``
  — the proportion of the variance of the occurrence vectors that their first principal
  component explains. As in the paper's definition the matrix is *not* centred;
  ``centre_mev=True`` centres it (what ``sklearn.decomposition.PCA`` in the authors' released
  code does for words).
* **Anisotropy baselines** (§3.4): for self-similarity and intra-sentence similarity,
  ``Baseline(f_l) = E_{x,y ~ U(O)}[cos(f_l(x), f_l(y))]``, the average cosine between uniformly
  random word occurrences *from different contexts* (``O``: every occurrence in the corpus). It
  is computed here exactly, over every pair of tokens from different sentences, from sums of
  unit vectors: ``(‖Σ_i u_i‖² − Σ_s ‖Σ_{i∈s} u_i‖²) / (N² − Σ_s n_s²)``. For MEV, the baseline
  is the MEV of a uniform random sample of occurrences (``baseline_samples``, default 1,000 as in
  the authors' code), with the same centring as the words'. The **anisotropy-adjusted** measure
  is ``measure − baseline`` (e.g. ``SelfSim*_l(w) = SelfSim_l(w) − Baseline(f_l)``).

Word measures are averaged over the words with at least ``min_count`` (default 5) occurrences,
each word counting once (the paper's "average self-similarity"); intra-sentence similarity over
the sentences with at least ``min_sentence_tokens`` (default 2; a one-token sentence is trivially
1 and the paper is silent about it) tokens. Words are the exact token strings (``lowercase``
folds case). An all-zero vector has cosine 0 with everything.

Speed and memory: self-similarity comes from per-word sums of unit vectors
(``Σ_j Σ_{k≠j} cos = ‖Σ u‖² − n``); MEV from the top eigenvalue of a small Gram matrix
(:mod:`.spectra`) — of the occurrence rows (kept in float32) for a word with ``n ≤ D``
occurrences, of the ``D × D`` matrix ``XᵀX`` accumulated chunk by chunk for more frequent words.
The corpus streams through :class:`ContextualityAccumulator` a chunk of sentences at a time and
is never held whole: memory is about ``4·(L+1)·D`` bytes per occurrence of a word with at most
``D`` occurrences, plus ``8·(L+1)·D²`` per more frequent word.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np
from scipy import sparse

from elmo_engine.analysis.activations import check_arrays, direction_slice, layer_directions
from elmo_engine.analysis.layers.contextuality_result import (DESCRIPTION, ContextualityResult,
                                                       LayerContextuality, Measure)
from elmo_engine.analysis.layers.spectra import mev_of_stack, top_eigenvalues
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

#: sentences fed to the accumulator at once by :func:`contextuality`
CHUNK = 256
#: memory for staging frequent words' rows before they are folded into their Gram matrices
STAGE_BYTES = 128 << 20
#: the most bytes the accumulator may plan to hold (per-word rows, Gram matrices, the stage and
#: the baseline sample; the shipped reference corpus with the demo model plans ~600 MiB); a
#: bigger plan is refused before anything is allocated or embedded
MAX_PLAN_BYTES = 1 << 30
_TINY = 1e-30


class ContextualityAccumulator:
    """Streams a corpus through the three measures, a chunk of sentences at a time.

    Parameters
    ----------
    tokens : every sentence of the corpus (token lists), in the order they will be added
    n_layers, dim : the activations' ``L+1`` and ``2P``
    min_count : words with fewer occurrences are not averaged over (the paper: 5)
    baseline_samples : occurrences sampled for the MEV baseline
    seed : seeds that sample (and the ``max_occurrences`` subsets)
    lowercase : fold case when deciding which tokens are the same word
    centre_mev : centre each occurrence matrix before its singular values (PCA) — not the paper's
    min_sentence_tokens : shorter sentences are left out of the intra-sentence average
    max_occurrences : use a seeded random subset of at most this many occurrences of a word
        (None: all; the exact measures). Bounds memory on huge corpora.

    Call :meth:`add` with the activations of consecutive sentences, then :meth:`result`.
    """

    def __init__(self, tokens: Sequence[Sequence[str]], n_layers: int, dim: int, *,
                 min_count: int = 5, baseline_samples: int = 1000, seed: int = 0,
                 lowercase: bool = False, centre_mev: bool = False, min_sentence_tokens: int = 2,
                 max_occurrences: Optional[int] = None):
        if min_count < 2:
            raise InputError(f"min_count must be at least 2 (self-similarity needs pairs), "
                             f"got {min_count}")
        if baseline_samples < 2:
            raise InputError(f"baseline_samples must be at least 2, got {baseline_samples}")
        if max_occurrences is not None and max_occurrences < min_count:
            raise InputError(f"max_occurrences ({max_occurrences}) is below min_count "
                             f"({min_count})")
        self.k, self.dim = int(n_layers), int(dim)
        self.combos = [(lay, d) for lay in range(self.k) for d in layer_directions(lay)]
        self.slices = {d: direction_slice(d, self.dim) for _, d in self.combos}
        self.lengths = np.fromiter((len(s) for s in tokens), np.int64, len(tokens))
        if len(self.lengths) == 0:
            raise InputError("no sentences to analyse")
        empty = np.nonzero(self.lengths == 0)[0]
        if len(empty):
            raise InputError(f"sentence {int(empty[0])} has no tokens")
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)])
        self.n_tokens = int(self.starts[-1])
        self.settings: Dict[str, Any] = {"min_count": min_count, "baseline_samples": baseline_samples,
                         "seed": seed, "lowercase": lowercase, "centre_mev": centre_mev,
                         "min_sentence_tokens": min_sentence_tokens,
                         "max_occurrences": max_occurrences}
        self.centre = centre_mev
        self.min_sentence_tokens = min_sentence_tokens
        rng = np.random.default_rng(seed)
        self._plan_words(tokens, min_count, lowercase, max_occurrences, rng)
        w = len(self.words)
        self.unit_sum = {c: np.zeros((w, self._width(c[1]))) for c in self.combos}
        self.nonzero = {c: np.zeros(w) for c in self.combos}        # Σ‖u‖²: 0 for a zero vector
        self.total_unit = {c: np.zeros(self._width(c[1])) for c in self.combos}
        self.sentence_sq = {c: 0.0 for c in self.combos}
        self.intra_sum = {c: 0.0 for c in self.combos}
        self.intra_n = 0
        m = min(baseline_samples, self.n_tokens)
        self.sample_pos = np.sort(rng.choice(self.n_tokens, size=m, replace=False))
        self.sample_rows = np.empty((self.k, m, self.dim), np.float32)
        self.next_sentence = 0

    def _width(self, direction: str) -> int:
        s = self.slices[direction]
        return s.stop - s.start

    def _plan_words(self, tokens, min_count, lowercase, max_occurrences, rng) -> None:
        """Word ids, the counted words, and where each occurrence's vector will be kept."""
        ids: Dict[str, int] = {}
        keys = (t.lower() if lowercase else t for s in tokens for t in s)
        word_of = np.fromiter((ids.setdefault(t, len(ids)) for t in keys), np.int64,
                              self.n_tokens)
        vocab = list(ids)
        if max_occurrences is not None:                 # drop all but a random subset per word
            order = np.lexsort((rng.random(self.n_tokens), word_of))
            first = np.searchsorted(word_of[order], np.arange(len(vocab)))
            rank = np.arange(self.n_tokens) - first[word_of[order]]
            word_of = word_of.copy()
            word_of[order[rank >= max_occurrences]] = -1
        counts_all = np.bincount(word_of[word_of >= 0], minlength=len(vocab))
        eligible = [i for i in np.nonzero(counts_all >= min_count)[0]]
        eligible.sort(key=lambda i: (-counts_all[i], vocab[i]))
        self.words = [vocab[i] for i in eligible]
        self.counts = counts_all[eligible].astype(np.int64)
        remap = np.full(len(vocab) + 1, -1, np.int64)   # the extra last slot maps -1 to -1
        remap[np.asarray(eligible, np.int64)] = np.arange(len(eligible))
        self.tok_word = remap[word_of]
        # MEV: rows of words with at most `dim` occurrences, D x D Grams of the others
        self.frequent = self.counts > self.dim
        rare_ids = np.nonzero(~self.frequent)[0]
        self.rare_start = np.zeros(len(self.words), np.int64)
        if len(rare_ids):
            self.rare_start[rare_ids] = np.cumsum(self.counts[rare_ids]) - self.counts[rare_ids]
        counted = self.tok_word >= 0
        is_rare = np.zeros(self.n_tokens, bool)
        is_rare[counted] = ~self.frequent[self.tok_word[counted]]
        idx = np.nonzero(is_rare)[0]
        order = np.argsort(self.tok_word[idx], kind="stable")
        self.rare_slot = np.full(self.n_tokens, -1, np.int64)
        self.rare_slot[idx[order]] = np.arange(len(idx))
        n_freq = int(self.frequent.sum())
        stage = int(np.clip(STAGE_BYTES // (4 * self.k * self.dim), 1024, 65536)) if n_freq else 1
        planned = (4 * self.k * self.dim * (len(idx) + stage)
                   + 8 * self.k * n_freq * self.dim * (self.dim + 1)
                   + 4 * self.k * min(self.settings["baseline_samples"], self.n_tokens) * self.dim)
        if planned > MAX_PLAN_BYTES:
            raise InputError(
                f"the corpus's {self.n_tokens:,} tokens need {planned / 2**20:,.0f} MiB of "
                f"per-word activations and Gram matrices, over the limit of "
                f"{MAX_PLAN_BYTES / 2**20:,.0f} MiB: use --max-sentences or a higher "
                "--min-count")
        self.rows = np.empty((self.k, len(idx), self.dim), np.float32)
        self.freq_index = np.full(len(self.words), -1, np.int64)
        freq_ids = np.nonzero(self.frequent)[0]
        self.freq_index[freq_ids] = np.arange(len(freq_ids))
        self.gram = np.zeros((self.k, len(freq_ids), self.dim, self.dim))
        self.freq_sum = np.zeros((self.k, len(freq_ids), self.dim))
        # rows of frequent words wait here until folded into the Grams (bounded, ~128 MB)
        self.stage_cap = int(np.clip(STAGE_BYTES // (4 * self.k * self.dim), 1024, 65536))
        if not len(freq_ids):
            self.stage_cap = 1
        self.stage = np.empty((self.k, self.stage_cap, self.dim), np.float32)
        self.stage_word = np.empty(self.stage_cap, np.int64)
        self.stage_fill = 0

    # ---- streaming ------------------------------------------------------------------------
    def add(self, arrays: Sequence[np.ndarray]) -> None:
        """Add the activations of the next ``len(arrays)`` sentences (``(L+1, n_i, 2P)`` each)."""
        if not len(arrays):
            return
        s0, s1 = self.next_sentence, self.next_sentence + len(arrays)
        if s1 > len(self.lengths):
            raise InputError(f"{s1} sentences added to an accumulator planned for "
                             f"{len(self.lengths)}")
        k, dim = check_arrays(arrays)
        if (k, dim) != (self.k, self.dim):
            raise InputError(f"activations ({k} layers, dim {dim}) do not match the plan "
                             f"({self.k} layers, dim {self.dim})")
        lens = self.lengths[s0:s1]
        got = np.array([a.shape[1] for a in arrays])
        if not np.array_equal(got, lens):
            bad = int(np.nonzero(got != lens)[0][0])
            raise InputError(f"sentence {s0 + bad}: {lens[bad]} tokens but {got[bad]} vectors")
        t0, t1 = int(self.starts[s0]), int(self.starts[s1])
        n = t1 - t0
        x = np.concatenate([np.asarray(a, np.float32) for a in arrays], axis=1)     # (K, n, D)
        tw = self.tok_word[t0:t1]
        slots = self.rare_slot[t0:t1]
        keep = slots >= 0
        self.rows[:, slots[keep]] = x[:, keep]
        a, b = np.searchsorted(self.sample_pos, [t0, t1])
        self.sample_rows[:, a:b] = x[:, self.sample_pos[a:b] - t0]
        # indicator matrices: sentence x token and word x token (sums as sparse products)
        sent_mat = sparse.csr_matrix((np.ones(n, np.float32),
                                      (np.repeat(np.arange(s1 - s0), lens), np.arange(n))),
                                     shape=(s1 - s0, n))
        counted = np.nonzero(tw >= 0)[0]
        uniq, inv = np.unique(tw[counted], return_inverse=True)
        word_mat = sparse.csr_matrix((np.ones(len(counted), np.float32), (inv, counted)),
                                     shape=(len(uniq), n))
        long_enough = lens >= self.min_sentence_tokens
        self.intra_n += int(long_enough.sum())
        for lay in range(self.k):
            xl = x[lay]
            for d in layer_directions(lay):
                c = (lay, d)
                v = np.ascontiguousarray(xl[:, self.slices[d]])                      # (n, w)
                norms = np.sqrt(np.einsum("ij,ij->i", v, v))
                u = v / np.maximum(norms, _TINY)[:, None]
                if len(uniq):
                    self.unit_sum[c][uniq] += word_mat @ u
                    self.nonzero[c][uniq] += word_mat @ (norms > 0).astype(np.float32)
                su = sent_mat @ u                                                    # (S, w)
                self.total_unit[c] += su.sum(axis=0, dtype=np.float64)
                self.sentence_sq[c] += float(np.einsum("ij,ij->", su, su, dtype=np.float64))
                sv = sent_mat @ v                                                    # (S, w)
                snorm = np.sqrt(np.einsum("ij,ij->i", sv, sv, dtype=np.float64))
                # IntraSim(s) = 1/n Σ_i cos(s⃗, f_i) = (Σ_i u_i) · s⃗ / (n ‖s⃗‖)
                dots = np.einsum("ij,ij->i", su, sv, dtype=np.float64)
                per_sentence = dots / np.maximum(snorm, _TINY) / lens
                self.intra_sum[c] += float(per_sentence[long_enough].sum())
        freq = counted[self.frequent[tw[counted]]]
        for a in range(0, len(freq), self.stage_cap):         # frequent words: stage, then fold
            part = freq[a:a + self.stage_cap]
            if self.stage_fill + len(part) > self.stage_cap:
                self._fold()
            self.stage[:, self.stage_fill:self.stage_fill + len(part)] = x[:, part]
            self.stage_word[self.stage_fill:self.stage_fill + len(part)] = \
                self.freq_index[tw[part]]
            self.stage_fill += len(part)
        self.next_sentence = s1

    def _fold(self) -> None:
        """Add the staged rows of frequent words to their D x D Grams (one GEMM per word)."""
        m = self.stage_fill
        if not m:
            return
        order = np.argsort(self.stage_word[:m], kind="stable")
        fids, first = np.unique(self.stage_word[:m][order], return_index=True)
        bounds = np.append(first, m)
        for j, f in enumerate(fids):
            xw = self.stage[:, order[bounds[j]:bounds[j + 1]]]                       # (K, r, D)
            self.gram[:, f] += np.matmul(xw.transpose(0, 2, 1), xw)
            self.freq_sum[:, f] += xw.sum(axis=1, dtype=np.float64)
        self.stage_fill = 0

    # ---- results --------------------------------------------------------------------------
    def result(self, state: Optional[TaskState] = None) -> ContextualityResult:
        """The measures over everything added (every planned sentence must have been added)."""
        if self.next_sentence != len(self.lengths):
            raise InputError(f"only {self.next_sentence} of {len(self.lengths)} sentences were "
                             "added")
        self._fold()
        w = len(self.words)
        n = self.counts.astype(np.float64)
        ss = np.full((len(self.combos), w), np.nan)
        mev = np.full((len(self.combos), w), np.nan)
        for r, c in enumerate(self.combos):
            s = self.unit_sum[c]
            ss[r] = (np.einsum("ij,ij->i", s, s) - self.nonzero[c]) / (n * n - n)
        self._rare_mev(mev, state)
        self._frequent_mev(mev, state)
        n_pairs = float(self.n_tokens) ** 2 - float(np.sum(self.lengths.astype(np.float64) ** 2))
        rows = []
        for r, (lay, d) in enumerate(self.combos):
            c = (lay, d)
            t = self.total_unit[c]
            base_cos = (float(t @ t) - self.sentence_sq[c]) / n_pairs if n_pairs > 0 else np.nan
            sample = self.sample_rows[lay][:, self.slices[d]]
            base_mev = mev_of_stack(sample[None], self.centre)[0]
            intra = self.intra_sum[c] / self.intra_n if self.intra_n else np.nan
            rows.append(LayerContextuality(
                lay, d, Measure(_mean(ss[r]), base_cos), Measure(intra, base_cos),
                Measure(_mean(mev[r]), base_mev), w, self.intra_n))
        return ContextualityResult(rows, list(self.words), self.counts.copy(), ss, mev,
                                   len(self.lengths), self.n_tokens, dict(self.settings))

    def _rare_mev(self, out: np.ndarray, state: Optional[TaskState]) -> None:
        rare = np.nonzero(~self.frequent)[0]
        done, total = 0, len(self.words)
        for m in np.unique(self.counts[rare]):
            ids = rare[self.counts[rare] == m]
            step = max(1, int(4_000_000 // (m * self.dim)))          # ≤ ~32 MB of float64 at once
            for a in range(0, len(ids), step):
                check(state)
                part = ids[a:a + step]
                idx = self.rare_start[part][:, None] + np.arange(m)             # (B, m)
                for lay in range(self.k):
                    xb = self.rows[lay][idx]                                    # (B, m, D)
                    for d in layer_directions(lay):
                        out[self.combos.index((lay, d)), part] = mev_of_stack(
                            xb[..., self.slices[d]], self.centre)
                done += len(part)
                report(state, done, total, f"explainable variance ({done}/{total} words)")

    def _frequent_mev(self, out: np.ndarray, state: Optional[TaskState]) -> None:
        freq = np.nonzero(self.frequent)[0]
        if not len(freq):
            return
        n = self.counts[freq].astype(np.float64)
        for lay in range(self.k):
            check(state)
            for d in layer_directions(lay):
                s = self.slices[d]
                g = self.gram[lay][:, s, s].copy()                                 # (F, w, w)
                if self.centre:
                    mu = self.freq_sum[lay][:, s] / n[:, None]
                    g -= n[:, None, None] * mu[:, :, None] * mu[:, None, :]
                top = top_eigenvalues(g)
                total = np.trace(g, axis1=1, axis2=2)
                out[self.combos.index((lay, d)), freq] = top / np.where(total > 0, total, np.nan)
        report(state, len(self.words), len(self.words), "explainable variance")


def _mean(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(values.mean()) if len(values) else float("nan")


def contextuality(activations: Sequence[np.ndarray], tokens: Sequence[Sequence[str]], *,
                  min_count: int = 5, baseline_samples: int = 1000, seed: int = 0,
                  lowercase: bool = False, centre_mev: bool = False,
                  min_sentence_tokens: int = 2, max_occurrences: Optional[int] = None,
                  state: Optional[TaskState] = None) -> ContextualityResult:
    """The three measures of every layer and direction over a corpus.

    Parameters
    ----------
    activations : one ``(L+1, n_i, 2P)`` array per sentence (the Embedder's output)
    tokens : the sentences' tokens (``len(tokens[i]) == n_i``); they decide which tokens are the
        same word
    state : progress (sentences, then words) and cancel

    The other parameters are :class:`ContextualityAccumulator`'s.
    """
    k, dim = check_arrays(activations, tokens)
    acc = ContextualityAccumulator(tokens, k, dim, min_count=min_count,
                                   baseline_samples=baseline_samples, seed=seed,
                                   lowercase=lowercase, centre_mev=centre_mev,
                                   min_sentence_tokens=min_sentence_tokens,
                                   max_occurrences=max_occurrences)
    total = len(activations)
    for start in range(0, total, CHUNK):
        check(state)
        acc.add(activations[start:start + CHUNK])
        report(state, min(start + CHUNK, total), total, "contextuality (sentences)")
    return acc.result(state)


__all__ = ["DESCRIPTION", "ContextualityAccumulator", "ContextualityResult", "LayerContextuality",
           "Measure", "contextuality"]
