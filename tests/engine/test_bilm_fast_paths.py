"""The inference shortcuts of the engine give the same numbers as the plain computation.

Each shortcut (pooled char-CNN windows, layer-0 input projection per distinct token vector,
directions in two threads, skipped boundary steps, direct scatter of packed outputs, weights
pre-packed for oneDNN) is checked against a straightforward path on inputs chosen to hit its
edge cases.
"""
from __future__ import annotations

import copy
import dataclasses
import threading

import numpy as np
import pytest
import torch

from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.bilm import BiLM
from elmo_engine.model.chars import char_ids_for_types
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.cpu_fast import FastPath, both_directions, onednn_packing
from elmo_engine.model.lstm_packed import distinct_rows
from elmo_engine.model.options import BiLMOptions
from elmo_engine.model.reference import ReferenceBiLM, conv1d_token_layer


def switch(model: BiLM, **changes) -> None:
    """Change some of the model's fast-path switches (``FastPath`` fields)."""
    model.fast_path = dataclasses.replace(model.fast_path, **changes)


def random_model(seed: int = 0, **kw) -> BiLM:
    opts = dict(filters=((1, 8), (2, 8), (3, 16), (5, 8)), char_embed_dim=4, n_highway=2,
                projection_dim=16, lstm_dim=32, n_layers=2)
    opts.update(kw)
    model = BiLM(BiLMOptions(**opts))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model.eval()


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_pooled_windows_equal_full_convolution(activation):
    model = random_model(activation=activation)
    words = ["a", "", "bank", "Überraschungsei", "x" * 49, "y" * 50, "z" * 80,
             "don't", "U.S.", "🙂", "<S>", "</S>"] + [f"w{i}" * (i % 9 + 1) for i in range(300)]
    ids = torch.from_numpy(char_ids_for_types(words, model.opts.max_characters_per_token))
    with torch.inference_mode():                      # the spec, written position by position
        spec = ReferenceBiLM(model).token_layer(words[:40])
        assert float((model.char_cnn(ids[:40]) - spec).abs().max()) <= 1e-5
    gen = torch.Generator().manual_seed(1)
    noise = torch.randint(1, 262, (7, ids.shape[1]), generator=gen)    # no padding at all
    ids = torch.cat([ids, torch.zeros(3, ids.shape[1], dtype=torch.long), noise])
    ids = ids[torch.randperm(len(ids), generator=gen)]
    with torch.inference_mode():
        fast = model.char_cnn(ids)
        plain = conv1d_token_layer(model.char_cnn, ids)
    assert fast.shape == plain.shape == (len(ids), 16)
    assert float((fast - plain).abs().max()) <= 1e-5 * float(plain.abs().max())
    with torch.inference_mode():                      # rows are independent of their batch
        alone = model.char_cnn(ids[:1])
    assert float((alone[0] - fast[0]).abs().max()) <= 1e-5


def test_pooled_windows_train_like_the_convolution():
    model = random_model()
    ids = torch.from_numpy(char_ids_for_types(["river", "bank", "a", "x" * 60], 50))
    model.char_cnn(ids).square().sum().backward()
    fast = [p.grad.clone() for p in model.char_cnn.parameters()]
    model.zero_grad()
    conv1d_token_layer(model.char_cnn, ids).square().sum().backward()
    for a, p in zip(fast, model.char_cnn.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-5, rtol=1e-4)


def batch(model, lengths, vocab, seed=0):
    gen = torch.Generator().manual_seed(seed)
    p = model.opts.projection_dim
    table = torch.randn(vocab, p, generator=gen)
    tok = torch.zeros(len(lengths), max(lengths), p)
    for r, n in enumerate(lengths):
        tok[r, :n] = table[torch.randint(0, vocab, (n,), generator=gen)]
    return tok, torch.tensor(lengths)


