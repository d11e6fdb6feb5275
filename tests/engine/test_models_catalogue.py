"""The catalogue of published models (elmo_engine/io/catalogue.json), a softmax download in the
published layout, and the transfer progress (bytes, speed, time left)."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_engine.errors import InputError
from elmo_engine.io import catalogue as cat
from elmo_engine.io import model_get, model_store
from elmo_engine.model.checkpoint import load_checkpoint, resolve_checkpoint
from elmo_engine.model.layout import expected_layout
from elmo_engine.model.options import BiLMOptions
from elmo_engine.progress import TransferState, format_bytes, format_duration

from support import FIXTURES
from model_server import ModelServer

BASE = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"
FOLDERS = {"small": "2x1024_128_2048cnn_1xhighway", "medium": "2x2048_256_2048cnn_1xhighway",
           "original": "2x4096_512_2048cnn_2xhighway",
           "original-5.5b": "2x4096_512_2048cnn_2xhighway_5.5B"}
PUBLISHED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


def published_options(folder: str) -> BiLMOptions:
    """The options of a published model, from its folder's name (dim_projection_filters,
    highway layers) and the filters every published ELMo uses."""
    m = re.match(r"2x(\d+)_(\d+)_2048cnn_(\d)xhighway", folder)
    dim, proj, highway = (int(g) for g in m.groups())
    return BiLMOptions.from_json_dict({
        "lstm": {"use_skip_connections": True, "projection_dim": proj, "cell_clip": 3,
                 "proj_clip": 3, "dim": dim, "n_layers": 2},
        "char_cnn": {"activation": "relu", "filters": PUBLISHED_FILTERS, "n_highway": highway,
                     "embedding": {"dim": 16}, "n_characters": 262,
                     "max_characters_per_token": 50}})


def test_the_catalogue_names_the_four_models_at_allennlps_addresses(monkeypatch):
    monkeypatch.delenv(cat.MIRROR_ENV, raising=False)
    c = cat.load_catalogue()
    assert c.names() == ("small", "medium", "original", "original-5.5b")
    assert cat.base_url() == BASE
    for m in c.models:
        folder = FOLDERS[m.name]
        assert m.folder == folder
        assert m.file("options").urls() == (f"{BASE}{folder}/elmo_{folder}_options.json",)
        assert m.file("weights").urls() == (f"{BASE}{folder}/elmo_{folder}_weights.hdf5",)
    orig, big = c.require("original"), c.require("original-5.5b")
    assert c.require("small").softmax is None and c.require("medium").softmax is None
    folder = "2x4096_512_2048cnn_2xhighway"
    assert orig.file("softmax").urls()[0] == f"{BASE}{folder}/elmo_{folder}_softmax_weights.hdf5"
    assert orig.file("vocab").urls() == (BASE + "2x4096_512_2048cnn_2xhighway/vocab-2016-09-10.txt",
                                         BASE + "vocab-2016-09-10.txt")
    assert big.file("softmax").name == "elmo_2x4096_512_2048cnn_2xhighway_5.5B_softmax_weights.hdf5"
    assert big.file("vocab").urls() == (
        BASE + "2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt",)
    monkeypatch.setenv(cat.MIRROR_ENV, "http://127.0.0.1:1/mirror")
    assert orig.file("options").urls()[0].startswith("http://127.0.0.1:1/mirror/2x4096")
    monkeypatch.setenv(cat.MIRROR_ENV, "ftp://x")
    with pytest.raises(InputError, match="not an http"):
        cat.base_url()


@pytest.mark.parametrize("name", list(FOLDERS))
def test_parameter_counts_sizes_and_memory_follow_from_the_architecture(name):
    m = cat.load_catalogue().require(name)
    n = sum(math.prod(s) for s in expected_layout(published_options(m.folder)).values())
    assert m.parameters == n
    assert f"{n / 1e6:.1f}M" in m.label
    weights = m.file("weights").size_bytes
    assert abs(weights - 4 * n) / (4 * n) < 0.002               # float32 + HDF5 overhead
    assert abs(m.memory_bytes - 4 * n) / (4 * n) < 0.002
    if m.softmax is not None:
        v = m.softmax.vocab_size
        proj = published_options(m.folder).projection_dim
        assert abs(m.file("softmax").size_bytes - 4 * v * (proj + 1)) / (4 * v * proj) < 0.002
        assert abs(m.memory_with_softmax_bytes - (4 * n + 2 * v * proj + 4 * v)) < 1e6


def test_a_malformed_catalogue_is_one_clear_error(tmp_path):
    data = json.loads(cat.CATALOGUE_PATH.read_text())
    data["models"][0]["files"][0]["path"] = "../../etc/passwd"
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError, match="c.json: malformed model catalogue.*unsafe file path"):
        cat.load_catalogue(bad)
    with pytest.raises(InputError, match="not a published model; the catalogue has small"):
        cat.load_catalogue().require("large")


def write_softmax(path, vocab_size: int, dim: int) -> None:
    """A softmax file of the published layout: softmax/W (vocab, dim), softmax/b (vocab,)."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as fh:
        fh.create_dataset("softmax/W", data=rng.standard_normal((vocab_size, dim)).astype("f4"))
        fh.create_dataset("softmax/b", data=rng.standard_normal(vocab_size).astype("f4"))


