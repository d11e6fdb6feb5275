"""The background worker: job handles (results, errors, progress, posts, cancel), the staleness
rule (a generation counter per request kind), the two lanes, shutdown."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.state.worker import JobHandle, Lane, Worker
from elmo_engine.errors import InputError

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def worker(qtbot):
    w = Worker()
    yield w
    assert w.shutdown(timeout_s=5)


def test_result_is_delivered_on_the_gui_thread(qtbot, worker):
    got = []
    gui_thread = threading.get_ident()
    job_threads = []

    def fn(state):
        job_threads.append(threading.get_ident())
        state.report(1, 2, "half")
        return 21 * 2

    with qtbot.waitSignal(worker.idle, timeout=5000):
        job = worker.submit("answer", fn, on_done=lambda v: got.append((v, threading.get_ident())))
    assert got == [(42, gui_thread)]
    assert job_threads and job_threads[0] != gui_thread
    assert isinstance(job, JobHandle) and job.id >= 1 and job.lane is Lane.LONG
    assert job.finished and not job.active and not worker.is_busy() and worker.pending() == 0


def test_signals_in_order(qtbot, worker):
    events = []
    worker.job_started.connect(lambda i, n: events.append(("started", n)))
    worker.job_progress.connect(lambda i, d, t, m: events.append(("progress", d, t, m)))
    worker.job_finished.connect(lambda i: events.append(("finished",)))
    with qtbot.waitSignal(worker.idle, timeout=5000):
        worker.submit("count", lambda st: st.report(3, 3, "done"))
    assert events == [("started", "count"), ("progress", 3, 3, "done"), ("finished",)]


def test_engine_error_reaches_on_error(qtbot, worker):
    errors, results = [], []
    failed = []
    worker.job_failed.connect(lambda i, m: failed.append(m))

    def fn(state):
        raise InputError("bad line", path="x.txt", line=3)

    with qtbot.waitSignal(worker.idle, timeout=5000):
        worker.submit("parse", fn, on_done=results.append, on_failed=errors.append)
    assert results == []
    assert errors == ["x.txt:3: bad line"]
    assert failed == errors


def test_unexpected_error_without_handler_is_reported(qtbot, worker):
    def fn(state):
        raise ValueError("boom")

    with qtbot.waitSignal(worker.unhandled_error, timeout=5000) as blocker:
        worker.submit("explode", fn)
    name, message = blocker.args
    assert name == "explode"
    assert "ValueError" in message and "boom" in message


def test_cancel_stops_a_long_job_within_a_second(qtbot, worker):
    started = threading.Event()
    results = []
    checks = []

    def endless(state):
        started.set()
        while True:
            state.check()
            checks.append(1)
            threading.Event().wait(0.002)

    job = worker.submit("endless", endless, on_done=results.append)
    assert started.wait(5)
    with qtbot.waitSignal(worker.job_cancelled, timeout=1000) as blocker:
        assert job.cancel()
    assert blocker.args == [job.id] and job.stale and not job.cancel()
    assert results == [] and len(checks) > 0
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=1000)


def test_newer_job_of_a_kind_drops_older_result(qtbot, worker):
    release = threading.Event()
    started = threading.Event()
    got = []

    def slow_ignoring_cancel(state):
        started.set()
        release.wait(5)
        return "old"

    worker.submit("old", slow_ignoring_cancel, on_done=got.append, on_failed=got.append, kind="g")
    assert started.wait(5)
    queued = worker.submit("queued", lambda st: "middle", on_done=got.append, kind="g")
    worker.submit("other group", lambda st: "other", on_done=got.append, kind="h")
    with qtbot.waitSignal(worker.idle, timeout=5000):
        worker.submit("new", lambda st: "new", on_done=got.append, kind="g")
        release.set()
    assert got == ["other", "new"]
    assert queued.stale and queued.generation == 2 and worker.generation("g") == 3


def test_cancel_all_and_shutdown_while_running(qtbot):
    w = Worker()
    started = threading.Event()

    def endless(state):
        started.set()
        while True:
            state.check()
            threading.Event().wait(0.002)

    w.submit("a", endless)
    w.submit("b", endless)
    assert started.wait(5)
    assert w.shutdown(timeout_s=2)
    with pytest.raises(RuntimeError):
        w.submit("late", lambda st: 1)


def test_broken_callback_is_reported_not_raised(qtbot, worker):
    def bad_callback(value):
        raise KeyError("oops")

    with qtbot.waitSignal(worker.unhandled_error, timeout=5000) as blocker:
        worker.submit("cb", lambda st: 1, on_done=bad_callback)
    assert "KeyError" in blocker.args[1]


def test_app_start_up_shortens_the_gil_switch_interval():
    """A pure-Python job on the worker must not keep the GUI thread waiting 5 ms (Python's
    default) at each of the GUI's calls into Python: see test_big_file_does_not_block_the_gui.
    The app sets it once at start-up (elmo_explorer.shell.startup), with one torch thread fewer than
    the cores; checked in a fresh process, as the app starts."""
    code = ("import os, sys, torch\n"
            "from elmo_explorer.shell.startup import GIL_SWITCH_S, configure_process\n"
            "configure_process()\n"
            "print(GIL_SWITCH_S, sys.getswitchinterval(), torch.get_num_threads())\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True).stdout.split()
    limit, interval, threads = float(out[0]), float(out[1]), int(out[2])
    assert limit <= 0.001 and interval <= limit + 1e-9
    assert threads == max(1, (os.cpu_count() or 2) - 1)


def test_the_app_tests_run_under_the_apps_gil_switch_interval():
    from elmo_explorer.shell.startup import GIL_SWITCH_S
    assert sys.getswitchinterval() <= GIL_SWITCH_S + 1e-9         # tests/conftest.py


def test_progress_and_posts_reach_their_own_job_only(qtbot, worker):
    mine, other, posts, finished = [], [], [], []

    def fn(state):
        state.post("partial")
        state.report(2, 2, "all")
        return "result"

    worker.submit("other", lambda st: st.report(1, 1, "theirs"),
                  on_progress=lambda *a: other.append(a))
    with qtbot.waitSignal(worker.idle, timeout=5000):
        worker.submit("mine", fn, on_progress=lambda *a: mine.append(a), on_event=posts.append,
                      on_finished=lambda: finished.append("mine"))
    assert mine == [(2, 2, "all")] and other == [(1, 1, "theirs")]
    assert posts == ["partial"] and finished == ["mine"]


def test_invalidate_drops_posts_and_results_but_still_runs_on_finished(qtbot, worker):
    release, started = threading.Event(), threading.Event()
    got = []

    def fn(state):
        started.set()
        release.wait(5)
        state.post("late post")
        return "late result"

    job = worker.submit("stale", fn, kind="k", on_done=got.append, on_event=got.append,
                        on_finished=lambda: got.append("finished"))
    assert started.wait(5)
    assert worker.invalidate("k") == job.generation + 1 and job.stale and job.superseded
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["finished"]          # no post, no result; the job did end


def test_an_interactive_job_does_not_wait_behind_a_long_one(qtbot, worker):
    """A long job (a stand-in for probe training) runs; an interactive job submitted after it
    finishes while it still runs."""
    release = threading.Event()
    long_started = threading.Event()
    got = []

    def long_job(state):
        long_started.set()
        while not release.is_set():
            state.check()
            release.wait(0.01)
        return "long"

    long = worker.submit("long", long_job, lane=Lane.LONG, on_done=got.append)
    assert long_started.wait(5)
    quick = worker.submit("quick", lambda st: "quick", lane=Lane.INTERACTIVE, on_done=got.append)
    qtbot.waitUntil(lambda: got == ["quick"], timeout=2000)
    assert long.active and quick.finished
    assert [h.name for h in worker.running_jobs()] == ["long"]
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["quick", "long"]


def test_each_lane_is_first_in_first_out(qtbot, worker):
    order = []
    with qtbot.waitSignal(worker.idle, timeout=5000):
        for i in range(5):
            worker.submit(f"i{i}", lambda st, i=i: i, lane=Lane.INTERACTIVE, on_done=order.append)
    assert order == list(range(5))


def _gate(started_events, release):
    """A job that says it started and runs until ``release`` is set."""
    def job(state):
        started_events.set()
        while not release.is_set():
            state.check()
            release.wait(0.01)
        return "front"
    return job


def test_backstage_jobs_wait_for_every_front_job_in_either_lane(qtbot, worker):
    """The window's hidden views are backstage: their jobs start only once no job of the front
    (the shown view, the workspace) is queued, running or still to be delivered, in either
    lane; the front's jobs overtake them, and each group keeps its own order."""
    worker.set_stage({"shown"}, {"hidden"})
    hidden, shown = worker.group("hidden"), worker.group("shown")
    release, started = threading.Event(), threading.Event()
    order = []
    front = shown.submit("front long", _gate(started, release), lane=Lane.LONG,
                         on_done=lambda v: order.append("front long"))
    assert started.wait(5)
    for i in range(2):
        hidden.submit(f"h{i}", lambda st: None, lane=Lane.INTERACTIVE,
                      on_done=lambda v, i=i: order.append(f"h{i}"))
    hidden.submit("h-long", lambda st: None, lane=Lane.LONG,
                  on_done=lambda v: order.append("h-long"))
    shown.submit("f-quick", lambda st: None, lane=Lane.INTERACTIVE,
                 on_done=lambda v: order.append("f-quick"))
    qtbot.waitUntil(lambda: "f-quick" in order, timeout=3000)
    qtbot.wait(200)                        # the interactive lane is free, the front still busy
    assert order == ["f-quick"] and front.active
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert order[:2] == ["f-quick", "front long"]
    assert order.index("h0") < order.index("h1")
    assert sorted(order[2:]) == ["h-long", "h0", "h1"]


