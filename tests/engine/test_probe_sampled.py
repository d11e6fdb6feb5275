"""Sampled candidate logits (elmo_engine.analysis.probes.sampled) against the dense gather."""
from __future__ import annotations

import pytest
import torch

from elmo_engine.analysis.probes.sampled import NEG, CandidatePattern, candidate_logits


def _candidates(gen, b: int, m: int, n_classes: int) -> torch.Tensor:
    """(b, m) distinct ids per row in random order, each row padded with −1 after 1..m ids;
    one row entirely padding."""
    rows = []
    for i in range(b):
        width = 0 if i == 3 else int(torch.randint(1, m + 1, (1,), generator=gen))
        ids = torch.randperm(n_classes, generator=gen)[:width]
        rows.append(torch.cat([ids, torch.full((m - width,), -1, dtype=torch.long)]))
    return torch.stack(rows)


def _dense(x, table, cand):
    """The computation as first written: gather a row per candidate, multiply, sum."""
    h, b, e = x.shape
    w = table[cand.clamp(min=0)]                                           # (B, M, H, E)
    logits = torch.einsum("hbe,bmhe->hbm", x, w)
    return logits.masked_fill(cand[None] < 0, NEG)


@pytest.mark.parametrize("heads", [1, 3])
def test_logits_and_gradients_equal_the_dense_gather(heads):
    gen = torch.Generator().manual_seed(0)
    b, m, c, e = 37, 7, 50, 9
    cand = _candidates(gen, b, m, c)
    x = torch.randn(heads, b, e, generator=gen, dtype=torch.float64)
    table = torch.randn(c, heads, e, generator=gen, dtype=torch.float64)
    pattern = CandidatePattern(cand, c)
    assert torch.equal(pattern.rows, torch.unique(cand[cand >= 0]))
    assert pattern.nnz == int((cand >= 0).sum())

    x1 = x.clone().requires_grad_()
    rows = table[pattern.rows].clone().requires_grad_()
    got = candidate_logits(x1, rows, pattern)
    x2 = x.clone().requires_grad_()
    full = table.clone().requires_grad_()
    want = _dense(x2, full, cand)
    assert got.shape == (heads, b, m)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)

    # a loss that weighs every real entry differently, padding excluded
    weight = torch.randn(heads, b, m, generator=gen, dtype=torch.float64)
    mask = (cand >= 0)[None]
    (got * weight * mask).sum().backward()
    (want * weight * mask).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(rows.grad, full.grad[pattern.rows], rtol=0, atol=1e-12)
    unused = torch.ones(c, dtype=torch.bool)
    unused[pattern.rows] = False
    assert float(full.grad[unused].abs().max()) == 0.0


def test_float32_matches_within_rounding():
    gen = torch.Generator().manual_seed(1)
    cand = _candidates(gen, 200, 12, 400)
    x = torch.randn(3, 200, 513, generator=gen)
    table = torch.randn(400, 3, 513, generator=gen) * 0.1
    pattern = CandidatePattern(cand, 400)
    got = candidate_logits(x, table[pattern.rows], pattern)
    torch.testing.assert_close(got, _dense(x, table, cand), rtol=1e-5, atol=1e-4)


def test_a_batch_without_candidates_is_all_padding():
    cand = torch.full((4, 3), -1, dtype=torch.long)
    pattern = CandidatePattern(cand, 10)
    out = candidate_logits(torch.randn(2, 4, 5), torch.zeros(0, 2, 5), pattern)
    assert out.shape == (2, 4, 3)
    assert bool((out == NEG).all())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device "
                    "(benchmarks/gpu_check.sh runs this file on a GPU)")
def test_on_cuda_equals_the_cpu():
    gen = torch.Generator().manual_seed(2)
    cand = _candidates(gen, 64, 9, 120)
    x = torch.randn(3, 64, 33, generator=gen)
    table = torch.randn(120, 3, 33, generator=gen)
    pattern = CandidatePattern(cand, 120)
    want = candidate_logits(x, table[pattern.rows], pattern)
    dev = torch.device("cuda")
    pattern_d = CandidatePattern(cand.to(dev), 120)
    rows = table.to(dev)[pattern_d.rows].requires_grad_()
    got = candidate_logits(x.to(dev), rows, pattern_d)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    (got * (cand >= 0).to(dev)[None]).sum().backward()
    assert rows.grad is not None and rows.grad.shape == rows.shape
