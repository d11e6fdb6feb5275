"""A loopback HTTP server for the download tests: serves files by path from memory.

It honours ``Range: bytes=N-`` (206 with ``Content-Range``) unless told to ignore ranges, and
can misbehave on purpose: drop the connection mid-file (``drop_after``: bytes of body sent
before closing, for the first ``drops`` responses longer than that), send slowly (``delay_s``
between pieces of ``piece`` bytes) or answer 404 for unknown paths. A request with an absolute
URL (``GET http://host/p``) is how a client talks to a proxy: it is served by its path and
counted in ``proxied``.
"""
from __future__ import annotations

import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional

PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
              "no_proxy", "NO_PROXY")


def use_data_folder(folder: Path, monkeypatch) -> Path:
    """``ELMO_EXPLORER_DATA`` = ``folder``, and no proxy from the environment (the loopback server
    is reached directly); return ``folder``."""
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(folder))
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    return folder


class ModelServer:
    def __init__(self, files: Dict[str, bytes]):
        self.files = dict(files)
        self.ignore_range = False
        self.drop_after: Optional[int] = None
        self.drops = 0
        self.delay_s = 0.0
        self.fail_status: Optional[int] = None        # answer this status ``fails`` times
        self.fails = 0
        self.piece = 1 << 16
        self.requests: List[dict] = []
        self.proxied: List[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):          # quiet
                pass

            def do_GET(self):
                server._serve(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "ModelServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        target = h.path
        if target.startswith("http://"):
            self.proxied.append(target)
            target = urllib.parse.urlsplit(target).path
        path = urllib.parse.unquote(target).lstrip("/")
        rng = h.headers.get("Range")
        data = self.files.get(path)
        with self._lock:
            self.requests.append({"path": path, "range": rng})
            failing = self.fail_status is not None and self.fails > 0
            if failing:
                self.fails -= 1
        if failing:
            h.send_response(self.fail_status)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        with self._lock:
            drop = None
            if (self.drop_after is not None and self.drops > 0 and data is not None
                    and len(data) > self.drop_after):
                self.drops -= 1
                drop = self.drop_after
        if data is None:
            body = b"<html>not found</html>"
            h.send_response(404)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        start = 0
        if rng and not self.ignore_range and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            h.send_response(200)
        body = data[start:]
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        limit = len(body) if drop is None else min(drop, len(body))
        sent = 0
        try:
            while sent < limit:
                n = min(self.piece, limit - sent)
                h.wfile.write(body[sent:sent + n])
                h.wfile.flush()
                sent += n
                if self.delay_s:
                    time.sleep(self.delay_s)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if drop is not None:
            h.close_connection = True