@pytest.mark.parametrize("vocab", [3, 10_000])      # layer-0 projection shared / not shared
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("fresh", [True, False])    # zero initial state (first step skips h·W)
def test_packed_inference_equals_autograd_path(vocab, threads, fresh):
    model = random_model(use_skip_connections=True)
    tok, lengths = batch(model, [9, 3, 12, 12, 1, 7, 2, 11, 5, 8], vocab)
    init = None
    if not fresh:
        gen = torch.Generator().manual_seed(5)
        init = [(torch.randn(2, 10, 32, generator=gen), torch.randn(2, 10, 16, generator=gen))
                for _ in range(2)]
    switch(model, parallel_min_rows=1)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            fast, state = model.contextual(tok, lengths, init)
        plain, plain_state = model.contextual(tok, lengths, init)  # grad on: the autograd path
    finally:
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
    assert fast.shape == plain.shape == (3, 10, 12, 32)
    assert float((fast - plain.detach()).abs().max()) < 1e-5
    for (c, h), (pc, ph) in zip(state, plain_state):
        assert float((c - pc.detach()).abs().max()) < 1e-5
        assert float((h - ph.detach()).abs().max()) < 1e-5


@pytest.mark.parametrize("n_layers", [1, 3])
def test_other_depths_and_no_projection(n_layers):
    """One layer (only the shared layer-0 projection, no per-call buffer) and three; a model
    without LSTM projection (h is the cell output)."""
    for model in (random_model(n_layers=n_layers, use_skip_connections=True),
                  random_model(n_layers=n_layers, lstm_dim=16, projection_dim=16)):
        tok, lengths = batch(model, [6, 4, 6, 1], 3)
        with torch.no_grad():
            fast, _ = model.contextual(tok, lengths)
        plain, _ = model.contextual(tok, lengths)
        assert fast.shape == (n_layers + 1, 4, 6, 2 * model.opts.output_dim)
        assert float((fast - plain.detach()).abs().max()) < 1e-5


needs_packing = pytest.mark.skipif(
    not onednn_packing(), reason="this torch build cannot pre-pack weights for oneDNN")
ALL_PACKED = {(name, layer, d) for name in ("w_rec", "w_in") for layer in range(2) for d in range(2)}


def packed(model) -> set:
    """{(weight, layer, direction)} of the packed weights the model holds."""
    return model.lstm.kernels.packed_keys()


@needs_packing
@pytest.mark.parametrize("parallel", [True, False])
def test_packed_weights_equal_plain_gemm(parallel):
    """10 rows of 1-12 tokens: the packed recurrent GEMM while 2 or more rows run, the plain
    one for the last row; every input projection (at most 72 rows) with packed weights."""
    model = random_model(use_skip_connections=True)
    tok, lengths = batch(model, [12, 11, 3, 12, 1, 7, 2, 9, 5, 9], 10_000)
    switch(model, parallel_min_rows=1 if parallel else 10 ** 9, packed_weights=False)
    with torch.no_grad():
        plain, plain_state = model.contextual(tok, lengths)
    assert packed(model) == set()
    switch(model, packed_weights=True)
    with torch.no_grad():
        fast, state = model.contextual(tok, lengths)
    assert packed(model) == ALL_PACKED
    assert float((fast - plain).abs().max()) < 1e-5
    for (c, h), (pc, ph) in zip(state, plain_state):
        assert float((c - pc).abs().max()) < 1e-5 and float((h - ph).abs().max()) < 1e-5
    with torch.no_grad():                      # one row: matrix-vector products, W_rec not packed
        model.lstm.drop_packed()
        one, _ = model.contextual(tok[:1], lengths[:1])
    assert packed(model) == {k for k in ALL_PACKED if k[0] == "w_in"}
    assert float((one[:, 0] - plain[:, 0]).abs().max()) < 1e-5
    switch(model, packed_input_max_rows=4)                     # larger inputs: plain GEMM
    model.lstm.drop_packed()
    with torch.no_grad():
        again, _ = model.contextual(tok, lengths)
    assert packed(model) == {k for k in ALL_PACKED if k[0] == "w_rec"}
    assert float((again - plain).abs().max()) < 1e-5


@needs_packing
def test_packed_weights_follow_the_weights():
    model = random_model()
    tok, lengths = batch(model, [6, 4, 6, 5], 50)

    def plain():
        switch(model, packed_weights=False)
        try:
            with torch.no_grad():
                return model.contextual(tok, lengths)[0]
        finally:
            switch(model, packed_weights=True)

    with torch.no_grad():
        first = model.contextual(tok, lengths)[0]
        assert torch.allclose(first, plain(), atol=1e-5)
        for w in list(model.lstm.w_rec) + list(model.lstm.w_in):   # in place, as an optimizer
            w.mul_(-0.5)
        second = model.contextual(tok, lengths)[0]
    assert float((second - first).abs().max()) > 1e-2
    assert torch.allclose(second, plain(), atol=1e-5)
    assert packed(model) == ALL_PACKED
    twin = copy.deepcopy(model)                   # the opaque packed copies stay behind
    assert packed(twin) == set() and packed(model) == ALL_PACKED
    with torch.no_grad():
        assert torch.allclose(twin.contextual(tok, lengths)[0], second, atol=1e-5)


