"""Loading, validation and saving of checkpoints (docs/checkpoint-format.md §2, §3)."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import torch

from elmo_engine.model.checkpoint import (expected_layout, load_checkpoint, resolve_checkpoint,
                                          save_native, save_published)
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import CheckpointError

from support import FIXTURES

SENTS = [["The", "bank", "was", "closed", "."], ["Rivers", "flow"]]


@pytest.fixture()
def ckpt(tmp_path):
    src = FIXTURES / "allennlp"
    d = tmp_path / "ckpt"
    d.mkdir()
    shutil.copy(src / "options.json", d / "options.json")
    shutil.copy(src / "lm_weights.hdf5", d / "lm_weights.hdf5")
    return d


def test_both_fixtures_load_with_the_published_counts():
    for sub in ["allennlp", "bilm-tf/model"]:
        m = load_checkpoint(FIXTURES / sub)
        assert m.info.parameter_counts["total"] == 105_120
        assert len(expected_layout(m.opts)) == 33
    assert load_checkpoint(FIXTURES / "allennlp").opts.use_skip_connections is True
    assert load_checkpoint(FIXTURES / "bilm-tf" / "model").opts.use_skip_connections is False


def test_directory_or_either_file_opens(ckpt):
    a = resolve_checkpoint(ckpt)
    b = resolve_checkpoint(ckpt / "options.json")
    c = resolve_checkpoint(ckpt / "lm_weights.hdf5")
    assert a == b == c == ("published", ckpt / "options.json", ckpt / "lm_weights.hdf5")


def _err(path):
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    return e.value


def test_missing_dataset_names_file_and_dataset(ckpt):
    with h5py.File(ckpt / "lm_weights.hdf5", "a") as fh:
        del fh["CNN_high_1/W_carry"]
    e = _err(ckpt)
    assert e.dataset == "CNN_high_1/W_carry" and "lm_weights.hdf5" in str(e)
    assert "missing" in str(e) and e.expected == "shape (124, 124)"


def test_wrong_shape(ckpt):
    with h5py.File(ckpt / "lm_weights.hdf5", "a") as fh:
        del fh["CNN/b_cnn_2"]
        fh["CNN/b_cnn_2"] = np.zeros(17, np.float32)
    e = _err(ckpt)
    assert e.dataset == "CNN/b_cnn_2" and e.expected == (16,) and e.found == (17,)


def test_non_finite_weight(ckpt):
    with h5py.File(ckpt / "lm_weights.hdf5", "a") as fh:
        w = fh["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"]
        arr = w[()]
        arr[3, 4] = np.nan
        w[...] = arr
    e = _err(ckpt)
    assert "non-finite" in str(e) and e.dataset.endswith("Cell1/LSTMCell/W_P_0")


@pytest.mark.parametrize("change,dataset", [
    (lambda o: o["lstm"].update(projection_dim=32), "CNN_proj/W_proj"),
    (lambda o: o["char_cnn"].update(n_highway=1), "CNN_high_1/W_carry"),
    (lambda o: o["lstm"].update(n_layers=3), "RNN_0/RNN/MultiRNNCell/Cell2/LSTMCell/W_0"),
])
def test_options_that_do_not_match_the_weights(ckpt, change, dataset):
    opts = json.loads((ckpt / "options.json").read_text())
    change(opts)
    (ckpt / "options.json").write_text(json.dumps(opts))
    e = _err(ckpt)
    assert e.dataset == dataset, str(e)
    assert "options" in str(e)


def test_truncated_and_non_hdf5_files(ckpt):
    w = ckpt / "lm_weights.hdf5"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 3])
    e = _err(ckpt)
    assert "lm_weights.hdf5" in str(e) and ("truncated" in str(e) or "corrupt" in str(e))
    w.write_bytes(b"PK\x03\x04 this is a zip, not hdf5" * 10)
    e = _err(ckpt)
    assert "not an HDF5 file" in str(e)


@pytest.mark.parametrize("text,needle", [
    ("{", "not valid JSON"), ("[]", "JSON object"), ('{"char_cnn": {}}', "lstm"),
    ('{"lstm": {"dim": 4}, "char_cnn": {"filters": [[1, -4]], "embedding": {"dim": 4}}}',
     "filters[0]"),
])
def test_bad_options(ckpt, text, needle):
    (ckpt / "options.json").write_text(text)
    assert needle in str(_err(ckpt))


def test_missing_files(tmp_path):
    assert "no such file" in str(_err(tmp_path / "nope"))
    (tmp_path / "options.json").write_text("{}")
    assert "weights" in str(_err(tmp_path))


def test_published_and_native_round_trip(ckpt, tmp_path):
    model = load_checkpoint(ckpt)
    ref = Embedder(model).embed(SENTS)
    save_published(model, tmp_path / "pub")
    save_native(model, tmp_path / "nat")
    for path in [tmp_path / "pub", tmp_path / "nat", tmp_path / "nat" / "bilm.safetensors"]:
        again = load_checkpoint(path)
        for a, b in zip(ref, Embedder(again).embed(SENTS)):
            np.testing.assert_array_equal(a, b)
    with h5py.File(tmp_path / "pub" / "lm_weights.hdf5", "r") as fh, \
            h5py.File(ckpt / "lm_weights.hdf5", "r") as orig:
        for name in expected_layout(model.opts):
            np.testing.assert_array_equal(fh[name][()], orig[name][()])
    assert not list((tmp_path / "pub").glob("*.part"))


def test_native_weights_are_not_pickle(ckpt, tmp_path):
    import pickle

    model = load_checkpoint(ckpt)
    save_native(model, tmp_path / "nat")
    (tmp_path / "nat" / "bilm.safetensors").write_bytes(pickle.dumps({"x": 1}))
    e = _err(tmp_path / "nat")
    assert "safetensors" in str(e)


def test_bilm_tf_without_projection_group(tmp_path):
    """N == P: no CNN_proj group (bilm-tf skips it)."""
    from elmo_engine.model.bilm import BiLM
    from elmo_engine.model.options import BiLMOptions

    opts = BiLMOptions(filters=((1, 8), (2, 8)), char_embed_dim=4, n_highway=1,
                       projection_dim=16, lstm_dim=32, n_layers=2)
    model = BiLM(opts)
    torch.manual_seed(0)
    for p in model.parameters():
        p.data.normal_(0, 0.3)
    save_published(model, tmp_path / "m")
    with h5py.File(tmp_path / "m" / "lm_weights.hdf5", "r") as fh:
        assert "CNN_proj" not in fh
    loaded = load_checkpoint(tmp_path / "m")
    out = Embedder(loaded).embed([["a", "b", "c"]])[0]
    assert out.shape == (3, 3, 32) and np.isfinite(out).all()


def test_info_from_the_headers_equals_the_loaded_models_without_torch():
    """``elmo-explorer info`` reads the headers only (issue 39: it answers in well under a
    second); its parameter counts and checksum are the loaded model's, for both formats."""
    import subprocess
    import sys

    from elmo_engine.model.header import read_checkpoint_info
    from elmo_engine.resources import demo_checkpoint_path

    for ckpt in (FIXTURES / "allennlp", demo_checkpoint_path()):
        info = read_checkpoint_info(ckpt)
        loaded = load_checkpoint(ckpt).info
        assert info.describe() == loaded.describe()
        assert info.parameter_counts["total"] == sum(
            v for k, v in info.parameter_counts.items() if k != "total") > 0
    code = ("import sys; from elmo_engine.cli.main import main; main(['info', '--json']); "
            "assert 'torch' not in sys.modules, 'info imported torch'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_all_finite_sees_every_kind_of_non_finite_value(bad):
    from elmo_engine.model.layout import all_finite

    t = torch.randn(64, 33)
    assert all_finite(t) and all_finite(torch.empty(0, 4))
    t[17, 5] = bad
    assert not all_finite(t)
    t[17, 5] = 3.0e38                       # finite, however large
    assert all_finite(t)


def test_the_checksum_is_the_files_sha256_computed_beside_the_load(ckpt):
    """The checksum is computed in a second thread while the weights are read: it is the
    SHA-256 of options.json then the weights, and a load that fails stops it."""
    import hashlib
    import threading

    model = load_checkpoint(ckpt)
    digest = hashlib.sha256((ckpt / "options.json").read_bytes()
                            + (ckpt / "lm_weights.hdf5").read_bytes()).hexdigest()
    assert model.info.checksum == digest
    with h5py.File(ckpt / "lm_weights.hdf5", "a") as fh:
        del fh["CNN/b_cnn_2"]
        fh["CNN/b_cnn_2"] = np.zeros(17, np.float32)
    _err(ckpt)
    assert not [t for t in threading.enumerate() if t.name.startswith("checkpoint-checksum")]


def test_loading_packs_no_weights_and_keeps_the_fast_path(ckpt):
    """The load's finiteness check runs plain GEMMs: packed copies made there would be thrown
    away by a change of precision (and cost 0.2 s of a full-size model's load)."""
    from elmo_engine.model.cpu_fast import FastPath

    model = load_checkpoint(ckpt)
    assert model.lstm.kernels.packed_keys() == set()
    assert model.fast_path == FastPath()
    Embedder(model).embed(SENTS)
    assert model.lstm.kernels.packed_keys()        # the first batch packs what it uses
