"""Resumable HTTP(S) downloads with the standard library (RFC 9110 §14, range requests).

:func:`fetch` writes a URL into a ``*.part`` file. A part file left by an interrupted run is
continued with ``Range: bytes=N-``; a server that ignores the range (``200`` instead of
``206``) or answers with another start is restarted from byte 0. A connection that drops
before ``Content-Length`` bytes arrived is resumed a few times before giving up (the part file is
kept, so the next run continues it). Proxies come from the environment (``http_proxy``,
``https_proxy``, ``no_proxy``), as ``urllib``'s default opener reads them. Progress, speed, time
left and cancel go through :class:`~elmo_engine.progress.TransferState`.

Every transfer is bounded in time (:class:`Deadlines`): a connection must open within
``connect_s``, no read may wait more than ``read_s``, the bytes that arrive must keep at least
``min_rate`` bytes/s over any ``rate_window_s`` (a server that trickles a byte every few seconds
is given up, not waited on for ever), and the whole file must arrive within an overall deadline
that grows with its size (``base_s`` + size / ``deadline_rate``), reconnections and pauses
included.

Every failure is a :class:`DownloadError` with one line naming the address or the file. What a
server writes (a reason phrase, a header) is shown only through :func:`server_text`: control
characters and terminal escape sequences removed, one line, at most 120 characters.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import time
import unicodedata
from collections import deque
from dataclasses import dataclass
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Deque, Optional, Sequence, Tuple

from elmo_engine.errors import ElmoError
from elmo_engine.progress import TransferState

CHUNK = 1 << 16
#: the largest file :func:`fetch` takes unless told otherwise (the largest published ELMo file,
#: the original model's softmax, is about 1.6 GB)
DEFAULT_MAX_BYTES = 8 << 30
USER_AGENT = "elmo-explorer (model download)"
_DISK_FULL = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded",
              errno.EFBIG: "File too large", errno.EROFS: "Read-only file system"}
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
#: ESC-introduced terminal sequences: CSI (``ESC [ … final``), OSC (``ESC ] … BEL|ESC \``) and
#: the two-character ones
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?"
                      r"|\x9b[0-?]*[ -/]*[@-~]")
#: the longest piece of a server's text shown in an error
SERVER_TEXT_MAX = 120


@dataclass(frozen=True)
class Deadlines:
    """How long a download may take (seconds, bytes/s): see the module's docstring. The defaults
    end a stalled or trickling transfer in well under a minute and give a 1.6 GB file about 9
    hours in all."""

    connect_s: float = 15.0           # opening the connection and receiving the headers
    read_s: float = 15.0              # the longest wait for the next bytes of the body
    min_rate: float = 1000.0          # bytes/s, over any ``rate_window_s``
    rate_window_s: float = 30.0
    base_s: float = 300.0             # the overall deadline: base_s + size / deadline_rate
    deadline_rate: float = 50_000.0   # bytes/s

    def overall_s(self, size: int) -> float:
        """The time allowed for a file of ``size`` bytes."""
        return self.base_s + max(0, size) / self.deadline_rate


def server_text(text: object, limit: int = SERVER_TEXT_MAX) -> str:
    """What a server sent, safe to print: escape sequences and control characters (C0, C1,
    format characters such as bidirectional overrides) removed, whitespace runs made one space,
    cut to ``limit`` characters."""
    raw = _ESCAPES.sub("", str(text))
    kept = "".join(" " if ch.isspace() else ch for ch in raw
                   if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co"))
    one = " ".join(kept.split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


class DownloadError(ElmoError):
    """A download that failed: offline, an HTTP error, a dropped connection, a full disk."""

    def __init__(self, message: str, url: Optional[str] = None, status: Optional[int] = None):
        self.url = url
        self.status = status
        super().__init__(message)


class NotFoundError(DownloadError):
    """The server answered 404 (the caller may try another address)."""


def make_opener() -> urllib.request.OpenerDirector:
    """``urllib``'s default opener: it honours ``http_proxy``/``https_proxy``/``no_proxy``."""
    return urllib.request.build_opener()


def fetch_any(urls: Sequence[str], part: Path, state: Optional[TransferState] = None,
              **kwargs) -> Tuple[str, int]:
    """:func:`fetch` from the first address that exists; returns (address, size)."""
    last: Optional[NotFoundError] = None
    for url in urls:
        try:
            return url, fetch(url, part, state, **kwargs)
        except NotFoundError as e:
            last = e
    assert last is not None
    raise last


#: what :func:`fetch` uses unless given its own (tests put short windows here)
DEFAULT_DEADLINES = Deadlines()


