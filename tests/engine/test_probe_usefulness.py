"""Usefulness beside identity: cumulative scores, Δs and both expected layers (Tenney et al. 2019)
on a synthetic task where only layer 2 carries the label; the arithmetic by hand; the JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from elmo_engine.analysis.probes.cumulative import (differences, expected_layer_from_deltas,
                                                    expected_layer_from_weights, summarise)
from elmo_engine.analysis.probes.experiment import ProbeConfig, ProbeResult
from elmo_engine.analysis.probes.features import Examples
from elmo_engine.analysis.probes.usefulness import (COLUMNS, DISAGREE_AT, disagreement,
                                                    run_usefulness, table_rows,
                                                    write_usefulness_tsv)
from elmo_engine.errors import CancelledError
from elmo_engine.progress import TaskState

torch.set_num_threads(1)


def _layer_two(n, seed, k=3, d=8, n_cls=4):
    """Labels linearly decodable from layer 2 only; layers 0 and 1 are noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_cls, size=n)
    x = rng.normal(size=(k, n, d)).astype(np.float32)
    x[2] += (np.eye(n_cls, d) * 4.0)[y].astype(np.float32)
    return Examples(x, [f"L{c}" for c in y], [f"w{seed}_{i}" for i in range(n)], n_sentences=n)


@pytest.fixture(scope="module")
def layer_two_result():
    tr, dv, te = _layer_two(600, 0), _layer_two(200, 1), _layer_two(300, 2)
    cfg = ProbeConfig(epochs=20, patience=3, batch_size=128, seed=5, n_seeds=2,
                      mix_min_epochs=3)
    events = []
    res = run_usefulness(tr, dv, te, cfg, "pos", name="layer two", on_event=events.append)
    return res, events


def test_expected_layer_arithmetic_by_hand():
    # E_s = 0·0.2 + 1·0.3 + 2·0.5 = 1.3
    assert expected_layer_from_weights([0.2, 0.3, 0.5]) == pytest.approx(1.3)
    assert expected_layer_from_weights([1.0, 0.0, 0.0]) == 0.0
    # scores 0.50, 0.80, 0.90: Δ1 = 0.30, Δ2 = 0.10; E_Δ = (1·0.3 + 2·0.1) / 0.4 = 1.25
    d = differences([0.5, 0.8, 0.9])
    assert d[0] is None and d[1] == pytest.approx(0.3) and d[2] == pytest.approx(0.1)
    assert expected_layer_from_deltas(d) == pytest.approx(1.25)
    # a layer that lowers the score counts negatively: (1·0.2 + 2·(−0.05)) / 0.15 = 2/3
    assert expected_layer_from_deltas([None, 0.2, -0.05]) == pytest.approx(2 / 3)
    # nothing added after layer 0: undefined
    assert expected_layer_from_deltas([None, 0.0, -0.1]) is None
    with pytest.raises(ValueError):
        expected_layer_from_weights([0.0, 0.0])


def test_summarise_takes_deltas_per_seed_and_their_sd():
    s = summarise([[0.5, 0.8, 0.9], [0.5, 0.6, 0.9]])
    assert s.scores == pytest.approx([0.5, 0.7, 0.9])
    assert s.deltas[1] == pytest.approx(0.2) and s.deltas[2] == pytest.approx(0.2)
    assert s.deltas_sd[1] == pytest.approx(np.std([0.3, 0.1], ddof=1))
    assert s.expected_layer == pytest.approx((0.2 + 0.4) / 0.4)                      # 1.5
    # the seeds' own E_Δ: 1.25 and (0.1 + 0.6) / 0.4 = 1.75
    assert s.expected_layer_sd == pytest.approx(np.std([1.25, 1.75], ddof=1))


def test_the_flag_says_when_the_readings_point_at_different_layers():
    assert disagreement(1.0, 1.0 + DISAGREE_AT - 0.01, "t") == ""
    assert disagreement(1.2, None, "t") == ""
    text = disagreement(0.4, 1.6, "POS")
    assert text.startswith("⚠ POS") and "Tenney et al. 2019" in text and "1.20" in text
    assert text.count(".") >= 1 and "\n" not in text


def test_only_layer_two_informative_gives_the_largest_delta_at_two(layer_two_result):
    res, _ = layer_two_result
    u = res.usefulness
    assert u is not None and [r.layer for r in u.rows] == [0, 1, 2]
    cum = [r.cumulative for r in u.rows]
    assert cum[0] < 0.45 and cum[1] < 0.45 and cum[2] > 0.95, cum     # chance 0.25
    deltas = [r.delta for r in u.rows]
    assert deltas[0] is None and deltas[2] > 0.5 and deltas[2] > abs(deltas[1]) * 5, deltas
    assert u.expected_from_deltas == pytest.approx(2.0, abs=0.15)
    # the last cumulative score is the full mix probe (not trained twice)
    assert u.rows[2].cumulative == pytest.approx(res.mix.test)
    assert u.rows[2].weight == pytest.approx(res.mix.weights[2]) and res.mix.weights[2] > 0.5
    assert u.expected_from_weights == pytest.approx(
        sum(h * w for h, w in enumerate(res.mix.weights)))
    # the other readings: per-layer score, selectivity (the control always runs), MDL
    assert u.rows[2].score > 0.95 and u.rows[2].selectivity > 0.5
    assert u.rows[2].mdl_bits < u.rows[0].mdl_bits and u.rows[2].compression > 2
    assert len(u.seeds) == 2 and u.rows[1].cumulative_sd >= 0