def test_softmax_is_added_to_a_downloaded_model_from_the_alternate_vocab_address(tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path / "data"))
    m = cat.load_catalogue().require("original")
    sm = tmp_path / "sm.hdf5"
    write_softmax(sm, 6, 16)
    vocab = b"<S>\n</S>\n<UNK>\nthe\nbank\nriver\n"
    files = {m.file("options").path: (FIXTURES / "allennlp" / "options.json").read_bytes(),
             m.file("weights").path: (FIXTURES / "allennlp" / "lm_weights.hdf5").read_bytes(),
             m.file("softmax").path: sm.read_bytes(),
             "vocab-2016-09-10.txt": vocab}          # only at the alternate (bilm-tf) address
    with ModelServer(files) as srv:
        monkeypatch.setenv(cat.MIRROR_ENV, srv.url)
        status = model_get.get_model("original")
        assert status.downloaded and not status.has_softmax
        status = model_get.get_model("original", with_softmax=True)
        asked = [r["path"] for r in srv.requests]
    assert status.has_softmax
    assert asked[-2:] == ["2x4096_512_2048cnn_2xhighway/vocab-2016-09-10.txt",
                          "vocab-2016-09-10.txt"]                   # 404, then the alternate
    folder = status.folder
    assert (folder / "vocab-2016-09-10.txt").read_bytes() == vocab
    assert (folder / m.file("softmax").name).read_bytes() == sm.read_bytes()
    records = model_store.read_manifest(folder)
    assert records["vocab-2016-09-10.txt"].url == srv.url + "/vocab-2016-09-10.txt"
    assert len(records) == 4
    # the folder stays an ordinary published-layout checkpoint: the softmax and the manifest
    # are not taken for the weights or the options
    fmt, opts, weights = resolve_checkpoint(folder)
    assert (opts.name, weights.name) == (m.file("options").name, m.file("weights").name)
    assert load_checkpoint(folder).info.weights_bytes == (
        FIXTURES / "allennlp" / "lm_weights.hdf5").stat().st_size
    assert model_store.verify_model("original").ok
    # a softmax file that changed: the model still opens, without its softmax; verify says so
    (folder / "vocab-2016-09-10.txt").write_bytes(vocab + b"extra\n")
    status = model_store.model_status("original")
    assert status.downloaded and not status.has_softmax and status.problem is None
    assert model_store.model_path("original") == folder
    report = model_store.verify_model("original")
    assert not report.ok and [c.name for c in report.checks if not c.ok] == ["vocab-2016-09-10.txt"]
    # getting the softmax again replaces the changed file
    with ModelServer(files) as srv:
        monkeypatch.setenv(cat.MIRROR_ENV, srv.url)
        assert model_get.get_model("original", with_softmax=True).has_softmax
    assert (folder / "vocab-2016-09-10.txt").read_bytes() == vocab


def test_softmax_of_a_model_without_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path))
    with pytest.raises(InputError, match="'small' has no published softmax; only original and "
                                         "original-5.5b"):
        model_get.get_model("small", with_softmax=True)


def test_data_folder_and_the_resolution_of_checkpoint_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path / "d"))
    assert model_store.models_dir() == tmp_path / "d" / "models"
    monkeypatch.delenv("ELMO_EXPLORER_DATA")
    assert model_store.data_dir().name == "elmo-explorer"
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path / "d"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small").mkdir()                          # an existing path wins over a name
    assert model_store.resolve_checkpoint_argument("small") == Path("small")
    assert str(model_store.resolve_checkpoint_argument("elsewhere")) == "elsewhere"
    with pytest.raises(InputError, match="models get medium"):
        model_store.resolve_checkpoint_argument("medium")


def test_transfer_progress_reports_speed_and_time_left():
    now = [100.0]
    reports = []
    state = TransferState(reports.append, clock=lambda: now[0], min_interval_s=0.0,
                          window_s=2.0)
    state.start(10_000, already=4_000, message="w.hdf5")      # resumed: 4,000 already there
    assert reports[-1].speed is None and reports[-1].seconds_left is None
    for _ in range(4):
        now[0] += 0.5
        state.advance(500)
    rep = reports[-1]
    assert rep.done == 6_000 and rep.total == 10_000
    assert rep.speed == pytest.approx(1_000.0)                 # resumed bytes not counted
    assert rep.seconds_left == pytest.approx(4.0)
    for _ in range(4):                                          # slower: the window follows
        now[0] += 1.0
        state.advance(250)
    assert reports[-1].speed == pytest.approx(250.0)
    assert reports[-1].describe() == "7.0 kB of 10.0 kB, 250 B/s, 12 s left"
    state.cancel()
    with pytest.raises(Exception, match="cancelled"):
        state.advance(1)
    assert format_bytes(1_628_200_000) == "1.6 GB" and format_duration(75) == "1 min 15 s"