def test_a_job_the_fronts_result_starts_goes_before_the_backstage(qtbot, worker):
    """No gap between a front job and the one its result submits: a backstage job queued
    meanwhile still waits (at start-up: the comparison, then the neighbour index)."""
    worker.set_stage({"shown"}, {"hidden"})
    hidden, shown = worker.group("hidden"), worker.group("shown")
    order = []
    release, started = threading.Event(), threading.Event()

    def then(_v):
        order.append("first")
        shown.submit("second", lambda st: None, on_done=lambda v: order.append("second"))

    shown.submit("first", _gate(started, release), on_done=then)
    assert started.wait(5)
    hidden.submit("hidden", lambda st: None, on_done=lambda v: order.append("hidden"))
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert order == ["first", "second", "hidden"]


def test_a_view_brought_to_the_front_starts_its_waiting_jobs_at_once(qtbot, worker):
    worker.set_stage({"shown"}, {"hidden"})
    hidden, shown = worker.group("hidden"), worker.group("shown")
    release, started = threading.Event(), threading.Event()
    got = []
    shown.submit("front long", _gate(started, release), lane=Lane.LONG)
    assert started.wait(5)
    hidden.submit("now shown", lambda st: "ran", lane=Lane.INTERACTIVE, on_done=got.append)
    qtbot.wait(200)
    assert got == []
    worker.set_stage({"hidden"}, {"shown"})        # the user switched tabs
    qtbot.waitUntil(lambda: got == ["ran"], timeout=2000)
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()


