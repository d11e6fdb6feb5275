"""Resumable HTTP(S) downloads with the standard library (RFC 9110 §14, range requests).

:func:`fetch` writes a URL into a ``*.part`` file. A part file left by an interrupted run is
continued with ``Range: bytes=N-``; a server that ignores the range (``200`` instead of
``206``) or answers with another start is restarted from byte 0. A connection that drops
before ``Content-Length`` bytes arrived is resumed a few times before giving up (the part file is
kept, so the next run continues it). Proxies come from the environment (``http_proxy``,
``https_proxy``, ``no_proxy``), as ``urllib``'s default opener reads them. Progress, speed, time
left and cancel go through :class:`~elmo_engine.progress.TransferState`.

Every failure is a :class:`DownloadError` with one line naming the address or the file.
"""
from __future__ import annotations

import errno
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

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


def fetch(url: str, part: Path, state: Optional[TransferState] = None, *,
          opener: Optional[urllib.request.OpenerDirector] = None, timeout: float = 30.0,
          retries: int = 4, backoff_s: float = 1.0, max_bytes: int = DEFAULT_MAX_BYTES,
          sleep: Callable[[float], None] = time.sleep) -> int:
    """Download ``url`` into ``part`` (continuing what is there); return its size in bytes.

    ``retries`` dropped connections (or server errors, 5xx, or failed reconnections) are resumed
    (waiting ``backoff_s``, doubling); after that,
    and on any other failure, :class:`DownloadError` is raised and the part file is kept for a
    later resume. A file larger than ``max_bytes`` (announced, or sent without an announced
    size) is refused and its part removed. A cancel (``state.cancel()``) raises
    :class:`~elmo_engine.errors.CancelledError` between two chunks, the part file kept too.
    """
    opener = opener or make_opener()
    part = Path(part)
    part.parent.mkdir(parents=True, exist_ok=True)
    label = part.name[:-5] if part.name.endswith(".part") else part.name
    dropped = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        try:
            resp = _open(opener, url, have, timeout)
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
                part.unlink()
                continue
            if total is not None and total > max_bytes:
                raise DownloadError(f"{url}: the server announces {total} bytes, more than the "
                                    f"{max_bytes} expected for this file; nothing was kept", url)
            _check_room(part, total, have)
            if state is not None:
                state.start(total, have, label)
            have, error = _copy(resp, part, mode, have, state, total, max_bytes)
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


def _open(opener, url: str, have: int, timeout: float):
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT,
                                               "Accept-Encoding": "identity"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    host = urllib.parse.urlsplit(url).netloc or url
    try:
        return opener.open(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code == 416 and have:             # the file's size, when the server says it
            m = re.match(r"bytes\s+\*/(\d+)", e.headers.get("Content-Range", "") or "")
            return int(m.group(1)) if m else -1
        if e.code == 404:
            raise NotFoundError(f"{url}: not found on the server (HTTP 404)", url, 404) from None
        raise DownloadError(f"{url}: the server answered HTTP {e.code} {e.reason}", url,
                            e.code) from None
    except urllib.error.URLError as e:
        raise DownloadError(f"cannot reach {host} ({_reason(e.reason)}); check the network "
                            "connection, or the proxy in http_proxy/https_proxy", url) from None
    except (OSError, ValueError) as e:        # timeouts, resets, malformed addresses
        raise DownloadError(f"cannot reach {host} ({_reason(e)}); check the network "
                            "connection, or the proxy in http_proxy/https_proxy", url) from None


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
          total: Optional[int], max_bytes: int) -> Tuple[int, Optional[str]]:
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
    text = str(getattr(e, "strerror", None) or e) or type(e).__name__
    return text.splitlines()[0][:200]
