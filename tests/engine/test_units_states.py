"""Inside the LSTM (issue 40): captured states rebuild each layer's output, the fast path is
untouched, and interventions change exactly what they should (elmo_engine.model.lstm_inspect)."""
from __future__ import annotations

import pytest
import torch

from support import FIXTURES, REPO
from elmo_engine.errors import InputError
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.lstm_inspect import (ALL_STATES, Capture, Intervention, Op, StateKind,
                                            capture_bytes, framed_tokens, inspect, patch_from)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = [["The", "keys", "to", "the", "cabinet", "are", "on", "the", "table", "."],
             ["She", "went", "to", "the", "bank", "."],
             ["A", "dog", "barks", "."]]
MODELS = {"bilm-tf": FIXTURES / "bilm-tf" / "model", "allennlp": FIXTURES / "allennlp",
          "demo": REPO / "resources" / "demo_model"}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return load_checkpoint(MODELS[request.param]).eval()


def fast_layers(model, tok, lengths):
    with torch.no_grad():
        layers, _ = model.contextual(tok, lengths)
    return layers


def test_plain_path_equals_the_fast_path_and_leaves_it_bit_identical(model):
    tok, lengths = framed_tokens(model, SENTENCES)
    before = fast_layers(model, tok, lengths)
    res = inspect(model, tok, lengths, Capture())
    after = fast_layers(model, tok, lengths)
    assert torch.equal(before, after)                  # capturing touched nothing of the model
    assert (res.layers - before).abs().max() < 2e-6


@pytest.mark.parametrize("layer, directions", [(0, (0,)), (1, (1,)), (0, (0, 1)), (1, (0, 1))])
def test_states_only_computes_what_the_capture_needs_and_the_same_states(model, layer,
                                                                         directions):
    """A unit's values over a corpus need one direction up to one layer: ``states_only`` runs
    only that (no layer outputs) and gives the full run's states; an intervention in a
    direction or layer it does not run cannot change them."""
    tok, lengths = framed_tokens(model, SENTENCES)
    cap = Capture(kinds=(StateKind.C, StateKind.H), layers=(layer,), directions=directions,
                  dtype=torch.float32)
    full = inspect(model, tok, lengths, cap)
    part = inspect(model, tok, lengths, cap, states_only=True)
    assert part.layers is None and set(part.states) == set(full.states)
    with pytest.raises(ValueError, match="states_only"):
        part.outputs()
    for key, held in full.states.items():
        assert (part.states[key] - held).abs().max() < 1e-6, key
    if directions == (0,):                       # the backward direction is not run at all
        other = Intervention(layer, 1, StateKind.C, (0, 1, 2), Op.CLAMP, value=5.0)
        moved = inspect(model, tok, lengths, cap, interventions=[other], states_only=True)
        assert all(torch.equal(moved.states[k], part.states[k]) for k in part.states)
    with pytest.raises(ValueError, match="needs a capture"):
        inspect(model, tok, lengths, Capture(kinds=(), layers=(), directions=()),
                states_only=True)


