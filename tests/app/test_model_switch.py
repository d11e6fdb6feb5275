"""Another model loaded while a view's job waits or runs (an attack pass, 2026-12-08).

The model loads on the long lane, in order with the views' jobs: a job asked for while the load
waits captured the model before and ran after it, and Layers, Units and Corpus drew its result
under the new model (Units saved it into workspaces stamped with the new checksum). Each view
now makes its jobs stale when the model changes. A load is held on an event here, so that the
overlap is certain, not a matter of timing.
"""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("pytestqt")

from support import LAYERS_SENTENCES                                 # noqa: E402

from elmo_explorer.state.workspace import ModelSpec, Workspace       # noqa: E402

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def ws(app_settings_dir, ws, qtbot):
    """The loaded workspace (tests/app/conftest.py) with six sentences embedded."""
    ws.set_sentences(list(LAYERS_SENTENCES[:6]))
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    return ws


@pytest.fixture
def held_load(monkeypatch):
    """``held_load(folder)`` → an event: loading ``folder`` waits for it (set at teardown);
    ``event.entered`` is set once the load has begun."""
    import elmo_engine.model.checkpoint as checkpoint

    real = checkpoint.load_checkpoint
    gates = {}

    def held(path, *a, **k):
        for folder, gate in gates.items():
            if str(path).startswith(folder):
                gate.entered.set()
                gate.wait(60)
        return real(path, *a, **k)

    monkeypatch.setattr(checkpoint, "load_checkpoint", held)

    def make(folder):
        gate = threading.Event()
        gate.entered = threading.Event()
        gates[str(folder)] = gate
        return gate

    yield make
    for gate in gates.values():
        gate.set()


def _while_loading(qtbot, ws, folder, held_load, ask):
    """Start loading ``folder``, call ``ask()`` (the user's click) while the load is held,
    then let the load finish; returns the checksum of the model before."""
    gate = held_load(folder)
    before = ws.embedder.checksum
    ws.load_model(ModelSpec(str(folder), device="cpu"))
    assert gate.entered.wait(20)
    ask()
    with qtbot.waitSignal(ws.model_changed, timeout=60000):
        gate.set()
    return before


def test_layers_run_asked_for_during_a_load_is_not_drawn_under_the_new_model(
        qtbot, ws, tmp_path, make_checkpoint, held_load):
    from elmo_explorer.views.layers.controller import LayersPanel

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LAYERS_SENTENCES) + "\n", encoding="utf-8")
    panel = LayersPanel(ws)
    qtbot.addWidget(panel)
    panel._on_model()
    panel.set_corpus(str(corpus))
    other = make_checkpoint(tmp_path / "b", seed=5, n_layers=1)
    before = _while_loading(qtbot, ws, other, held_load, lambda: panel.run())
    qtbot.waitUntil(lambda: panel.jobs.is_idle() and panel.is_ready(), timeout=120000)
    assert ws.embedder.checksum != before
    res = panel.model.result
    assert res is None or res["model"]["checksum"] == ws.embedder.checksum
    with qtbot.waitSignal(panel.results_changed, timeout=120000):
        panel.run()                                           # asked for again: this model's
    assert panel.model.result["model"]["checksum"] == ws.embedder.checksum
    assert panel.model.result["model"]["layers"] == 2


def test_a_layers_result_is_one_precisions():
    """bf16 moves CKA by up to 6e-4: a result cached in float32 was shown after Settings ▸
    Precision ▸ bf16."""
    from elmo_explorer.views.layers.model import LayersModel

    m = LayersModel()
    assert m.key("abc", "", "fp32") != m.key("abc", "", "bf16")


def test_the_mdl_table_takes_probe_runs_of_the_loaded_model_only():
    from types import SimpleNamespace

    from elmo_explorer.views.layers.model import LayersModel

    m = LayersModel()
    cost = {"name": "layer 0", "layer": 0, "online_codelength_bits": 2000.0,
            "compression": 1.1, "final_block_accuracy": 0.5}
    m.mdl = {"demo-pos": {"layers": [cost], "mix": None}}
    run = SimpleNamespace(task="demo-pos", model="model-a",
                          layers=[SimpleNamespace(layer=0, test=0.52)],
                          mix=SimpleNamespace(test=0.88))
    assert m.mdl_rows([run], "model-a")[0][-1] == "0.520"
    assert m.mdl_rows([run], "model-b")[0][-1] == "—"        # another model's run


