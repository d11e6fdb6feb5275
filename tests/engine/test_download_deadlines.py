"""Issue 38 ("hardening, round four"), downloads: each hostile server of the attack pass as a
regression test against a loopback server started here (docs/guide/hardening.md, round four,
"Downloads and index files").

A server that stalls mid-body, one that trickles, one that is fast enough per byte but never
finishes, a reason phrase full of terminal escapes, a 206 answer to a request without
``Range``, a redirect loop, and a manifest that cannot vouch for the weights. Every case ends
with status 1 and one line on stderr that says what to do, installs nothing, and ends within
seconds: the tests use short windows (:class:`~elmo_engine.io.download.Deadlines`), the
defaults are checked to end a stall in under a minute.
"""
from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hardening_helpers import cli

from elmo_engine.cli.main import main
from elmo_engine.io import download, model_get
from elmo_engine.io.catalogue import load_catalogue
from elmo_engine.io.download import Deadlines, DownloadError, server_text

from support import FIXTURES
from model_server import ModelServer, use_data_folder

OPTIONS = (FIXTURES / "allennlp" / "options.json").read_bytes()
WEIGHTS = (FIXTURES / "allennlp" / "lm_weights.hdf5").read_bytes()
SMALL = load_catalogue().require("small")
#: short windows: a stall or a trickle is given up after about a second
QUICK = Deadlines(connect_s=2.0, read_s=0.5, min_rate=1000.0, rate_window_s=1.0, base_s=60.0,
                  deadline_rate=1e9)


@pytest.fixture()
def store(tmp_path, monkeypatch):
    return use_data_folder(tmp_path / "data", monkeypatch)


@pytest.fixture()
def quick(monkeypatch):
    monkeypatch.setattr(download, "DEFAULT_DEADLINES", QUICK)
    return QUICK


class Scripted:
    """A loopback server whose every GET is answered by ``answer(handler, path, range)``; the
    options file is served normally so that the weights are what misbehaves."""

    def __init__(self, answer):
        self.stop = threading.Event()
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                outer.requests.append((path, self.headers.get("Range")))
                try:
                    if path == SMALL.file("options").path:
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(OPTIONS)))
                        self.end_headers()
                        self.wfile.write(OPTIONS)
                    else:
                        answer(self, path, self.headers.get("Range"), outer.stop)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def nothing_installed(store) -> bool:
    return not (store / "models" / "small").exists()


def get_cli(srv, monkeypatch, capsys):
    """``models get small --quiet`` against ``srv``: (status, the one stderr line, seconds)."""
    monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
    t0 = time.monotonic()
    code, err = cli(["models", "get", "small", "--quiet"], capsys)
    return code, err.strip(), time.monotonic() - t0


def says_what_to_do(line: str) -> None:
    assert "ELMO_EXPLORER_MODEL_MIRROR" in line and "--checkpoint FOLDER" in line, line


# ---- time -------------------------------------------------------------------------------------
def stall_after(n: int):
    def answer(h, path, rng, stop):
        h.send_response(200)
        h.send_header("Content-Length", str(len(WEIGHTS)))
        h.end_headers()
        h.wfile.write(WEIGHTS[:n])
        h.wfile.flush()
        stop.wait(30)                                   # then nothing, until the test ends
    return answer


def test_a_server_that_stalls_mid_body_is_given_up_within_the_window(store, quick, monkeypatch,
                                                                      capsys):
    with Scripted(stall_after(100_000)) as srv:
        code, line, took = get_cli(srv, monkeypatch, capsys)
    assert code == 1 and took < 10, (took, line)
    assert "stalled" in line and "bytes/s" in line and SMALL.file("weights").path in line
    assert "is kept: run the command again to resume" in line
    says_what_to_do(line)
    assert nothing_installed(store)


def test_a_server_that_trickles_a_byte_at_a_time_is_given_up(store, quick, monkeypatch, capsys):
    with ModelServer({SMALL.file("options").path: OPTIONS,
                      SMALL.file("weights").path: WEIGHTS}) as srv:
        srv.piece, srv.delay_s = 1, 0.02                # ~50 bytes/s: never a read time-out
        code, line, took = get_cli(srv, monkeypatch, capsys)
    assert code == 1 and took < 10, (took, line)
    assert "less than 1000 bytes/s" in line
    says_what_to_do(line)
    assert nothing_installed(store)


