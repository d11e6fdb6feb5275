"""The Units view (issue 40): the selected sentence's top units are the engine's states, the
settings switch them, and the ranking runs as a job of the view's group with progress and
cancel."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.views.units.controller import UnitsPanel
from elmo_explorer.views.units.model import RANK_KS, UnitsModel, UnitsSettings, top_units

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

SENTENCES = ["He sat on the bank of the river .", "The bank lends money ."]


@pytest.fixture
def panel(qtbot, ws, app_settings_dir):
    p = UnitsPanel(ws)
    qtbot.addWidget(p)
    ws.set_sentences(SENTENCES)
    qtbot.waitUntil(lambda: p.model.sentence is not None and p.is_ready(), timeout=60000)
    return p


def engine_states(ws, tokens, layer, d, kind):
    import torch

    from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect

    model = ws.embedder.model
    tok, lengths = framed_tokens(model, [tokens])
    res = inspect(model, tok, lengths, Capture(kinds=(StateKind(kind),), layers=(layer,),
                                               directions=(d,), dtype=torch.float32))
    return res.states[(layer, d, StateKind(kind))][0, 1:len(tokens) + 1].numpy()


def test_the_rows_are_the_engines_states_and_follow_the_settings(qtbot, panel, ws):
    rows = panel.model.sentence
    tokens = SENTENCES[0].split()
    assert rows.tokens == tuple(tokens) and rows.settings.state == "c"
    want = engine_states(ws, tokens, 0, 0, "c")
    assert np.allclose(rows.values, want[:, list(rows.units)].T, atol=1e-6)
    assert rows.units == top_units(want, panel.view.rows.value())
    assert ((rows.forget > 0) & (rows.forget < 1)).all()
    panel.view.direction.setCurrentText("backward")
    panel.view.state.setCurrentIndex(2)                               # forget gate
    panel.view.layer.setValue(1)
    qtbot.waitUntil(lambda: panel.model.sentence.settings == UnitsSettings(1, "backward", "f", 24)
                    and panel.is_ready(), timeout=60000)
    want = engine_states(ws, tokens, 1, 1, "f")
    assert np.allclose(panel.model.sentence.values, want[:, list(panel.model.sentence.units)].T,
                       atol=1e-6)
    state = panel.view_state()
    fresh = UnitsModel()
    fresh.restore(state)
    assert fresh.settings == UnitsSettings(1, "backward", "f", 24)


def test_ranking_runs_as_a_job(qtbot, panel):
    panel.rank()
    assert panel.view.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: bool(panel.model.ranking) and panel.is_ready(), timeout=120000)
    rows = panel.model.ranking
    assert [(r["layer"], r["direction"], r["state"]) for r in rows][:2] == [
        (0, "forward", "c"), (0, "forward", "h")]
    assert len(rows) == 8 and panel.view.table.rowCount() == 8
    assert set(rows[0]["curve"]) == {str(k) for k in RANK_KS if k <= 32}
    assert all(0 <= r["all"] <= 1 for r in rows)
    assert not panel.view.cancel_button.isEnabled()


def test_cancel_stops_the_ranking(qtbot, panel):
    panel.rank()
    panel.cancel()
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    assert panel.model.ranking == [] and "Cancelled" in panel.view.status.text()
