"""Soak: many edit / embed / cancel cycles in the main window without a leak or a stale result.

Each cycle changes one sentence (through the editor, or through ``Workspace.set_sentences``),
lets the embedding job start, and in some cycles cancels it (immediately, after it started, or
by superseding it with a second edit). Before and after the cycles (after a warm-up) the test
counts Python objects of the app's own types, the main window's QObject children and the
process RSS; after the last cycle every activation must equal a fresh embedding of its sentence.

``ELMO_SOAK_CYCLES`` sets the number of cycles (default 200: the cycles that found the planted
leaks and stale results; 3,000 by hand gave the same).
"""
from __future__ import annotations

import gc
import os
import time
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QCoreApplication, QEvent, QObject
from PySide6.QtGui import QTextCursor

import elmo_explorer.shell.dialogs
from elmo_explorer.shell.main_window import MainWindow
from elmo_explorer.state.settings import AppSettings
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.tokenize import tokenize

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

CYCLES = int(os.environ.get("ELMO_SOAK_CYCLES", "200"))
APP_MODULES = ("elmo_explorer.", "elmo_engine.")    # the types of the app and its engine
WARMUP = 50
CACHE_SIZE = 64              # the embedder's sentence cache saturates during the warm-up
MAX_APP_OBJECT_GROWTH = 5
MAX_QOBJECT_GROWTH = 3
MAX_OBJECT_GROWTH_SECOND_HALF = 50
MAX_RSS_GROWTH_MB = 30.0
BASE = ["He sat on the bank of the river.", "She deposited the check at the bank.",
        "They play the piano.", "The bank raised its rates."]
MODES = ("done", "cancel-queued", "cancel-running", "superseded-queued", "superseded-running")
WORDS = ["river", "money", "music", "stone", "light", "bank", "play", "record"]


def app_objects() -> Counter:
    """Live objects whose type is defined in the app's own modules (and its engine's), by
    type name."""
    counts: Counter = Counter()
    for o in gc.get_objects():
        module = getattr(type(o), "__module__", None)
        if isinstance(module, str) and module.startswith(APP_MODULES):
            counts[f"{module}.{type(o).__qualname__}"] += 1
    return counts


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(window, drawn) -> dict:
    """Counts after a full collection; frozen objects (MainWindow calls gc.freeze) included."""
    drawn.forget()                                # the test's own token memo is not counted
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.unfreeze()
    gc.collect()
    counts = {"app": app_objects(), "all": Counter(type(o).__qualname__ for o in gc.get_objects()),
              "qobjects": len(window.findChildren(QObject)),
              "ws_qobjects": len(window.workspace.findChildren(QObject)), "rss": rss_mb()}
    gc.freeze()                                   # as the app runs: long-lived objects frozen
    return counts


def spell(n: int) -> str:
    """``n`` written with WORDS as base-8 digits: unique texts from a fixed vocabulary.

    The embedder keeps one token vector per distinct token type for the session (a cache bounded by
    the vocabulary); a new type every cycle (``Cycle 123``) would grow it by one tensor per cycle.
    """
    digits = []
    while True:
        n, d = divmod(n, len(WORDS))
        digits.append(WORDS[d])
        if n == 0:
            return " ".join(reversed(digits))


def line_text(cycle: int) -> str:
    return f"Put the {spell(cycle)} by the {WORDS[(cycle // 3) % len(WORDS)]}."


def edit_in_editor(window, row: int, text: str) -> None:
    """Replace the editor's line ``row`` and commit it (as after the typing pause)."""
    block = window.sentences.editor.document().findBlockByNumber(row)
    cursor = QTextCursor(block)
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
    cursor.insertText(text)
    assert window.sentences.pending_edit()
    window.sentences.commit()


def run_cycle(qtbot, window, cycle: int, cancel_mode: int) -> str:
    """One edit/embed(/cancel) cycle; waits until the worker is idle. Returns the mode's name."""
    ws, worker = window.workspace, window.workspace.worker
    row = cycle % len(BASE)
    with qtbot.waitSignal(worker.idle, timeout=60000):
        if cycle % 2:
            edit_in_editor(window, row, line_text(cycle))
        else:
            sentences = list(ws.sentences)
            sentences[row] = line_text(cycle)
            ws.set_sentences(sentences)
        assert worker.is_busy(), "the edit submitted no job"
        if cancel_mode == 1:                          # cancel at once (usually still queued)
            window.cancel_jobs()
        elif cancel_mode == 2:                        # the Cancel button, once the job started
            if worker.current_job() is None:
                qtbot.waitSignal(worker.job_started, timeout=20000, raising=False).wait()
            window.status.cancel_button.click()
        elif cancel_mode == 3:                        # a second edit supersedes the queued job
            sentences = list(ws.sentences)
            sentences[(row + 1) % len(BASE)] = line_text(cycle) + " Again ."
            ws.set_sentences(sentences)
        elif cancel_mode == 4:                        # the same line edited again while it runs:
            if worker.current_job() is None:          # its results, still queued, are stale now
                qtbot.waitSignal(worker.job_started, timeout=20000, raising=False).wait()
            sentences = list(ws.sentences)
            sentences[row] = f"Later the {spell(cycle)} again."
            ws.set_sentences(sentences)
    if worker.is_busy():          # mode 4: the first job went idle before the second edit
        with qtbot.waitSignal(worker.idle, timeout=60000):
            pass
    assert not worker.is_busy()
    return MODES[cancel_mode]