def test_a_file_that_never_finishes_meets_the_overall_deadline(store, monkeypatch, capsys):
    # fast enough for the minimum rate (~200 kB/s), too slow for a deadline of 1 s + size/1 GB/s
    monkeypatch.setattr(download, "DEFAULT_DEADLINES",
                        Deadlines(connect_s=2.0, read_s=1.0, min_rate=1.0, rate_window_s=1.0,
                                  base_s=1.0, deadline_rate=1e9))
    with ModelServer({SMALL.file("options").path: OPTIONS,
                      SMALL.file("weights").path: WEIGHTS}) as srv:
        srv.piece, srv.delay_s = 4096, 0.02
        code, line, took = get_cli(srv, monkeypatch, capsys)
    assert code == 1 and took < 10, (took, line)
    assert "did not arrive within 1 s (the limit for its size)" in line
    says_what_to_do(line)


def test_the_overall_deadline_grows_with_the_size():
    d = Deadlines()
    assert d.overall_s(0) == d.base_s
    assert d.overall_s(1_600_000_000) == pytest.approx(d.base_s + 1_600_000_000 / d.deadline_rate)


def test_the_default_windows_end_a_stall_in_under_a_minute():
    d = download.DEFAULT_DEADLINES
    # a stall: the read waits read_s, the reconnection (1 s later) waits again (its headers:
    # connect_s, its body: read_s), and before the next try (2 s later) the window has no bytes
    wait = max(d.read_s, d.connect_s)
    assert d.rate_window_s <= d.read_s + 1 + wait
    assert d.read_s + 1 + wait + 2 < 60
    assert d.min_rate >= 1000


def test_a_silent_server_is_a_connect_time_out(store, monkeypatch, capsys):
    monkeypatch.setattr(download, "DEFAULT_DEADLINES",
                        Deadlines(connect_s=0.5, read_s=0.5, rate_window_s=1.0))

    def answer(h, path, rng, stop):                     # headers never come
        stop.wait(30)

    with Scripted(answer) as srv:
        code, line, took = get_cli(srv, monkeypatch, capsys)
    assert code == 1 and took < 10, (took, line)
    assert "cannot reach 127.0.0.1" in line and "timed out" in line
    says_what_to_do(line)


# ---- what a server says -----------------------------------------------------------------------
def test_a_reason_phrase_with_escapes_and_60_kB_is_one_clean_short_line(store, monkeypatch,
                                                                         capsys):
    evil = "\x1b[2J\x1b[31mDenied\x1b]0;pwned\x07 \x9b2J\x85\x00\x7f" + "A" * 60_000

    def answer(h, path, rng, stop):
        h.send_response(403, evil)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with Scripted(answer) as srv:
        code, line, _ = get_cli(srv, monkeypatch, capsys)
    assert code == 1
    assert "\x1b" not in line and "\x07" not in line and "\x9b" not in line and "\x7f" not in line
    assert "HTTP 403 Denied" in line and "AAAA…" in line and len(line) < 600
    says_what_to_do(line)