def test_a_dialog_in_a_front_jobs_callback_lets_the_backstage_go_on(qtbot, worker):
    """A callback that opens a dialog (a nested event loop: an error, "Recover unsaved
    work?") does not hold the hidden views' jobs back while the dialog is open; and a group
    neither front nor backstage (a download) holds nothing back."""
    from PySide6.QtCore import QEventLoop, QTimer

    worker.set_stage({"shown"}, {"hidden"})
    hidden, shown = worker.group("hidden"), worker.group("shown")
    order = []

    loop = QEventLoop()

    def modal(_v):
        order.append("dialog open")
        QTimer.singleShot(10000, loop.quit)           # (a safety net: the hidden job ends it)
        loop.exec()
        order.append("dialog closed")

    def hidden_done(_v):
        order.append("hidden")
        loop.quit()                                   # the user closes the dialog

    shown.submit("front", lambda st: None, on_done=modal)
    hidden.submit("hidden", lambda st: None, lane=Lane.INTERACTIVE, on_done=hidden_done)
    qtbot.waitUntil(lambda: "dialog closed" in order, timeout=15000)
    assert order == ["dialog open", "hidden", "dialog closed"]
    release, started = threading.Event(), threading.Event()
    worker.group("models").submit("download", _gate(started, release), lane=Lane.LONG)
    assert started.wait(5)
    got = []
    hidden.submit("hidden 2", lambda st: "ran", lane=Lane.INTERACTIVE, on_done=got.append)
    qtbot.waitUntil(lambda: got == ["ran"], timeout=2000)
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()


