"""Usefulness beside identity in the Probes view: the app and `probe --cumulative` give the same
numbers for the same task and seeds; the page draws the table, the bars and both expected
layers; the flag; exports (figure and TSV); cancel."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_engine.analysis.probes.experiment import ProbeConfig
from elmo_engine.analysis.probes.tasks import demo_task
from elmo_engine.analysis.probes.usefulness import COLUMNS, DISAGREE_AT
from elmo_engine.cli.main import main
from elmo_explorer.views.probes.controller import ProbesPanel

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

#: the same settings as the command line below (the demo POS task's own lr, 1e-3, in both)
CONFIG = ProbeConfig(epochs=2, patience=3, n_seeds=2, mix_min_epochs=2)
ARGS = ["--task", "demo-pos", "--max-sentences", "60", "--epochs", "2", "--seeds", "2",
        "--mix-min-epochs", "2", "--threads", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def cli_json(tiny_checkpoint, tmp_path_factory, torch_one_thread):
    out = tmp_path_factory.mktemp("cum") / "demo_pos.json"
    assert main(["probe", "--checkpoint", str(tiny_checkpoint), *ARGS, "--cumulative",
                 "-o", str(out)]) == 0
    return json.loads(out.read_text("utf-8"))


@pytest.fixture
def computed(qtbot, ws):
    """The panel after Compute usefulness on the demo POS task (60 training sentences)."""
    panel = ProbesPanel(ws, recorded=False)
    qtbot.addWidget(panel)
    panel.resize(1280, 800)
    task = demo_task("pos")
    task.options["max_train_sentences"] = 60
    phases = []
    panel.training_event.connect(lambda e: phases.append(e["phase"]))
    with qtbot.waitSignal(panel.runs_changed, timeout=240000):
        panel.run_usefulness([task], config=CONFIG)
    assert any(p.startswith("cumulative 0..1") for p in phases)
    return panel


def test_the_app_and_the_cli_give_the_same_numbers(computed, cli_json):
    app = computed.model.runs[0].usefulness.__dict__
    cli = cli_json["usefulness"]
    assert cli_json["config"]["cumulative"] and cli_json["seeds"] == [0, 1]
    for key in ("expected_from_weights", "expected_from_weights_sd", "expected_from_deltas",
                "disagree"):
        assert app[key] == pytest.approx(cli[key], abs=1e-9) if cli[key] is not None \
            else app[key] is None, key
    for mine, theirs in zip(computed.model.runs[0].usefulness.rows, cli["rows"]):
        for key, v in theirs.items():
            got = getattr(mine, key)
            assert (got is None) == (v is None), key
            if v is not None:
                assert got == pytest.approx(v, abs=1e-9), (key, mine.layer)


def test_the_page_draws_the_table_bars_and_both_expected_layers(computed):
    page, u = computed.view.usefulness, computed.model.runs[0].usefulness
    assert computed.view.pages.currentWidget() is page
    assert page.table.rowCount() == 3 and page.table.columnCount() == len(COLUMNS)
    assert page.table.item(0, COLUMNS.index("Δℓ")).text() == "—"
    assert float(page.table.item(2, COLUMNS.index("cumulative 0..ℓ")).text().split("±")[0]) \
        == pytest.approx(u.rows[2].cumulative, abs=1e-4)
    weights, deltas = page.bars
    np.testing.assert_allclose(weights.opts["height"], [r.weight for r in u.rows])
    np.testing.assert_allclose(deltas.opts["height"], [r.delta for r in u.rows[1:]])
    assert page.lines[0].value() == pytest.approx(u.expected_from_weights)
    assert len(page.lines) == (1 if u.expected_from_deltas is None else 2)
    assert page.flag_label.isVisibleTo(computed) == u.disagree
    assert not page.empty_label.isVisibleTo(computed)
    assert "E_s" in page.legend.text() and "expected layer" in page.expected_label.text()


def test_a_disagreement_shows_one_sentence(computed):
    run = computed.model.runs[0]
    u = run.usefulness
    u.expected_from_weights, u.expected_from_deltas = 0.3, 0.3 + DISAGREE_AT + 0.4
    from elmo_engine.analysis.probes.usefulness import disagreement

    u.flag = disagreement(u.expected_from_weights, u.expected_from_deltas, run.name)
    u.disagree = True
    computed.restore_probe_runs([r.to_dict() for r in computed.model.runs])
    page = computed.view.usefulness
    text = page.flag_label.text()
    assert page.flag_label.isVisibleTo(computed) and text.count("\n") == 0
    assert "Tenney et al. 2019" in text and "1.20" in text


def test_exports_the_figure_and_the_tsv(computed, tmp_path):
    for ext, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml")):
        (written,) = computed.export_usefulness(tmp_path / f"useful{ext}")
        assert written.read_bytes()[:5].startswith(magic)
    svg = (tmp_path / "useful.svg").read_text("utf-8")
    assert "E_s" in svg and "cumulative score" in svg
    computed.write_export(tmp_path / "useful.tsv", "tsv")
    lines = (tmp_path / "useful.tsv").read_text("utf-8").splitlines()
    assert lines[0].split("\t")[:len(COLUMNS)] == list(COLUMNS) and len(lines) == 4
    texts = {a.text(): a.isEnabled() for a in computed.export_actions()}
    assert texts["Usefulness figure (PNG, SVG, PDF)…"] and texts["Usefulness table (TSV)…"]


def test_without_a_table_the_page_says_how_to_get_one(qtbot, ws, tmp_path):
    panel = ProbesPanel(ws, recorded=True)
    qtbot.addWidget(panel)
    page = panel.view.usefulness
    assert page.table.rowCount() == 0 and page.empty_label.text().count("Compute usefulness")
    with pytest.raises(LookupError):
        panel.export_usefulness(tmp_path / "x.png")


def test_cancel_stops_the_usefulness_job(qtbot, ws):
    panel = ProbesPanel(ws, recorded=False)
    qtbot.addWidget(panel)
    task = demo_task("pos")
    task.options["max_train_sentences"] = 40
    cfg = ProbeConfig(epochs=10_000, patience=10_000, batch_size=4, n_seeds=1)
    with qtbot.waitSignal(panel.training_event, timeout=120000,
                          check_params_cb=lambda e: e["phase"] == "layers"):
        panel.run_usefulness([task], config=cfg)
    assert not panel.view.usefulness.compute_button.isEnabled()
    with qtbot.waitSignal(ws.worker.job_cancelled, timeout=60000):
        panel.cancel()
    qtbot.waitUntil(lambda: panel.view.usefulness.compute_button.isEnabled(), timeout=5000)
    assert panel.model.runs == []
