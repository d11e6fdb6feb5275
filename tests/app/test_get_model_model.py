"""The Get-a-published-model dialog's model without Qt: rows, buttons per state, the lines."""
from __future__ import annotations

from pathlib import Path

from elmo_engine.io.catalogue import load_catalogue
from elmo_engine.io.model_store import FileCheck, ModelStatus, StoreListing, VerifyReport
from elmo_engine.progress import TransferReport
from elmo_explorer.shell.models_dialog.model import (COLUMNS, Busy, DialogModel, one_line,
                                                     progress_fraction, progress_text)

CAT = load_catalogue()


def status(name, downloaded=False, softmax=False, on_disk=0, partial=0, problem=None):
    return ModelStatus(CAT.require(name), Path("/data/models") / name, downloaded, softmax,
                       on_disk, partial, problem)


def listing(*statuses):
    given = {s.model.name: s for s in statuses}
    return StoreListing(Path("/data/models"), 10**9,
                        tuple(given.get(m.name, status(m.name)) for m in CAT.models))


def cells(model, name):
    return dict(zip(COLUMNS, model.row(name).cells))


def test_rows_carry_the_catalogue_and_the_disk():
    m = DialogModel()
    m.set_listing(listing(status("small", True, on_disk=54_400_000),
                          status("medium", partial=12_000_000)))
    assert [r.name for r in m.rows] == list(CAT.names())
    small = cells(m, "small")
    assert small["Parameters"] == "13.6 M" and small["Download (+ softmax)"] == "~54.4 MB"
    assert small["Memory without / with softmax"] == "54.4 MB / no softmax published"
    assert small["On disk"] == "downloaded, 54.4 MB (size checked)"
    assert cells(m, "medium")["On disk"] == "partial: 12.0 MB (Get resumes)"
    orig = CAT.require("original")
    extra = orig.download_bytes(True) - orig.download_bytes(False)
    assert cells(m, "original")["Download (+ softmax)"] == f"~374.4 MB + ~{extra / 1e9:.1f} GB"
    assert cells(m, "original")["Memory without / with softmax"] == "374.4 MB / 1.2 GB"
    assert m.selected == "small"                   # the first downloaded model


def test_actions_follow_the_selection_and_what_runs():
    m = DialogModel()
    m.set_listing(listing(status("small", True, on_disk=1), status("medium", partial=5)))
    a = m.actions(False)
    assert (a.get, a.open, a.verify, a.remove, a.cancel, a.default) == \
        (False, True, True, True, False, "open")
    m.selected = "medium"
    a = m.actions(False)
    assert a.get and a.get_label == "Resume" and not a.open and a.remove and a.default == "get"
    m.selected = "original"
    a = m.actions(True)
    assert a.get and a.softmax_box and a.get_label == "Get" and not a.remove
    m.set_listing(listing(status("original", True, on_disk=1)))
    m.selected = "original"
    a = m.actions(True)                            # downloaded without softmax, softmax wanted
    assert a.get and a.get_label == "Get softmax" and a.open and a.default == "get"
    assert m.actions(False).default == "open" and not m.actions(False).get
    m.busy, m.busy_name = Busy.GETTING, "original"
    m.set_listing(m.listing)
    assert cells(m, "original")["On disk"] == "downloading…"
    assert cells(m, "small")["On disk"] == "—"
    a = m.actions(True)
    assert a.cancel and not (a.get or a.open or a.verify or a.remove or a.softmax_box)


def test_a_damaged_model_offers_verify_and_remove_only():
    m = DialogModel()
    m.set_listing(listing(status("small", False, on_disk=9, problem="weights has 9 bytes")))
    m.selected = "small"
    a = m.actions(False)
    assert not a.get and not a.open and a.verify and a.remove
    assert cells(m, "small")["On disk"].startswith("damaged")


def test_verify_outcome_is_remembered_and_forgotten_with_the_model():
    m = DialogModel()
    m.set_listing(listing(status("small", True, on_disk=1)))
    ok = VerifyReport("small", Path("/x"), (FileCheck("a", True, None), FileCheck("b", True, None)))
    assert "2 files" in m.record_verify(ok)
    m.set_listing(m.listing)
    assert cells(m, "small")["On disk"].endswith("(SHA-256 verified)")
    bad = VerifyReport("small", Path("/x"), (FileCheck("a", False, "a: SHA-256 differs\nmore"),))
    assert m.record_verify(bad) == "a: SHA-256 differs"
    m.set_listing(m.listing)
    assert cells(m, "small")["On disk"].endswith("(verify FAILED)")
    m.set_listing(listing())
    assert "small" not in m.verified


def test_progress_and_error_lines():
    rep = TransferReport(12_300_000, 54_400_000, 4_100_000.0, 10.0, "lm_weights.hdf5")
    assert progress_text(rep) == "lm_weights.hdf5: 12.3 MB of 54.4 MB, 4.1 MB/s, 10 s left"
    assert progress_fraction(rep) == 12_300_000 / 54_400_000
    step = TransferReport(0, None, None, None, "checking that the model loads")
    assert progress_text(step) == "checking that the model loads"
    assert progress_fraction(step) is None
    assert one_line("\n  first line\nsecond") == "first line"