def test_a_cancelled_backstage_job_ends_at_once(qtbot, worker):
    worker.set_stage({"shown"}, {"hidden"})
    hidden, shown = worker.group("hidden"), worker.group("shown")
    release, started = threading.Event(), threading.Event()
    front = shown.submit("front long", _gate(started, release), lane=Lane.LONG)
    assert started.wait(5)
    waiting = hidden.submit("waiting", lambda st: "ran", lane=Lane.INTERACTIVE)
    hidden.cancel_all()
    qtbot.waitUntil(lambda: waiting.finished, timeout=2000)     # delivered, the front still busy
    assert front.active and not front.finished
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()


def test_the_status_bar_says_cancelled_for_a_cancel_not_for_a_superseded_job(qtbot, worker):
    """A job replaced by a newer request of its kind was not cancelled by the user: the status
    bar stays quiet; the bar's Cancel (and Esc) says "Cancelled"."""
    from PySide6.QtWidgets import QMainWindow

    from elmo_explorer.shell.status_bar import StatusArea

    window = QMainWindow()
    qtbot.addWidget(window)
    status = StatusArea(window.statusBar(), worker, window)
    go = threading.Event()

    def waiting(state):
        while not go.is_set():
            state.check()
            threading.Event().wait(0.002)

    worker.submit("first", waiting, kind="k")
    with qtbot.waitSignal(worker.idle, timeout=5000):
        worker.submit("second", lambda state: None, kind="k")        # supersedes the first
        go.set()
    assert window.statusBar().currentMessage() == ""
    go.clear()
    worker.submit("third", waiting, kind="k")
    qtbot.waitUntil(lambda: status._current is not None, timeout=5000)
    with qtbot.waitSignal(worker.idle, timeout=5000):
        status.cancel_button.click()
    assert window.statusBar().currentMessage() == "Cancelled"


# ---- job groups (one per view) -------------------------------------------------------------------
def held_job(started: threading.Event, release: threading.Event, value):
    def fn(state):
        started.set()
        release.wait(10)
        return value
    return fn


def test_a_groups_idleness_is_derived_from_its_jobs(qtbot, worker):
    group = worker.group("corpus", "Corpus")
    other = worker.group("layers", "Layers")
    changes = []
    group.idle_changed.connect(changes.append)
    started, release = threading.Event(), threading.Event()
    assert group.is_idle()
    job = group.submit("search", held_job(started, release, 1), kind="search")
    assert job.kind == "corpus/search" and job.group == "corpus"
    assert not group.is_idle() and other.is_idle() and group.is_running("search")
    assert changes == [False]
    assert started.wait(5)
    with qtbot.waitSignal(group.idle_changed, timeout=5000):
        release.set()
    assert group.is_idle() and changes == [False, True]


def test_a_superseded_job_leaves_the_group_busy_with_the_newer_one_only(qtbot, worker):
    group = worker.group("lm")
    started, release = threading.Event(), threading.Event()
    results, finished = [], []
    old = group.submit("old", held_job(started, release, "old"), kind="sentence",
                       on_done=results.append, on_finished=lambda: finished.append("old"))
    assert started.wait(5)
    new = group.submit("new", lambda st: "new", kind="sentence", on_done=results.append,
                       on_finished=lambda: finished.append("new"))
    assert old.stale and not group.is_idle()
    with qtbot.waitSignal(group.idle_changed, timeout=5000,
                          check_params_cb=lambda idle: idle):
        release.set()
    qtbot.waitUntil(lambda: len(finished) == 2, timeout=5000)
    assert results == ["new"] and sorted(finished) == ["new", "old"] and new.finished


