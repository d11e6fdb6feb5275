"""``elmo-explorer models get`` against a loopback server (docs/guide/models.md): the vendored
AllenNLP test checkpoint served under the catalogue's file names for ``small``; resume after a
dropped connection, a server that ignores ``Range``, 404, offline, a wrong or truncated file,
a full disk, cancel on a slow server, proxies from the environment, and ``embed --checkpoint
small`` equal to embedding the files directly."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import subprocess
import sys

import h5py
import numpy as np
import pytest

from elmo_engine.cli.main import main
from elmo_engine.errors import CancelledError, CheckpointError, InputError
from elmo_engine.io import download, model_get, model_store
from elmo_engine.io.catalogue import load_catalogue
from elmo_engine.io.download import DownloadError
from elmo_engine.progress import TransferState, format_bytes

from support import FIXTURES
from model_server import ModelServer, use_data_folder

OPTIONS = (FIXTURES / "allennlp" / "options.json").read_bytes()
WEIGHTS = (FIXTURES / "allennlp" / "lm_weights.hdf5").read_bytes()


def served(name: str = "small", weights: bytes = WEIGHTS) -> dict:
    m = load_catalogue().require(name)
    return {m.file("options").path: OPTIONS, m.file("weights").path: weights}


@pytest.fixture()
def store(tmp_path, monkeypatch):
    return use_data_folder(tmp_path / "data", monkeypatch)


@pytest.fixture()
def server(store, monkeypatch):
    with ModelServer(served()) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        yield srv


def nothing_installed(store, name="small"):
    return not (store / "models" / name).exists()


def test_get_small_then_embed_equals_the_files_loaded_directly(server, store, tmp_path, capsys):
    assert main(["models", "get", "small", "--quiet"]) == 0
    folder = store / "models" / "small"
    assert capsys.readouterr().out.strip() == str(folder)
    m = load_catalogue().require("small")
    assert (folder / m.file("weights").name).read_bytes() == WEIGHTS
    manifest = json.loads((folder / "manifest.json").read_text())
    recorded = {f["name"]: f for f in manifest["files"]}
    assert recorded[m.file("weights").name]["sha256"] == hashlib.sha256(WEIGHTS).hexdigest()
    assert recorded[m.file("options").name]["size"] == len(OPTIONS)
    assert not (store / "models" / ".incoming").exists()
    text = tmp_path / "in.txt"
    text.write_text("The bank raised rates .\nShe sat on the river bank .\n", encoding="utf-8")
    by_name, direct = tmp_path / "by_name.hdf5", tmp_path / "direct.hdf5"
    assert main(["embed", str(text), "-o", str(by_name), "--checkpoint", "small"]) == 0
    assert main(["embed", str(text), "-o", str(direct), "--checkpoint",
                 str(FIXTURES / "allennlp")]) == 0
    with h5py.File(by_name, "r") as a, h5py.File(direct, "r") as b:
        assert sorted(a) == sorted(b) and len(a) == 3
        for key in ("0", "1"):
            assert a[key].shape == b[key].shape == (3, 5 if key == "0" else 7, 32)
            np.testing.assert_array_equal(a[key][()], b[key][()])
    assert main(["models", "path", "small"]) == 0
    assert capsys.readouterr().out.strip() == str(folder)
    assert main(["models", "get", "small", "--quiet"]) == 0        # already there: no request
    assert len(server.requests) == 2


def test_dropped_connection_resumes_to_the_same_bytes(server, store):
    server.drop_after, server.drops = 100_000, 2
    status = model_get.get_model("small", backoff_s=0)
    assert status.downloaded
    weights_path = load_catalogue().require("small").file("weights").path
    ranges = [r["range"] for r in server.requests if r["path"] == weights_path]
    assert ranges == [None, "bytes=100000-", "bytes=200000-"]
    installed = status.folder / weights_path.rsplit("/", 1)[1]
    assert installed.read_bytes() == WEIGHTS                   # byte for byte


def test_interrupted_run_keeps_the_part_and_the_next_run_resumes(server, store, tmp_path,
                                                                 monkeypatch, capsys):
    server.drop_after, server.drops = 150_000, 100
    with pytest.raises(DownloadError, match="run the command again to resume"):
        model_get.get_model("small", retries=1, backoff_s=0)
    assert nothing_installed(store)
    m = load_catalogue().require("small")
    part = store / "models" / ".incoming" / "small" / (m.file("weights").name + ".part")
    assert part.stat().st_size == 300_000                       # two pieces of 150,000
    assert main(["models", "list"]) == 0
    assert f"partial ({format_bytes(300_000 + len(OPTIONS))})" in capsys.readouterr().out
    server.drops = 0
    server.requests.clear()
    model_get.get_model("small", backoff_s=0)
    assert [r["range"] for r in server.requests] == ["bytes=300000-"]
    resumed = (store / "models" / "small" / m.file("weights").name).read_bytes()
    # an uninterrupted download into another data folder: the same bytes and the same record
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path / "other"))
    model_get.get_model("small")
    whole = (tmp_path / "other" / "models" / "small" / m.file("weights").name).read_bytes()
    assert resumed == whole == WEIGHTS


def test_a_server_that_ignores_range_restarts_from_zero(server, store):
    server.ignore_range = True
    server.drop_after, server.drops = 120_000, 1
    status = model_get.get_model("small", backoff_s=0)
    weights = status.folder / load_catalogue().require("small").file("weights").name
    assert weights.read_bytes() == WEIGHTS
    assert [r["range"] for r in server.requests][-1] == "bytes=120000-"   # asked, got 200


def test_404_is_one_line_and_installs_nothing(store, monkeypatch, capsys):
    with ModelServer({}) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url + "/elmo/")
        assert main(["models", "get", "small", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HTTP 404" in err[0] and srv.url + "/elmo/2x1024" in err[0]
    assert not (store / "models").exists() or not any((store / "models").rglob("*"))


def test_offline_is_one_line(store, monkeypatch, capsys):
    with socket.socket() as s:                  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", f"http://127.0.0.1:{port}")
    assert main(["models", "get", "small", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot reach 127.0.0.1:{port}" in err[0]
    assert nothing_installed(store)


def test_a_wrong_file_is_refused_and_removed(store, monkeypatch, capsys):
    with ModelServer(served(weights=b"<html>Access denied</html>" * 10)) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        assert main(["models", "get", "small", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "not an HDF5 file" in err and "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5" in err
    assert nothing_installed(store)
    stage = store / "models" / ".incoming" / "small"
    assert not any(p.name.endswith("weights.hdf5") for p in stage.glob("*"))


def test_a_truncated_file_is_refused(store, monkeypatch):
    with ModelServer(served(weights=WEIGHTS[:200_000])) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        with pytest.raises(CheckpointError, match="elmo_2x1024_128_2048cnn_1xhighway_weights"):
            model_get.get_model("small")
    assert nothing_installed(store)


def test_a_full_disk_is_one_line_and_installs_nothing(server, store, monkeypatch, capsys):
    real = download._write
    written = [0]

    def write(fh, chunk):
        if written[0] > 100_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        written[0] += len(chunk)
        real(fh, chunk)

    monkeypatch.setattr(download, "_write", write)
    assert main(["models", "get", "small", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and ".part" in err[0]
    assert nothing_installed(store)


def test_cancel_on_a_slow_server_stops_and_keeps_the_part(server, store):
    server.delay_s, server.piece = 0.01, 4096
    reports = []

    def on_transfer(rep):
        reports.append(rep)
        if rep.done > 60_000:
            state.cancel()

    state = TransferState(on_transfer=on_transfer, min_interval_s=0.0, window_s=1.0)
    with pytest.raises(CancelledError):
        model_get.get_model("small", state=state)
    assert nothing_installed(store)
    weights = [r for r in reports if r.message.endswith("weights.hdf5")]
    assert weights and weights[0].total == len(WEIGHTS)
    assert any(r.speed and r.seconds_left is not None for r in weights)
    assert max(r.done for r in weights) < len(WEIGHTS) // 2


def test_verify_catches_a_corrupted_byte_and_open_checks_the_size(server, store, tmp_path,
                                                                   capsys):
    status = model_get.get_model("small")
    assert main(["models", "verify", "small"]) == 0
    assert capsys.readouterr().out.count(": ok") == 2
    weights = status.folder / load_catalogue().require("small").file("weights").name
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    assert main(["models", "verify"]) == 1
    out, err = capsys.readouterr()
    assert "weights.hdf5: FAILED" in out and "SHA-256" in err and "recorded at download" in err
    weights.write_bytes(bytes(data[:-1]))                       # a size change: seen on open
    text = tmp_path / "t.txt"
    text.write_text("a line\n", encoding="utf-8")
    assert main(["embed", str(text), "-o", str(tmp_path / "o.hdf5"), "--checkpoint", "small"]) == 1
    err = capsys.readouterr().err
    assert f"has {len(WEIGHTS) - 1} bytes, {len(WEIGHTS)} at download" in err
    assert not (tmp_path / "o.hdf5").exists()


def test_proxy_from_the_environment_is_used(store, monkeypatch):
    with ModelServer(served()) as proxy:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", "http://elmo-mirror.invalid")
        monkeypatch.setenv("http_proxy", proxy.url)
        status = model_get.get_model("small")
    assert status.downloaded
    assert proxy.proxied and all(u.startswith("http://elmo-mirror.invalid/2x1024")
                                 for u in proxy.proxied)


def test_a_known_name_not_downloaded_says_what_to_run(store, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("a line\n", encoding="utf-8")
    assert main(["info", "--checkpoint", "medium"]) == 1
    assert "run `elmo-explorer models get medium`" in capsys.readouterr().err
    assert main(["embed", str(text), "-o", str(tmp_path / "o.hdf5"), "--checkpoint", "medium"]) == 1
    assert "elmo-explorer models get medium" in capsys.readouterr().err


def test_list_json_and_remove(server, store, capsys):
    model_get.get_model("small")
    assert main(["models", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["folder"] == str(store / "models") and listing["free_bytes"] > 0
    small = next(m for m in listing["models"] if m["name"] == "small")
    assert small["downloaded"] and small["bytes_on_disk"] > len(WEIGHTS)
    assert not next(m for m in listing["models"] if m["name"] == "medium")["downloaded"]
    assert main(["models", "remove", "small"]) == 0
    assert "removed small" in capsys.readouterr().out
    assert nothing_installed(store)
    assert main(["models", "remove", "small"]) == 1
    assert main(["models", "remove", "../small"]) == 1


def test_a_part_that_is_already_whole_is_not_fetched_again(server, store):
    m = load_catalogue().require("small")
    stage = store / "models" / ".incoming" / "small"
    stage.mkdir(parents=True)
    (stage / (m.file("weights").name + ".part")).write_bytes(WEIGHTS)   # killed before rename
    status = model_get.get_model("small")
    assert (status.folder / m.file("weights").name).read_bytes() == WEIGHTS
    weights = [r for r in server.requests if r["path"] == m.file("weights").path]
    assert [r["range"] for r in weights] == [f"bytes={len(WEIGHTS)}-"]     # answered 416


def test_one_download_of_a_model_at_a_time(server, store):
    fcntl = pytest.importorskip("fcntl")
    lock = store / "models" / ".incoming" / "small.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        with pytest.raises(InputError, match="another download of 'small' is running"):
            model_get.get_model("small")
    assert nothing_installed(store) and server.requests == []
    assert model_get.get_model("small").downloaded


def test_the_command_as_a_program_survives_a_dropped_connection(server, store, tmp_path):
    """The issue's check: ``ELMO_EXPLORER_MODEL_MIRROR=… ELMO_EXPLORER_DATA=… elmo-explorer
    models get small`` against a server that drops the connection once."""
    server.drop_after, server.drops = 200_000, 1
    server.delay_s, server.piece = 0.01, 32_768          # slow enough to measure a speed
    env = {**os.environ, "ELMO_EXPLORER_MODEL_MIRROR": server.url,
           "ELMO_EXPLORER_DATA": str(store)}
    r = subprocess.run([sys.executable, "-m", "elmo_explorer.entry", "models", "get", "small"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(store / "models" / "small")
    assert re.search(r"_weights\.hdf5: [\d.]+ k?B of 450\.9 kB, [\d.]+ [kM]?B/s, \d+ s left",
                     r.stderr), r.stderr
    assert "small: downloaded in" in r.stderr
    m = load_catalogue().require("small")
    assert (store / "models" / "small" / m.file("weights").name).read_bytes() == WEIGHTS


def test_a_file_much_larger_than_the_catalogue_says_is_refused(store, monkeypatch):
    m = load_catalogue().require("small")
    huge = b"x" * (model_get.max_download_bytes(m.file("options")) + 1)
    with ModelServer({m.file("options").path: huge, m.file("weights").path: WEIGHTS}) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        with pytest.raises(DownloadError, match=f"announces {len(huge)} bytes, more than"):
            model_get.get_model("small")
    assert nothing_installed(store)
    assert not list((store / "models").rglob("*.part"))


def test_an_error_page_served_as_options_is_refused(store, monkeypatch, capsys):
    m = load_catalogue().require("small")
    with ModelServer({m.file("options").path: b"<html>Access denied</html>",
                      m.file("weights").path: WEIGHTS}) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        assert main(["models", "get", "small", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "options.json: options file is not valid JSON" in err[0]
    assert f"downloaded from {srv.url}/2x1024" in err[0] and "it was removed" in err[0]
    assert nothing_installed(store) and not list((store / "models").rglob("*options.json"))


def test_server_errors_are_retried_then_reported(server, store):
    server.fail_status, server.fails = 503, 2               # S3's "slow down", twice
    assert model_get.get_model("small", backoff_s=0).downloaded
    assert [r["range"] for r in server.requests[:3]] == [None, None, None]
    server.fails = 100
    model_store.remove_model("small")
    with pytest.raises(DownloadError, match=r"HTTP 503 .*\(5 tries\)"):
        model_get.get_model("small", backoff_s=0)
    assert nothing_installed(store)