class _Clock:
    """The overall deadline and the minimum rate of one :func:`fetch`, across reconnections:
    ``progress(position)`` after every chunk and before every reconnection raises
    :class:`DownloadError` when the file is late or the last window brought too few new bytes.
    Progress is the furthest byte of the file reached: bytes sent again (a server that restarts
    from byte 0 on every reconnection, then stalls at the same place) are not progress."""

    def __init__(self, url: str, part: Path, limits: Deadlines, size: int,
                 now: Callable[[], float]):
        self.url, self.part, self.limits, self.now = url, part, limits, now
        self.start = now()
        self.allowed = limits.overall_s(size)
        self.furthest = 0                                # the furthest byte of the file reached
        self.samples: Deque[Tuple[float, int]] = deque([(self.start, 0)])

    def sized(self, size: int) -> None:
        """The server announced the size: the deadline follows it (never grows past the first)."""
        self.allowed = min(self.allowed, self.limits.overall_s(size))

    def progress(self, position: Optional[int] = None) -> None:
        t = self.now()
        if position is not None and position > self.furthest:
            self.furthest = position
            self.samples.append((t, position))
        lim = self.limits
        if t - self.start > self.allowed:
            raise DownloadError(
                f"{self.url}: the file did not arrive within {self.allowed:.0f} s (the limit "
                f"for its size){self._kept()}", self.url)
        cut = t - lim.rate_window_s
        while len(self.samples) > 1 and self.samples[1][0] <= cut:
            self.samples.popleft()
        t0, n0 = self.samples[0]
        if t0 <= cut and self.furthest - n0 < lim.min_rate * lim.rate_window_s:
            raise DownloadError(
                f"{self.url}: only {self.furthest - n0} new bytes arrived in the last "
                f"{lim.rate_window_s:.0f} s (less than {lim.min_rate:.0f} bytes/s): the server "
                f"or the connection is stalled{self._kept()}", self.url)

    def _kept(self) -> str:
        return (f"; the partial file {self.part} is kept: run the command again to resume"
                if self.part.exists() and self.part.stat().st_size else "")


def fetch(url: str, part: Path, state: Optional[TransferState] = None, *,
          opener: Optional[urllib.request.OpenerDirector] = None,
          deadlines: Optional[Deadlines] = None, retries: int = 4, backoff_s: float = 1.0,
          max_bytes: int = DEFAULT_MAX_BYTES, sleep: Callable[[float], None] = time.sleep,
          now: Callable[[], float] = time.monotonic) -> int:
    """Download ``url`` into ``part`` (continuing what is there); return its size in bytes.

    ``retries`` dropped connections (or server errors, 5xx, or failed reconnections) are resumed
    (waiting ``backoff_s``, doubling); after that,
    and on any other failure, :class:`DownloadError` is raised and the part file is kept for a
    later resume. ``deadlines`` (default :data:`DEFAULT_DEADLINES`) bound the time: connect and
    read time-outs, a minimum rate over a window and an overall deadline for the file, the
    reconnections included. A file larger than ``max_bytes`` (announced, or sent without an
    announced size) is refused and its part removed. A cancel (``state.cancel()``) raises
    :class:`~elmo_engine.errors.CancelledError` between two chunks, the part file kept too.
    """
    opener = opener or make_opener()
    limits = deadlines or DEFAULT_DEADLINES
    part = Path(part)
    part.parent.mkdir(parents=True, exist_ok=True)
    label = part.name[:-5] if part.name.endswith(".part") else part.name
    clock = _Clock(url, part, limits, max_bytes, now)
    dropped = 0
    while True:
        clock.progress()
        have = part.stat().st_size if part.exists() else 0
        try:
            resp = _open(opener, url, have, limits)
        except NotFoundError:
            raise
        except DownloadError as e:
            # transient: a server error (5xx), or no answer after the connection had worked
            if not ((e.status or 0) >= 500 or (e.status is None and dropped)):
                raise
            dropped += 1
            if dropped > retries:
                kept = (f"; the partial file {part} is kept for a later resume"
                        if part.exists() else "")
                raise DownloadError(f"{e} ({dropped} tries{kept})", url, e.status) from None
            sleep(backoff_s * (2 ** (dropped - 1)))
            continue
        if isinstance(resp, int):              # 416: nothing after byte ``have``
            if resp == have:                   # the part is already the whole file
                return have
            part.unlink()                      # longer than the file, or unknown: start again
            continue
        with resp:
            total, have, mode = _plan(resp, url, have)
            if have < 0:
                part.unlink(missing_ok=True)
                continue
            if total is not None and total > max_bytes:
                raise DownloadError(f"{url}: the server announces {total} bytes, more than the "
                                    f"{max_bytes} expected for this file; nothing was kept", url)
            if total is not None:
                clock.sized(total)
            _check_room(part, total, have)
            if state is not None:
                state.start(total, have, label)
            _read_timeout(resp, limits.read_s)
            have, error = _copy(resp, part, mode, have, state, total, max_bytes, clock)
        if have > max_bytes:
            part.unlink()
            raise DownloadError(f"{url}: the server sent more than the {max_bytes} bytes "
                                "expected for this file; the partial file was removed", url)
        if total is not None and have > total:
            part.unlink()
            raise DownloadError(f"{url}: the server sent more bytes than it announced "
                                f"({have} > {total}); the partial file was removed", url)
        if error is None and (total is None or have == total):
            if state is not None:
                state.finish()
            return have
        dropped += 1
        if dropped > retries:
            raise DownloadError(
                f"{url}: the connection dropped at {have} of "
                f"{'?' if total is None else total} bytes ({error or 'closed early'}) "
                f"{dropped} times; run the command again to resume (the partial file "
                f"{part} is kept)", url)
        sleep(backoff_s * (2 ** (dropped - 1)))