def test_units_rank_asked_for_during_a_load_is_not_drawn_under_the_new_model(
        qtbot, ws, tmp_path, make_checkpoint, held_load, monkeypatch):
    from elmo_engine.analysis.units import corpus
    from elmo_explorer.views.units import model as units_model
    from elmo_explorer.views.units.controller import UnitsPanel

    monkeypatch.setattr(units_model, "RANK_TOKENS", 2_000)
    monkeypatch.setattr(corpus, "CORPUS_TOKENS", 3_000)
    panel = UnitsPanel(ws)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: panel.model.sentence is not None and panel.is_ready(),
                    timeout=60000)
    other = make_checkpoint(tmp_path / "b", seed=5, n_layers=1)
    _while_loading(qtbot, ws, other, held_load, lambda: (panel.rank(), panel.pattern()))
    qtbot.waitUntil(lambda: panel.jobs.is_idle() and panel.is_ready(), timeout=120000)
    assert ws.embedder.opts.n_layers == 1
    assert panel.model.ranking is None and panel.model.pattern is None
    assert not panel.model.rankings and panel.view.ranking_page.table.rowCount() == 0


def test_an_index_built_under_the_model_before_is_not_opened_under_the_new_one(
        qtbot, ws, tmp_path, make_checkpoint, monkeypatch):
    """The build ran on model A and the user loaded B meanwhile: the build's end asked to open
    the index with A's checksum, and the open, queued after B's load, installed A's index
    under B (B's vectors were then searched in it)."""
    from elmo_explorer.views.corpus import jobs as corpus_jobs
    from elmo_explorer.views.corpus.controller import CorpusPanel

    panel = CorpusPanel(ws)
    qtbot.addWidget(panel)
    panel._on_model()
    go, inside = threading.Event(), threading.Event()
    real = corpus_jobs.build_index

    def held(*a, **k):
        inside.set()
        go.wait(60)
        return real(*a, **k)

    monkeypatch.setattr(corpus_jobs, "build_index", held)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LAYERS_SENTENCES[:8]) + "\n", encoding="utf-8")
    panel.build([corpus], tmp_path / "index")
    assert inside.wait(20)
    other = make_checkpoint(tmp_path / "b", seed=7, n_layers=1)
    ws.load_model(ModelSpec(str(other), device="cpu"))        # queued behind the build
    go.set()
    qtbot.waitUntil(lambda: ws.n_layers == 2, timeout=60000)
    qtbot.waitUntil(lambda: panel.jobs.is_idle() and ws.worker.pending() == 0, timeout=60000)
    qtbot.wait(200)
    assert panel.index is None or panel.index.manifest.checksum == ws.embedder.checksum


def test_the_corpus_view_shows_every_layer_of_a_deeper_models_index(
        qtbot, tmp_path, make_checkpoint, app_settings_dir):
    """The app indexes every layer of the model; the view had a table and a map for layers
    0, 1 and 2 only, so a 3-layer model's top layer was built and never shown."""
    from elmo_explorer.views.corpus.controller import CorpusPanel

    deep = make_checkpoint(tmp_path / "deep", seed=3, n_layers=3)
    w = Workspace()
    try:
        with qtbot.waitSignal(w.model_changed, timeout=60000):
            w.load_model(ModelSpec(str(deep), device="cpu"))
        w.set_sentences(list(LAYERS_SENTENCES[:4]))
        qtbot.waitUntil(w.all_embedded, timeout=60000)
        panel = CorpusPanel(w)
        qtbot.addWidget(panel)
        panel._on_model()
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("\n".join(LAYERS_SENTENCES[:12]) + "\n", encoding="utf-8")
        panel.build([corpus], tmp_path / "index")
        qtbot.waitUntil(lambda: panel.index is not None and panel.is_ready(), timeout=120000)
        assert panel.index.layers == (0, 1, 2, 3)
        shown = [layer for layer, box in panel.view.table_boxes.items() if not box.isHidden()]
        assert shown == [0, 1, 2, 3]
        assert not panel.view.maps[3].isHidden()
        assert panel.view.table_boxes[3].title() == "layer 3 (biLSTM 3)"
    finally:
        assert w.worker.shutdown(timeout_s=30)