class DrawnChecker:
    """On every tokens/activations signal, what a view would draw must fit the current text."""

    def __init__(self, ws):
        self.ws, self.checks, self._tok = ws, 0, {}
        self.failures: list = []
        ws.tokens_changed.connect(self.check)
        ws.activations_changed.connect(self.check)

    def forget(self) -> None:
        self._tok.clear()

    def check(self) -> None:
        ws = self.ws
        for i, (text, toks, act) in enumerate(zip(ws.sentences, ws.tokens, ws.activations)):
            if toks or act is not None:
                expect = self._tok.get(text)
                if expect is None:
                    if len(self._tok) > 256:          # keep the test's own memory flat
                        self._tok.clear()
                    expect = self._tok[text] = tokenize(text)
                if toks != expect:
                    self.failures.append(f"sentence {i} shows the tokens of another text: {toks}")
                elif act is not None and act.shape[1] != len(toks):
                    self.failures.append(f"sentence {i}: activation {act.shape} for {len(toks)} tokens")
        self.checks += 1


def check_current(ws, checkpoint) -> None:
    """Tokens and activations are exactly those of the current sentences (nothing stale)."""
    assert len(ws.sentences) == len(ws.tokens) == len(ws.activations) == len(BASE)
    fresh = Embedder(load_checkpoint(str(checkpoint))).embed([tokenize(s) for s in ws.sentences])
    for text, toks, act, ref in zip(ws.sentences, ws.tokens, ws.activations, fresh):
        assert toks == tokenize(text)
        assert act is not None and act.shape == (ws.n_layers, len(toks), act.shape[2])
        assert act.shape == ref.shape
        np.testing.assert_allclose(act, ref, rtol=0, atol=1e-5)


@pytest.fixture
def window(qtbot, app_settings_dir, tiny_checkpoint, monkeypatch):
    shown = []
    monkeypatch.setattr(elmo_explorer.shell.dialogs, "show_error",
                        lambda parent, title, msg: shown.append((title, msg)))
    w = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w)
    w.show()
    w.start(str(tiny_checkpoint), "\n".join(BASE) + "\n")
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    w.workspace.embedder.cache_size = CACHE_SIZE
    yield w
    w.workspace.worker.shutdown()
    assert shown == []


def test_soak_edit_embed_cancel(qtbot, window, tiny_checkpoint):
    ws = window.workspace
    modes = Counter()
    cancelled = []
    ws.worker.job_cancelled.connect(cancelled.append)
    drawn = DrawnChecker(ws)
    for cycle in range(WARMUP):
        modes[run_cycle(qtbot, window, cycle, cycle % len(MODES))] += 1
    before = measure(window, drawn)
    assert before["app"]["elmo_explorer.state.worker.Worker"] >= 1   # the count sees the app
    t0 = time.monotonic()
    for cycle in range(WARMUP, WARMUP + CYCLES):
        mode = 0 if cycle == WARMUP + CYCLES - 1 else (cycle * 7 + cycle // 5) % len(MODES)
        modes[run_cycle(qtbot, window, cycle, mode)] += 1
        if cycle == WARMUP + CYCLES // 2:
            middle = measure(window, drawn)
        if mode == 0:                                 # a finished job: every line is embedded
            assert ws.all_embedded(), f"cycle {cycle}: not every sentence is embedded"
    elapsed = time.monotonic() - t0
    after = measure(window, drawn)

    grown = {k: after["app"][k] - before["app"][k] for k in after["app"]
             if after["app"][k] > before["app"][k]}
    print(f"\n[soak] {CYCLES} cycles (+{WARMUP} warm-up) in {elapsed:.1f} s; modes {dict(modes)}; "
          f"app objects {sum(before['app'].values())} -> {sum(after['app'].values())}; "
          f"all tracked objects {sum(before['all'].values())} -> {sum(after['all'].values())} "
          f"(grew most: {(after['all'] - before['all']).most_common(4)}); "
          f"QObjects {before['qobjects']} -> {after['qobjects']} "
          f"(workspace {before['ws_qobjects']} -> {after['ws_qobjects']}); "
          f"RSS {before['rss']:.1f} -> {after['rss']:.1f} MB; {len(cancelled)} jobs cancelled; "
          f"{drawn.checks} drawn states checked")
    # Python objects of any type: one-time growth (lazy imports, caches filling) ends in the first
    # half; the second half may not grow further
    second_half = sum(after["all"].values()) - sum(middle["all"].values())
    print(f"[soak] all tracked objects, second half of the cycles: {second_half:+d} "
          f"({(after['all'] - middle['all']).most_common(4)})")
    assert second_half <= MAX_OBJECT_GROWTH_SECOND_HALF
    assert sum(grown.values()) <= MAX_APP_OBJECT_GROWTH, f"app objects grew: {grown}"
    assert after["qobjects"] - before["qobjects"] <= MAX_QOBJECT_GROWTH
    assert after["ws_qobjects"] == before["ws_qobjects"]
    assert after["rss"] - before["rss"] < MAX_RSS_GROWTH_MB
    assert min(modes.values()) >= min(10, CYCLES // 8)   # every kind of cycle really happened
    assert drawn.failures == [], f"{len(drawn.failures)} stale states drawn: {drawn.failures[:3]}"
    assert drawn.checks >= CYCLES // 2
    assert len(cancelled) >= modes["cancel-queued"] // 2 + modes["superseded-queued"] // 2
    check_current(ws, tiny_checkpoint)
    # the editor shows the same sentences the workspace holds
    assert [ln for ln in window.sentences.text().split("\n") if ln.strip()] == ws.sentences