def _read_timeout(resp, seconds: float) -> None:
    """The body's reads wait at most ``seconds`` (the connection was opened, and its headers
    read, under the connect time-out). ``http.client`` keeps the socket behind its file object;
    where it is not there the connect time-out stays."""
    sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.settimeout(seconds)


def _open(opener, url: str, have: int, limits: Deadlines):
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT,
                                               "Accept-Encoding": "identity"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    host = server_text(urllib.parse.urlsplit(url).netloc or url)
    try:
        return opener.open(req, timeout=limits.connect_s)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code == 416 and have:             # the file's size, when the server says it
            m = re.match(r"bytes\s+\*/(\d+)", e.headers.get("Content-Range", "") or "")
            return int(m.group(1)) if m else -1
        if e.code == 404:
            raise NotFoundError(f"{url}: not found on the server (HTTP 404)", url, 404) from None
        if 300 <= e.code < 400:                # urllib gave up following redirections
            raise DownloadError(f"{url}: the server redirects in a loop or too many times "
                                f"(HTTP {e.code})", url, e.code) from None
        reason = server_text(e.reason)
        raise DownloadError(f"{url}: the server answered HTTP {e.code}"
                            + (f" {reason}" if reason else ""), url, e.code) from None
    except urllib.error.URLError as e:
        raise DownloadError(f"cannot reach {host} ({_reason(e.reason)}); check the network "
                            "connection, or the proxy in http_proxy/https_proxy", url) from None
    except (OSError, ValueError) as e:        # timeouts, resets, malformed addresses
        raise DownloadError(f"cannot reach {host} ({_reason(e)}); check the network "
                            "connection, or the proxy in http_proxy/https_proxy", url) from None
    except Exception as e:                      # http.client's BadStatusLine, LineTooLong, …
        if type(e).__module__ != "http.client":
            raise
        raise DownloadError(f"{url}: the server's answer is not valid HTTP ({_reason(e)})",
                            url) from None


def _plan(resp, url: str, have: int) -> Tuple[Optional[int], int, str]:
    """(total size, bytes kept, file mode) from the response's status and headers."""
    length = resp.headers.get("Content-Length")
    length = int(length) if length is not None and length.strip().isdigit() else None
    if have and resp.status == 206:
        m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        if m and int(m.group(1)) == have:
            total = None if m.group(3) == "*" else int(m.group(3))
            return total, have, "ab"
    if resp.status not in (200, 206):
        raise DownloadError(f"{url}: unexpected HTTP status {resp.status}", url, resp.status)
    if resp.status == 206 and not have:
        raise DownloadError(f"{url}: the server answered 206 (a part of the file) to a request "
                            "for the whole file; it does not serve this file correctly", url, 206)
    if resp.status == 206:                     # a range we did not ask for: start again
        return None, -1, ""
    return length, 0, "wb"                      # 200: the server ignored the range


def _check_room(part: Path, total: Optional[int], have: int) -> None:
    if total is None:
        return
    try:
        st = os.statvfs(part.parent)
        free = st.f_bavail * st.f_frsize
    except (OSError, AttributeError):
        return
    need = total - have
    if need > free:
        raise DownloadError(f"cannot write {part}: {need} more bytes are needed and only {free} "
                            "are free on its disk; free some space and run the command again "
                            "(it resumes)")


def _copy(resp, part: Path, mode: str, have: int, state: Optional[TransferState],
          total: Optional[int], max_bytes: int, clock: _Clock) -> Tuple[int, Optional[str]]:
    """Append the body to ``part``; (bytes now in the file, why it stopped early or None)."""
    error = None
    try:
        with open(part, mode) as fh:
            try:
                while (total is None or have < total) and have <= max_bytes:
                    chunk = resp.read1(CHUNK)
                    if not chunk:
                        break
                    _write(fh, chunk)
                    have += len(chunk)
                    clock.progress(have)               # raises when late or too slow
                    if state is not None:
                        state.advance(len(chunk))      # raises CancelledError after cancel()
            except (ConnectionError, socket.timeout, TimeoutError) as e:
                error = _reason(e)
            except OSError as e:
                if e.errno in _DISK_FULL:
                    raise
                error = _reason(e)
            except Exception as e:              # http.client.IncompleteRead and kin
                if type(e).__module__ != "http.client":
                    raise
                error = _reason(e)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        if e.errno in _DISK_FULL:
            raise DownloadError(f"cannot write {part}: {_DISK_FULL[e.errno]} ({have} of "
                                f"{'?' if total is None else total} bytes downloaded, kept "
                                "for a resume); free some space and run the command "
                                "again") from None
        raise
    return have, error


def _write(fh, chunk: bytes) -> None:
    view = memoryview(chunk)
    while len(view):
        n = fh.write(view)
        view = view[n or 0:]


def _reason(e) -> str:
    return server_text(getattr(e, "strerror", None) or e) or type(e).__name__