@pytest.fixture
def one_thread():
    """One torch thread: the fast path's GEMMs then sum in one order in every environment (with
    two, the projection's 512-term sums were blocked differently and came within 1.7e-6)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_captured_states_rebuild_each_layers_output(model, one_thread):
    """c = f·c₋₁ + i·g (clipped), m = o·tanh(c), h = clip(m @ W_p), output = h (+ skip):
    rebuilt from the float32 capture, against the fast path's output, to ≤ 1e-6."""
    opts = model.opts
    tok, lengths = framed_tokens(model, SENTENCES)
    fast = fast_layers(model, tok, lengths)
    res = inspect(model, tok, lengths, Capture(dtype=torch.float32))
    out = opts.output_dim
    worst = 0.0
    for layer in range(opts.n_layers):
        for d in (0, 1):
            s = {k: res.states[(layer, d, k)] for k in ALL_STATES}
            for r, n in enumerate(lengths.tolist()):
                order = range(n) if d == 0 else range(n - 1, -1, -1)
                c_prev = torch.zeros(opts.lstm_dim)
                for t in order:
                    c = s[StateKind.FG][r, t] * c_prev + s[StateKind.IG][r, t] * s[StateKind.G][r, t]
                    if opts.cell_clip is not None:
                        c = c.clamp(-opts.cell_clip, opts.cell_clip)
                    worst = max(worst, float((c - s[StateKind.C][r, t]).abs().max()))
                    m = s[StateKind.OG][r, t] * torch.tanh(c)
                    worst = max(worst, float((m - s[StateKind.M][r, t]).abs().max()))
                    h = m @ model.lstm.wp[layer][d] if opts.has_lstm_projection else m
                    if opts.proj_clip is not None:
                        h = h.clamp(-opts.proj_clip, opts.proj_clip)
                    below = fast[layer, r, t, out * d:out * (d + 1)] if layer else None
                    if opts.use_skip_connections and layer > 0:
                        assert below is not None
                        h = h + below
                    got = fast[layer + 1, r, t, out * d:out * (d + 1)]
                    worst = max(worst, float((h - got).abs().max()))
                    c_prev = c
    assert worst <= 1e-6, worst


def test_float16_capture_and_its_memory_bound(model):
    tok, lengths = framed_tokens(model, SENTENCES)
    cap = Capture(kinds=(StateKind.C, StateKind.H), layers=(0,), directions=(1,))
    res = inspect(model, tok, lengths, cap)
    assert set(res.states) == {(0, 1, StateKind.C), (0, 1, StateKind.H)}
    assert res.states[(0, 1, StateKind.C)].dtype == torch.float16
    need = capture_bytes(model.opts, cap, *tok.shape[:2])
    assert need == 2 * tok.shape[0] * tok.shape[1] * (model.opts.lstm_dim + model.opts.output_dim)
    with pytest.raises(InputError, match="over the bound"):
        inspect(model, tok, lengths, Capture(max_bytes=need - 1, kinds=cap.kinds, layers=(0,),
                                             directions=(1,)))
    assert torch.equal(res.states[(0, 1, StateKind.C)][2, 6:], torch.zeros_like(
        res.states[(0, 1, StateKind.C)][2, 6:]))              # past row 2's framed length 6


@pytest.mark.parametrize("state", [StateKind.C, StateKind.M, StateKind.H])
@pytest.mark.parametrize("op", [Op.ZERO, Op.CLAMP, Op.SCALE])
def test_a_forward_intervention_at_t_changes_only_later_positions_upper_layers(model, state, op):
    opts = model.opts
    tok, lengths = framed_tokens(model, SENTENCES)
    base = inspect(model, tok, lengths).layers
    t, out = 4, opts.output_dim
    iv = Intervention(layer=0, direction=0, state=state, units=(0, 1, 2), op=op, value=2.5,
                      position=t)
    got = inspect(model, tok, lengths, interventions=[iv]).layers
    assert torch.equal(got[0], base[0])                              # token layer
    assert torch.equal(got[:, :, :t, :out], base[:, :, :t, :out])    # earlier positions
    assert torch.equal(got[:, :, :, out:], base[:, :, :, out:])      # the backward LM
    assert not torch.equal(got[1, 0, t:5, :out], base[1, 0, t:5, :out])
    # the layer below an intervention on layer 1 is untouched
    if opts.n_layers > 1:
        iv1 = Intervention(layer=1, direction=0, state=state, units=(0,), op=op, value=2.5,
                           position=t)
        got1 = inspect(model, tok, lengths, interventions=[iv1]).layers
        assert torch.equal(got1[:2], base[:2])
        assert not torch.equal(got1[2, 0, t:, :out], base[2, 0, t:, :out])