def test_distinct_rows_groups_like_unique():
    gen = torch.Generator().manual_seed(2)
    table = torch.randn(40, 24, generator=gen)
    table[1] = table[0]
    table[1, 5] = torch.nextafter(table[0, 5], torch.tensor(9.0))     # one ulp apart
    rows = table[torch.randint(0, 40, (500,), generator=gen)]
    distinct, inverse = distinct_rows(rows)
    expected, _ = torch.unique(rows, dim=0, return_inverse=True)
    assert distinct.shape == expected.shape
    assert torch.equal(distinct[inverse], rows)
    assert torch.equal(torch.unique(distinct, dim=0), expected)
    empty, inv = distinct_rows(rows[:0])
    assert empty.shape == (0, 24) and inv.shape == (0,)


def test_skipping_boundary_steps_keeps_every_inner_position():
    model = random_model()
    lengths = [2, 3, 9, 4, 14, 3]
    tok, lens = batch(model, lengths, 50, seed=3)
    with torch.inference_mode():
        full, state = model.contextual(tok, lens)
        inner, none = model.contextual(tok, lens, boundaries=False)
    assert none is None and state is not None
    for r, n in enumerate(lengths):
        assert torch.equal(inner[0, r], full[0, r])
        diff = (inner[1:, r, 1:n - 1] - full[1:, r, 1:n - 1]).abs().numpy()
        assert diff.max(initial=0.0) < 1e-6
        assert not inner[:, r, n:].any()                                # padding stays zero


def test_embedder_matches_reference_in_both_thread_modes(tiny_checkpoint):
    model = load_checkpoint(tiny_checkpoint)
    ref = ReferenceBiLM(model)
    sents = [["the", "river", "bank"], ["a"], ["the", "bank", "lent", "the", "money", "."] * 3,
             ["bank", "bank", "bank"]]
    expected = [ref.embed(s) for s in sents]
    before = torch.get_num_threads()
    for rows in (1, 10 ** 6):                           # parallel directions / sequential
        switch(model, parallel_min_rows=rows)
        torch.set_num_threads(2)
        try:
            got = Embedder(model, device="cpu").embed(sents)
        finally:
            torch.set_num_threads(before)
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, atol=1e-5)


def test_both_directions_runs_in_two_threads_and_restores_settings():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = {}
    both_started = threading.Barrier(2, timeout=30)   # fails unless the two run side by side

    def job(d):
        both_started.wait()
        newcomer = []                                 # a thread started meanwhile gets the
        t = threading.Thread(target=lambda: newcomer.append(torch.get_num_threads()))
        t.start()                                     # caller's count, not the workers' half
        t.join()
        seen[d] = (threading.get_ident(), torch.get_num_threads(),
                   torch.is_inference_mode_enabled(), newcomer[0])
        if d == 1:
            raise ValueError("direction 1 failed")
        return d

    try:
        with torch.inference_mode():
            with pytest.raises(ValueError, match="direction 1 failed"):
                both_directions(job, torch.device("cpu"))
        assert torch.get_num_threads() == 2
        assert seen[0][0] != seen[1][0] != threading.get_ident()
        assert seen[0][1:] == seen[1][1:] == (1, True, 2)
        with torch.no_grad():
            assert both_directions(lambda d: (d, torch.is_grad_enabled()),
                                   torch.device("cpu")) == [(0, False), (1, False)]
        assert both_directions(lambda d: threading.get_ident(), torch.device("cpu"),
                               parallel=False) == [threading.get_ident()] * 2
    finally:
        torch.set_num_threads(before)


def test_fast_path_switches_are_per_model_with_the_measured_defaults():
    assert FastPath() == FastPath(packed_weights=True, packed_min_rows=2,
                                  packed_input_max_rows=128, parallel_min_rows=2)
    model, other = random_model(), random_model()
    assert model.fast_path == FastPath()
    switch(model, packed_weights=False)
    assert other.fast_path == FastPath()                      # no module-wide state
    assert copy.deepcopy(model).fast_path == model.fast_path  # a copy keeps its switches
