"""The probes panel: training a tiny task on the worker draws bars whose heights are the weights."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.views.probes.controller import ProbeTask, ProbesPanel
from elmo_explorer.state.workspace import Workspace
from app_helpers import tiny_probe_task
from elmo_engine.analysis.probes.experiment import ProbeConfig

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

CONFIG = ProbeConfig(epochs=3, patience=2, batch_size=32, control=True, mix_min_epochs=2)


@pytest.fixture(scope="module")
def two_runs(tiny_checkpoint, torch_one_thread):
    """Two runs of the tiny POS task with a control task, trained by the engine (no panel),
    as a workspace file stores them: what the drawing, export and restore tests show."""
    from elmo_engine.analysis.probes.experiment import probe_sentences
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    emb = Embedder(load_checkpoint(str(tiny_checkpoint)), device="cpu")
    task = tiny_probe_task()
    data = task.load()
    runs = [probe_sentences(emb, data.train, data.test, data.dev, task=task.task, config=CONFIG,
                            name=task.name, label=data.label) for _ in range(2)]
    return json.loads(json.dumps([r.to_dict() for r in runs]))


@pytest.fixture
def shown(qtbot, workspace, two_runs):
    """A probes panel showing :func:`two_runs`."""
    panel = ProbesPanel(workspace, recorded=False)
    qtbot.addWidget(panel)
    panel.restore_probe_runs(two_runs)
    return panel


def test_training_streams_curves_and_draws_weight_bars_and_table(qtbot, ws):
    panel = ProbesPanel(ws, recorded=False)
    qtbot.addWidget(panel)
    events = []
    panel.training_event.connect(events.append)
    with qtbot.waitSignal(panel.runs_changed, timeout=240000):
        panel.run_tasks([tiny_probe_task(), tiny_probe_task()], config=CONFIG)
    assert len(panel.model.runs) == 2
    run = panel.model.runs[0]
    assert len(run.layers) == 3 and run.layers[0].control_test is not None
    assert len(run.seeds) == 3 and len(run.layers[1].test_per_seed) == 3
    # live curves arrived from the worker for every phase
    assert {"start", "layers", "mix", "control layers", "control mix"} <= {e["phase"] for e in events}
    assert panel.view.dev_plot.listDataItems() and "layer 0" in panel.view.curve_legend.text()
    # one bar item per run; bar heights are the normalised weights
    assert len(panel.view.bars) == 2
    for bar, r in zip(panel.view.bars, panel.model.runs):
        np.testing.assert_allclose(np.asarray(bar.opts["height"]), r.mix.weights)
        assert abs(sum(bar.opts["height"]) - 1) < 1e-9
    assert panel.view.table.rowCount() == 2 * 4 and not panel.view.empty_label.isVisibleTo(panel)


def test_table_has_a_row_per_layer_and_the_mix(shown):
    table, run = shown.view.table, shown.model.runs[0]
    assert table.rowCount() == 2 * 4
    assert table.item(3, 2).text().startswith("mix")
    assert table.item(3, 3).text() == "—"                    # no "mix weight 1.0000"
    mean = float(table.item(1, 3).text().split("±")[0])
    assert mean == pytest.approx(run.mix.weights[1], abs=1e-4)
    dlg = shown.view.show_table_dialog()                     # enlarged in its own window
    try:
        assert dlg.table.rowCount() == 8 and dlg.table.item(3, 2).text().startswith("mix")
    finally:
        dlg.close()
        dlg.deleteLater()


def test_colours_by_task_kind_and_legends(shown):
    from elmo_engine.io.figures import task_color

    # two UPOS runs → syntax blue, dark then light
    assert shown.model.colours() == [task_color("syntax"), task_color("syntax", light=True)]
    # legends beside the plots, naming the runs, the control task and the baseline
    assert "tiny POS" in shown.view.run_legend.text()
    assert "control task" in shown.view.run_legend.text()
    np.testing.assert_allclose(np.asarray(shown.view.bars[1].opts["height"]),
                               shown.model.runs[1].mix.weights)


def test_exports_write_json_csv_and_figures(shown, tmp_path):
    run = shown.model.runs[0]
    shown.write_export(tmp_path / "runs.json", "json")
    d = json.loads((tmp_path / "runs.json").read_text("utf-8"))
    assert len(d) == 2 and d[0]["mix"]["weights"] == run.mix.weights
    shown.write_export(tmp_path / "runs.csv", "csv")
    lines = (tmp_path / "runs.csv").read_text("utf-8").splitlines()
    assert lines[0].startswith("run,task,layer,mix weight") and len(lines) == 9
    for ext, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        (written,) = shown.export_plots(tmp_path / f"plots{ext}")   # drawn by the figure module
        assert written.name == f"plots{ext}" and written.read_bytes()[:5].startswith(magic)
    text = (tmp_path / "plots.svg").read_text(encoding="utf-8")
    assert "mix weight" in text and "softmax" in text and run.name in text
    actions = shown.export_actions()
    assert len(actions) == 5
    # the usefulness entries wait for Compute usefulness (they ended in a traceback before)
    assert [a.isEnabled() for a in actions] == [True, True, True, False, False]


def test_saved_runs_come_back(shown):
    saved = json.loads(json.dumps(shown.probe_runs()))       # as a workspace file stores them
    shown.clear_runs()
    assert shown.view.bars == [] and shown.view.table.rowCount() == 0
    shown.restore_probe_runs(saved)
    assert len(shown.view.bars) == 2 and shown.view.table.rowCount() == 8
    assert [r.mix.weights for r in shown.model.runs] == [d["mix"]["weights"] for d in saved]


def test_cancel_stops_training(qtbot, ws):
    panel = ProbesPanel(ws, recorded=False)
    qtbot.addWidget(panel)
    cfg = ProbeConfig(epochs=10_000, patience=10_000, batch_size=4)
    with qtbot.waitSignal(panel.training_event, timeout=60000,
                          check_params_cb=lambda e: e["phase"] == "layers"):
        panel.run_tasks([tiny_probe_task()], config=cfg)
    assert panel.view.cancel_button.isEnabled()
    with qtbot.waitSignal(ws.worker.job_cancelled, timeout=60000):
        panel.cancel()
    qtbot.waitUntil(lambda: panel.view.train_button.isEnabled(), timeout=5000)
    assert panel.model.runs == []


def test_without_model_shows_the_empty_state_and_is_ready(qtbot):
    w = Workspace()
    try:
        panel = ProbesPanel(w, recorded=False)
        qtbot.addWidget(panel)
        with qtbot.waitSignal(panel.ready, timeout=5000):
            panel.show()
        assert panel.is_ready() and panel.view.empty_label.isVisible()
        assert "does not" in panel.view.explain.text() or "not say" in panel.view.explain.text()
    finally:
        assert w.worker.shutdown(timeout_s=5)


def test_a_failing_task_shows_the_error_and_frees_the_panel(qtbot, ws):
    from elmo_engine.errors import InputError

    panel = ProbesPanel(ws, recorded=False)
    qtbot.addWidget(panel)

    def broken():
        raise InputError("expected 2 fields", path="bad.tsv", line=7)

    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.run_tasks([ProbeTask("broken", "tsv", broken)])
    assert "bad.tsv:7" in panel.view.status.text()
    assert panel.view.train_button.isEnabled() and not panel.view.cancel_button.isEnabled()
    assert panel.model.runs == []


def test_the_probes_train_on_the_models_device_as_probe_does(qtbot, ws, monkeypatch):
    """The view trained its probes on the CPU whatever the model's device; ``probe --device
    auto`` trains them on a GPU where there is one. The run's config now carries the model's
    device (a stand-in "cuda:0" here; the training itself is replaced)."""
    from elmo_engine.analysis.probes import experiment
    from elmo_engine.errors import InputError

    seen = []

    def capture(*args, config=None, **kwargs):
        seen.append(config.device)
        raise InputError("stop here")

    monkeypatch.setattr(experiment, "probe_sentences", capture)
    monkeypatch.setattr(ws.embedder, "device", type("Dev", (), {"__str__": lambda s: "cuda:0"})())
    panel = ProbesPanel(ws, recorded=False)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.run_tasks([tiny_probe_task()])
    assert seen == ["cuda:0"] and "stop here" in panel.view.status.text()


def test_first_show_shows_recorded_results_and_trains_nothing(qtbot, ws, tmp_path, monkeypatch):
    from elmo_engine.analysis.probes import reference
    from elmo_engine.analysis.probes.experiment import run_probe
    from elmo_engine.analysis.probes.features import Examples

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 60)
    x = rng.normal(size=(3, 60, 4)).astype(np.float32)
    x[1, :, 0] += 3 * y
    ex = Examples(x, [f"L{v}" for v in y], [f"w{i}" for i in range(60)])
    res = run_probe(ex, ex, ex, ProbeConfig(epochs=2, n_seeds=2, mix_min_epochs=2), task="pos",
                    name="POS reference")
    res.command = "elmo-explorer probe --task pos --out pos_ewt.json"
    res.write_json(tmp_path / "pos_ewt.json")
    (tmp_path / "wsd_semcor_semeval2007.json").write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(reference, "reference_dir", lambda: tmp_path)
    panel = ProbesPanel(ws)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.show()
    assert panel.jobs.is_idle() and panel.is_ready()        # nothing trains by itself
    assert [r.name for r in panel.model.runs] == ["Recorded: POS reference"]
    assert panel.model.recorded and panel.view.recorded_label.isVisibleTo(panel)
    assert "--task pos --out pos_ewt.json" in panel.view.recorded_label.text()
    assert panel.probe_runs() == []                            # not saved with a workspace
    assert len(panel.view.bars) == 1 and not panel.view.empty_label.isVisibleTo(panel)
    with qtbot.waitSignal(panel.runs_changed, timeout=60000):   # the user's run replaces them
        panel.run_tasks([tiny_probe_task()], ProbeConfig(epochs=2, n_seeds=1, mix_min_epochs=1))
    assert [r.name for r in panel.model.runs] == ["tiny POS"] and not panel.model.recorded
    assert not panel.view.recorded_label.isVisibleTo(panel)
