"""The bucketed LSTM loop that a GPU runs as CUDA graphs (elmo_engine.model.lstm_graphs),
checked on the CPU: the buckets, padding that changes nothing, the same results as the packed
path, the fallback when capture fails, and the batch size from free memory."""
from __future__ import annotations

import numpy as np
import torch

from elmo_engine.embed.embedder import Embedder
from elmo_engine.model import lstm_graphs
from elmo_engine.model.bilm import BiLM, reverse_index
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.lstm_graphs import (GPU_MAX_ROWS, GraphConfig, GraphRunner, bucket_rows,
                                           bucket_steps, gpu_batch_rows, run_dense, run_lengths)
from elmo_engine.model.lstm_packed import run_packed
from elmo_engine.model.options import BiLMOptions

from support import FIXTURES

LENGTHS = [9, 3, 12, 12, 1, 7, 2, 11, 5, 8]


def random_model(seed: int = 0) -> BiLM:
    model = BiLM(BiLMOptions(filters=((1, 8), (2, 8)), char_embed_dim=4, n_highway=1,
                             projection_dim=16, lstm_dim=32, n_layers=2))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model.eval()


def lstm_input(model: BiLM, lengths, seed: int = 0):
    """(2, B, T, P) input as :meth:`BiLM.contextual` builds it (rows sorted by length, [1]
    reversed over each row), with n_active and a random initial state."""
    gen = torch.Generator().manual_seed(seed)
    lens = torch.tensor(sorted(lengths, reverse=True))
    steps, p = int(lens[0]), model.opts.projection_dim
    tok = torch.randn(len(lengths), steps, p, generator=gen)
    tok *= (torch.arange(steps)[None, :] < lens[:, None])[..., None]
    rev = reverse_index(lens, steps)
    x = torch.stack([tok, tok.gather(1, rev[:, :, None].expand_as(tok))])
    n_active = [int((lens > t).sum()) for t in range(steps)]
    state = [(torch.randn(2, len(lengths), 32, generator=gen),
              torch.randn(2, len(lengths), 16, generator=gen)) for _ in range(2)]
    return x, lens, n_active, state


def test_buckets_round_up():
    assert [bucket_rows(n) for n in (1, 8, 9, 64, 65, 300)] == [8, 8, 16, 64, 128, 512]
    assert bucket_rows(3, min_rows=1) == 4
    assert [bucket_steps(t) for t in (1, 8, 9, 25, 27)] == [8, 8, 16, 32, 32]
    assert bucket_steps(25, multiple=4) == 28
    assert GraphRunner(GraphConfig(min_rows=16, step_multiple=16)).bucket(20, 17) == (32, 32)
    assert run_lengths([3, 3, 2, 1], 3) == [4, 3, 2]


def test_padding_to_a_bucket_changes_nothing():
    """The bucketed loop (rows and steps padded, masked) equals the same loop unpadded."""
    model = random_model()
    x, lens, _, state = lstm_input(model, LENGTHS)
    with torch.no_grad():
        plain, plain_state = run_dense(model.lstm, x, lens, state)
        rows, steps = 16, 16                                     # bucket of (10, 12)
        padded = torch.randn(2, rows, steps, 16)                 # garbage in the padding
        padded[:, :10, :12] = x
        pad_lens = torch.cat([lens, torch.zeros(6, dtype=torch.long)])
        pad_state = [(torch.cat([c, torch.randn(2, 6, 32)], 1), torch.cat([h, torch.randn(2, 6, 16)], 1))
                     for c, h in state]
        bucketed, bucket_state = run_dense(model.lstm, padded, pad_lens, pad_state)
    for a, b in zip(plain, bucketed):                            # (2, T, B, out)
        mask = (torch.arange(12)[:, None] < lens[None, :])[None, :, :, None]
        assert float(((a - b[:, :12, :10]) * mask).abs().max()) < 1e-6
        assert float(a[~mask.expand_as(a)].abs().max()) == 0.0    # zero past each row's end
    for (c, h), (cb, hb) in zip(plain_state, bucket_state):
        assert float((c - cb[:, :10]).abs().max()) < 1e-6
        assert float((h - hb[:, :10]).abs().max()) < 1e-6
    # a row of length 0 keeps its initial state
    assert torch.equal(bucket_state[0][0][:, 12], pad_state[0][0][:, 12])