def test_server_text_drops_controls_and_escapes():
    assert server_text("\x1b[1;31mred\x1b[0m \x9b2Jx\x00y\tz\n\nw") == "red xy z w"
    assert server_text("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\") == "link"
    assert server_text("é" * 500) == "é" * 119 + "…"


def test_206_to_a_request_without_range_is_one_clear_line(store, monkeypatch, capsys):
    def answer(h, path, rng, stop):
        body = WEIGHTS[1000:]
        h.send_response(206)
        h.send_header("Content-Range", f"bytes 1000-{len(WEIGHTS) - 1}/{len(WEIGHTS)}")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with Scripted(answer) as srv:
        code, line, _ = get_cli(srv, monkeypatch, capsys)
    assert code == 1
    assert "answered 206 (a part of the file) to a request for the whole file" in line
    assert "No such file" not in line
    says_what_to_do(line)
    assert nothing_installed(store)


def test_a_redirect_loop_is_one_line(store, monkeypatch, capsys):
    def answer(h, path, rng, stop):
        h.send_response(302)
        h.send_header("Location", "/" + path)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with Scripted(answer) as srv:
        code, line, _ = get_cli(srv, monkeypatch, capsys)
    assert code == 1 and "\n" not in line
    assert "redirects in a loop or too many times (HTTP 302)" in line
    says_what_to_do(line)


def test_a_404_says_what_to_do(store, monkeypatch, capsys):
    with ModelServer({}) as srv:
        code, line, _ = get_cli(srv, monkeypatch, capsys)
    assert code == 1 and "HTTP 404" in line
    says_what_to_do(line)


def test_the_api_raises_download_error_with_the_hint(store, monkeypatch):
    with Scripted(stall_after(10)) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        with pytest.raises(DownloadError, match="download them by hand"):
            model_get.get_model("small", deadlines=QUICK, backoff_s=0)


# ---- verify -----------------------------------------------------------------------------------
def installed(store, monkeypatch):
    with ModelServer({SMALL.file("options").path: OPTIONS,
                      SMALL.file("weights").path: WEIGHTS}) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        status = model_get.get_model("small")
    return status.folder / "manifest.json"


def test_verify_fails_when_the_manifest_lacks_the_weights_record(store, monkeypatch, capsys):
    manifest = installed(store, monkeypatch)
    doc = json.loads(manifest.read_text())
    doc["files"] = [f for f in doc["files"] if f["role"] != "weights"]
    manifest.write_text(json.dumps(doc))
    assert main(["models", "verify", "small"]) == 1
    out, err = capsys.readouterr()
    assert f"{SMALL.file('weights').name}: FAILED" in out and ": ok" in out    # options checked
    assert "has no record of" in err and SMALL.file("weights").name in err
    assert len([ln for ln in err.splitlines() if "error:" in ln]) == 1


@pytest.mark.parametrize("size", ["Infinity", "1e400", "-5", "\"12\"", "true"])
def test_a_manifest_with_a_wrong_size_is_one_line(store, monkeypatch, capsys, size):
    manifest = installed(store, monkeypatch)
    text = manifest.read_text()
    doc = json.loads(text)
    weights = next(f for f in doc["files"] if f["role"] == "weights")
    text = text.replace(f'"size": {weights["size"]}', f'"size": {size}')
    manifest.write_text(text)
    code, err = cli(["models", "verify", "small"], capsys)
    assert code == 1 and "manifest.json" in err and "unreadable download manifest" in err


def test_a_deeply_nested_manifest_names_the_file(store, monkeypatch, capsys):
    manifest = installed(store, monkeypatch)
    manifest.write_text("[" * 100_000 + "]" * 100_000)
    code, err = cli(["models", "verify", "small"], capsys)
    assert code == 1 and "manifest.json" in err and "nested too deeply" in err


def test_a_manifest_that_is_a_fifo_is_refused(store, monkeypatch, capsys):
    manifest = installed(store, monkeypatch)
    manifest.unlink()
    os.mkfifo(manifest)
    code, err = cli(["models", "verify", "small"], capsys)
    assert code == 1 and "manifest.json" in err and "FIFO" in err


def test_bytes_sent_again_after_a_reconnection_are_not_progress(tmp_path):
    """A server that ignores ``Range`` and stalls at the same place on every connection sends
    100 kB each time; only the furthest byte reached counts, so the window still sees none."""
    t = [0.0]
    clock = download._Clock("http://x/f", tmp_path / "f.part", Deadlines(rate_window_s=30.0),
                            10 << 20, lambda: t[0])
    clock.progress(100_000)                         # the first connection: 100 kB, then a stall
    t[0] += 21.0                                    # a read time-out, a reconnection:
    clock.progress(0)                               # the same 100 kB again
    clock.progress(100_000)
    t[0] += 21.0                                    # the next reconnection is refused
    with pytest.raises(DownloadError, match="only 0 new bytes arrived in the last 30 s"):
        clock.progress()