def test_a_backward_intervention_changes_only_earlier_positions(model):
    out = model.opts.output_dim
    tok, lengths = framed_tokens(model, SENTENCES)
    base = inspect(model, tok, lengths).layers
    t = 3
    iv = Intervention(layer=0, direction=1, state=StateKind.C, units=(1, 3), op=Op.CLAMP,
                      value=-1.0, position=t)
    got = inspect(model, tok, lengths, interventions=[iv]).layers
    assert torch.equal(got[:, :, :, :out], base[:, :, :, :out])      # the forward LM
    assert torch.equal(got[:, :, t + 1:, out:], base[:, :, t + 1:, out:])
    assert not torch.equal(got[1, :, :t + 1, out:], base[1, :, :t + 1, out:])


def test_zeroing_every_unit_of_h_equals_a_model_whose_projection_is_zero(model):
    """Zeroing all of h at every step: the layer outputs only its skip input (computed by hand)."""
    opts = model.opts
    tok, lengths = framed_tokens(model, SENTENCES[:1])
    iv = Intervention(0, 0, StateKind.H, tuple(range(opts.output_dim)), Op.ZERO)
    got = inspect(model, tok, lengths, interventions=[iv]).layers
    assert torch.equal(got[1, :, :, :opts.output_dim], torch.zeros_like(got[1, :, :, :opts.output_dim]))


def test_patching_a_position_from_another_sentence(model):
    """Patching every unit of c and h at position t from a donor that shares the words up to t
    changes nothing; from a donor that does not, the run from t on becomes the donor's as long
    as the two sentences' words agree after t."""
    opts = model.opts
    out = opts.output_dim
    good = ["The", "key", "to", "the", "cabinet", "is", "here", "."]
    bad = ["The", "keys", "to", "the", "cabinet", "is", "here", "."]
    tok, lengths = framed_tokens(model, [good])
    tok_bad, _ = framed_tokens(model, [bad])
    base = inspect(model, tok, lengths).layers
    donor_run = inspect(model, tok_bad, lengths).layers
    t = 5                                                          # framed: after "cabinet"
    ivs = [patch_from(model, bad, layer, 0, kind, t)
           for layer in range(opts.n_layers) for kind in (StateKind.C, StateKind.H)]
    got = inspect(model, tok, lengths, interventions=ivs).layers
    assert torch.equal(got[:, :, :t, :out], base[:, :, :t, :out])
    assert (got[1:, :, t:, :out] - donor_run[1:, :, t:, :out]).abs().max() < 1e-5
    same = [patch_from(model, good, 0, 0, StateKind.C, t)]
    again = inspect(model, tok, lengths, interventions=same).layers
    assert (again - base).abs().max() < 1e-6


def test_bad_interventions_are_one_clear_error(model):
    tok, lengths = framed_tokens(model, SENTENCES[:1])
    with pytest.raises(InputError, match="unit"):
        inspect(model, tok, lengths,
                interventions=[Intervention(0, 0, StateKind.C, (model.opts.lstm_dim,))])
    with pytest.raises(InputError, match="layer"):
        inspect(model, tok, lengths,
                interventions=[Intervention(9, 0, StateKind.C, (0,))])
    with pytest.raises(InputError, match="c, m or h"):
        inspect(model, tok, lengths, interventions=[Intervention(0, 0, StateKind.FG, (0,))])


def test_calls_in_threads_keep_their_own_captures_and_interventions(model):
    """The model is shared by threads: two calls with different interventions and captures,
    side by side and many times, each get what they get alone."""
    from concurrent.futures import ThreadPoolExecutor

    tok, lengths = framed_tokens(model, SENTENCES)
    calls = [([Intervention(0, 0, StateKind.C, (0, 1), Op.ZERO)], StateKind.C),
             ([Intervention(0, 1, StateKind.H, (2,), Op.SCALE, value=3.0)], StateKind.FG)]

    def one(k):
        ivs, kind = calls[k % 2]
        res = inspect(model, tok, lengths, Capture(kinds=(kind,), layers=(0,)), ivs)
        return res.layers, res.states[(0, 0, kind)]

    alone = [one(0), one(1)]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(one, range(12)))
    for k, (layers, states) in enumerate(together):
        assert torch.equal(layers, alone[k % 2][0]) and torch.equal(states, alone[k % 2][1])
    assert not torch.equal(alone[0][0], alone[1][0])