def test_graph_runner_on_the_cpu_equals_the_packed_path():
    model = random_model(1)
    x, _, n_active, state = lstm_input(model, LENGTHS, seed=1)
    runner = GraphRunner()
    with torch.no_grad():
        ref, ref_state, ref_pos = run_packed(model.lstm, x, n_active, state)
        got, got_state, pos = runner.run(model.lstm, x, n_active, state)
    assert torch.equal(pos, ref_pos)
    for a, b in zip(ref, got):
        assert a.shape == b.shape and float((a - b).abs().max()) < 1e-5
    for (c, h), (gc, gh) in zip(ref_state, got_state):
        assert c.shape == gc.shape and float((c - gc).abs().max()) < 1e-5
        assert float((h - gh).abs().max()) < 1e-5
    assert runner.replays == 0                                  # the CPU runs it eagerly


def test_failed_capture_falls_back_to_the_eager_loop_once(monkeypatch):
    """Where capture fails, the bucket runs eagerly with the same results, and its capture is
    not tried again."""
    tries = []

    class Broken:
        def __init__(self, *args):
            tries.append(args[1:3])
            assert args[-1] == "pool"                           # the runner's shared pool
            raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(lstm_graphs, "capturable", lambda device: True)
    monkeypatch.setattr(lstm_graphs, "_Graph", Broken)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: "pool")
    model = random_model(2)
    x, _, n_active, state = lstm_input(model, LENGTHS, seed=2)
    runner = GraphRunner()
    with torch.no_grad():
        ref, _, _ = run_packed(model.lstm, x, n_active, state)
        for _ in range(2):
            got, _, _ = runner.run(model.lstm, x, n_active, state)
            assert max(float((a - b).abs().max()) for a, b in zip(ref, got)) < 1e-5
    assert tries == [(16, 16)]                                   # one try for the bucket
    assert list(runner.failed().values()) == ["operation not permitted when stream is capturing"]
    assert runner.replays == 0


def test_embedder_with_the_bucketed_loop_matches_the_packed_path():
    sents = [["The", "cat", "sat", "."], ["A", "dog", "."], ["Hello"], ["one", "two", "three"]]
    plain = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu")
    assert plain.model.lstm.graphs is None                      # off by default on the CPU
    bucketed = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu", cuda_graphs=True)
    assert isinstance(bucketed.model.lstm.graphs, GraphRunner)
    for a, b in zip(plain.embed(sents), bucketed.embed(sents)):
        assert a.shape == b.shape
        assert float(np.abs(a - b).max()) < 1e-5


def test_batch_rows_follow_free_memory():
    opts = BiLMOptions(filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512),
                                (7, 1024)))
    small = gpu_batch_rows(opts, 64, 4, free_bytes=1 << 30)
    assert 1 <= small < gpu_batch_rows(opts, 64, 4, free_bytes=4 << 30) <= GPU_MAX_ROWS
    assert gpu_batch_rows(opts, 64, 2, free_bytes=1 << 30) > small       # half the bytes
    assert gpu_batch_rows(opts, 64, 4, free_bytes=1 << 50) == GPU_MAX_ROWS
    assert gpu_batch_rows(opts, 64, 4, free_bytes=0) == 1
    assert gpu_batch_rows(opts, 64, 4, free_bytes=1 << 50, cap=100) == 100


def test_graphs_are_opt_in(monkeypatch):
    """Off unless asked: ``cuda_graphs=True``, or ELMO_EXPLORER_CUDA_GRAPHS=1 for CUDA only."""
    from elmo_engine.model.lstm_graphs import CUDA_GRAPHS_ENV, graphs_wanted

    monkeypatch.setenv(CUDA_GRAPHS_ENV, "1")
    emb = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu")
    assert emb.model.lstm.graphs is None and emb.max_batch_rows == 512
    assert graphs_wanted(None, torch.device("cuda")) is True     # (no tensor is made)
    assert graphs_wanted(False, torch.device("cuda")) is False
    monkeypatch.delenv(CUDA_GRAPHS_ENV)
    assert graphs_wanted(None, torch.device("cuda")) is False
    assert graphs_wanted(True, torch.device("cpu")) is True
    emb = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu", cuda_graphs=False)
    assert emb.model.lstm.graphs is None


def test_an_embedder_that_does_not_say_leaves_a_shared_models_graphs_alone():
    model = load_checkpoint(FIXTURES / "allennlp")
    Embedder(model, device="cpu", cuda_graphs=True)
    runner = model.lstm.graphs
    assert isinstance(runner, GraphRunner)
    Embedder(model, device="cpu")                                # did not say: unchanged
    assert model.lstm.graphs is runner
    Embedder(model, device="cpu", cuda_graphs=False)             # said: off
    assert model.lstm.graphs is None