def test_kinds_are_per_group_and_invalidating_one_group_leaves_the_other(qtbot, worker):
    a, b = worker.group("a"), worker.group("b")
    started_a, started_b, release = threading.Event(), threading.Event(), threading.Event()
    got = []
    ja = a.submit("a", held_job(started_a, release, "a"), kind="run", on_done=got.append)
    jb = b.submit("b", held_job(started_b, release, "b"), kind="run", on_done=got.append,
                  lane=Lane.INTERACTIVE)
    assert ja.kind != jb.kind and not ja.stale and not jb.stale
    with qtbot.waitSignal(a.idle_changed, timeout=5000):
        a.invalidate("run")                  # stale at once: the group is idle
    assert a.is_idle() and not b.is_idle()
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["b"]


def test_cancel_all_of_a_group_cancels_only_its_jobs(qtbot, worker):
    a, b = worker.group("a"), worker.group("b")
    started, release = threading.Event(), threading.Event()
    got = []
    a.submit("a", held_job(started, release, "a"), on_done=got.append)
    b.submit("b", lambda st: "b", on_done=got.append, lane=Lane.INTERACTIVE)
    assert started.wait(5)
    a.cancel_all()
    assert a.is_idle()
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["b"]
    assert worker.pending_by_group() == {}


def test_the_status_bar_names_the_view_of_a_job_and_lists_jobs_by_view(qtbot):
    from PySide6.QtWidgets import QMainWindow

    from elmo_explorer.shell.status_bar import StatusArea

    win = QMainWindow()
    qtbot.addWidget(win)
    worker = Worker(win)
    area = StatusArea(win.statusBar(), worker, win)
    started, release = threading.Event(), threading.Event()
    try:
        def searching(state):
            started.set()
            state.report(1, 2, "reading the index")
            release.wait(10)

        job = worker.group("corpus", "Corpus").submit("searching the corpus for 'bank'",
                                                      searching)
        assert started.wait(5)
        # the progress message keeps the view's name
        qtbot.waitUntil(lambda: area.job_label.text() == "Corpus: reading the index",
                        timeout=5000)
        assert area.job_title(job.id, job.name) == "Corpus: searching the corpus for 'bank'"
        worker.group("layers", "Layers").submit("MDL probes", held_job(threading.Event(),
                                                                       release, 2),
                                                lane=Lane.INTERACTIVE)
        qtbot.waitUntil(lambda: "Layers: MDL probes" in area.job_label.toolTip(), timeout=5000)
        assert "Corpus: searching the corpus for 'bank'" in area.job_label.toolTip()
        with qtbot.waitSignal(worker.idle, timeout=5000):
            release.set()
    finally:
        release.set()
        assert worker.shutdown(timeout_s=10)


def test_on_cancelled_runs_for_a_cancel_not_for_a_supersede_and_a_group_gives_a_default(
        qtbot, worker):
    """Esc (``cancel_all``) ended a job with its ``on_finished`` only: a view that set up for
    the result (a busy button, an index marked as built, a progress line) stayed so.
    ``on_cancelled`` runs for a cancel, before ``on_finished``, not for a newer request of the
    kind; a group's ``on_cancelled`` is every job's unless the job names its own."""
    started, release = threading.Event(), threading.Event()
    got = []
    g = worker.group("v")
    g.on_cancelled = lambda: got.append("group default")
    g.submit("held", held_job(started, release, "x"), kind="k",
             on_cancelled=lambda: got.append("own"), on_finished=lambda: got.append("finished"))
    assert started.wait(5)
    g.submit("newer", lambda st: "y", kind="k", on_done=got.append)    # supersedes the first
    worker.cancel_all()                                                # cancels the newer
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["finished", "group default"] or got == ["group default", "finished"]
    got.clear()
    started.clear()
    release.clear()
    g.submit("held", held_job(started, release, "x"), on_finished=lambda: got.append("finished"),
             on_cancelled=lambda: got.append("own"))
    assert started.wait(5)
    worker.cancel_all()
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["own", "finished"]
    got.clear()                         # the view drops its own jobs (a new model): quietly
    started.clear()
    release.clear()
    g.submit("held", held_job(started, release, "x"), on_finished=lambda: got.append("finished"))
    assert started.wait(5)
    g.cancel_all()
    with qtbot.waitSignal(worker.idle, timeout=5000):
        release.set()
    assert got == ["finished"]