def test_events_name_the_cumulative_phases(layer_two_result):
    _, events = layer_two_result
    phases = {e["phase"] for e in events}
    assert {"cumulative 0..0 mix", "cumulative 0..1 mix", "mix", "control mix"} <= phases
    assert "cumulative 0..2 mix" not in phases


def test_json_round_trip_rows_and_tsv(layer_two_result, tmp_path):
    res, _ = layer_two_result
    d = json.loads(json.dumps(res.to_dict()))
    assert d["usefulness"]["rows"][0]["delta"] is None
    back = ProbeResult.from_dict(d)
    assert back.usefulness == res.usefulness
    rows = table_rows([back.usefulness])
    assert len(rows) == 3 and len(rows[0]) == len(COLUMNS) and rows[0][-1] == "—"
    path = tmp_path / "u.tsv"
    write_usefulness_tsv([back.usefulness], path)
    lines = path.read_text("utf-8").splitlines()
    assert lines[0].split("\t")[:len(COLUMNS)] == list(COLUMNS) and len(lines) == 4
    assert float(lines[3].split("\t")[-1]) == pytest.approx(res.usefulness.expected_from_deltas,
                                                            abs=1e-4)
    d["usefulness"]["rows"][1]["cumulative"] = "high"
    with pytest.raises(ValueError, match=r"usefulness\.rows\[1\]\.cumulative"):
        ProbeResult.from_dict(d)
    # without the table the JSON has no key at all
    assert "usefulness" not in ProbeResult.from_dict(
        {k: v for k, v in res.to_dict().items() if k != "usefulness"}).to_dict()


def test_cancel_stops_the_cumulative_probes():
    tr, dv, te = _layer_two(200, 0), _layer_two(60, 1), _layer_two(60, 2)
    state = TaskState()

    def on_event(e):
        if e["phase"].startswith("cumulative"):
            state.cancel()
    with pytest.raises(CancelledError):
        run_usefulness(tr, dv, te, ProbeConfig(epochs=3, batch_size=64, n_seeds=1,
                                               mix_min_epochs=1), "pos", state=state,
                       on_event=on_event, mdl=False)


def test_the_report_has_a_usefulness_section(layer_two_result, tmp_path):
    from elmo_engine.analysis.report import _add_probes
    from elmo_engine.io.figures import FigureStyle
    from elmo_engine.io.report import ReportSpec

    res, _ = layer_two_result
    spec = ReportSpec()
    _add_probes(spec, [res.to_dict()], tmp_path / "ws.json", tmp_path,
                FigureStyle(3.5, 100), "demo")
    table = next(t for t in spec.tables if t.name == "probe_usefulness")
    assert [r["layer"] for r in table.rows] == ["0", "1", "2"] and table.columns == list(COLUMNS)
    assert table.rows[0]["Δℓ"] == "—" and "Tenney et al. 2019" in table.caption
    names = sorted(f.path.name for f in spec.figures)
    assert "probe_usefulness.png" in names and "probe_usefulness.svg" in names
    assert any(n.startswith("layer two: expected layer from the mix weights") for n in spec.notes)
    # runs without the table add no section
    spec = ReportSpec()
    plain = {k: v for k, v in res.to_dict().items() if k != "usefulness"}
    _add_probes(spec, [plain], tmp_path / "ws.json", None, FigureStyle(3.5, 100), "demo")
    assert all(t.name != "probe_usefulness" for t in spec.tables)


@pytest.mark.parametrize("key, value", [("expected_from_weights", "1.3"),
                                        ("expected_from_deltas", float("inf")),
                                        ("disagree", "yes"), ("flag", None), ("seeds", 3)])
def test_a_wrong_top_level_field_is_named(layer_two_result, key, value):
    res, _ = layer_two_result
    d = json.loads(json.dumps(res.to_dict()))
    d["usefulness"][key] = value
    with pytest.raises(ValueError, match=rf"usefulness\.{key}"):
        ProbeResult.from_dict(d)


def test_the_text_table_prints_both_expected_layers_and_the_flag(layer_two_result):
    from dataclasses import replace

    from elmo_engine.analysis.probes.usefulness import usefulness_text

    res, _ = layer_two_result
    text = usefulness_text(res.usefulness)
    lines = text.splitlines()
    assert lines[0].startswith("usefulness beside identity — layer two")
    assert lines[1].split()[:2] == ["layer", "score"] and len(lines) == 6     # head, 3 rows, E
    assert f"from the Δs {res.usefulness.expected_from_deltas:.2f}" in lines[-1]
    flagged = replace(res.usefulness, expected_from_weights=0.2, disagree=True,
                      flag=disagreement(0.2, res.usefulness.expected_from_deltas, "layer two"))
    last = usefulness_text(flagged).splitlines()[-1]
    assert last.startswith("⚠ layer two") and "Tenney et al. 2019" in last


@pytest.mark.parametrize("extra, message", [
    (["--figure", "u.png"], "needs --cumulative"),
    (["--cumulative", "--figure", "u.txt"], ".png, .svg or .pdf")])
def test_figure_option_errors_are_one_line(tmp_path, capsys, extra, message):
    from elmo_engine.cli.main import main

    argv = [str(tmp_path / a) if a.startswith("u.") else a for a in extra]
    assert main(["probe", "--task", "demo-pos", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elmo-explorer: error:") and message in err[0]
    assert not list(tmp_path.iterdir())
