"""Fuzzing the checkpoint readers: options.json, weights HDF5, native safetensors.

Every generated input must end in :class:`CheckpointError` (naming the file, with a message of
readable length) or in a correct load — never another exception, a hang, or a jump in peak
memory (a declared size is checked before anything is allocated).

Short in CI (derandomized, ``ELMO_FUZZ_EXAMPLES`` per target, default 100); longer by hand, e.g.
``ELMO_FUZZ_EXAMPLES=2000 pytest tests/engine/test_hardening_checkpoint_fuzz.py``.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import struct
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from elmo_engine.model.checkpoint import expected_layout, load_checkpoint, save_native
from elmo_engine.errors import CheckpointError
from elmo_engine.model.options import BiLMOptions

from support import FIXTURES, json_paths, json_values, mutate_json

EXAMPLES = int(os.environ.get("ELMO_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EXAMPLE_MEMORY_LIMIT_KB = 200_000         # peak growth allowed while loading one input
SOURCE = FIXTURES / "allennlp"


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def outcome(path) -> str:
    """Load ``path``; return "ok" or "error". Anything but a CheckpointError fails the test, and
    so does a jump in peak memory (ru_maxrss) of more than 200 MB while loading."""
    before = _peak_kb()
    try:
        model = load_checkpoint(path)
    except CheckpointError as e:
        grown = _peak_kb() - before
        assert grown < EXAMPLE_MEMORY_LIMIT_KB, f"loading took {grown} kB more peak memory"
        msg = str(e)
        assert msg.startswith(e.path + ": "), msg          # the file is named first
        assert len(msg.split(": ", 1)[1]) > 5 and len(msg) < 2000, msg
        assert "Traceback" not in msg
        event("outcome: CheckpointError")
        return "error"
    grown = _peak_kb() - before
    assert grown < EXAMPLE_MEMORY_LIMIT_KB, f"loading took {grown} kB more peak memory"
    event("outcome: loaded")
    for p in model.parameters():
        assert torch.isfinite(p).all()
    layout = expected_layout(model.opts)
    assert sum(int(np.prod(s)) for s in layout.values()) == model.parameter_counts()["total"]
    return "ok"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _published(work: Path, name: str) -> Path:
    d = work / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    shutil.copy(SOURCE / "options.json", d / "options.json")
    shutil.copy(SOURCE / "lm_weights.hdf5", d / "lm_weights.hdf5")
    return d


# ---- options.json ----------------------------------------------------------------------------
OPTIONS = json.loads((SOURCE / "options.json").read_text()) if SOURCE.exists() else {}

leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
    st.sampled_from([0, 1, -1, 2, 3, 50, 64, 1 << 20, (1 << 20) + 1, 1 << 31, 10 ** 30]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["relu", "tanh", "true", "false", "262"]))
json_value = json_values(leaf)


ALL_PATHS = list(json_paths(OPTIONS))


@st.composite
def mutated_options(draw) -> bytes:
    doc = mutate_json(draw, json.loads(json.dumps(OPTIONS)), ALL_PATHS, json_value)
    text = json.dumps(doc, allow_nan=True).encode()
    # byte-level damage: splices of odd bytes, huge literals, deep nesting, truncation
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        splice = draw(st.sampled_from([
            b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\"\\ud800\"", b"9" * 5000, b"1e999",
            b"-0", b"NaN", b"[" * 3000, b"{\"a\":" * 2000, b"}", b",", b"\"", b" " * 100]))
        text = text[:at] + splice + text[at:]
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text


@FUZZ
@given(data=mutated_options())
@example(data=b"[" * 100_000)
@example(data=b"{\"lstm\": " + b"9" * 10_000 + b"}")
@example(data=json.dumps({"lstm": {"dim": 1 << 20, "projection_dim": 1 << 20, "n_layers": 64},
                          "char_cnn": {"filters": [[1, 1 << 20]] * 1024, "embedding": {"dim": 1 << 20},
                                       "n_highway": 64}}).encode())
@example(data=json.dumps({**OPTIONS, "char_cnn": {**OPTIONS.get("char_cnn", {}),
                                                   "n_highway": 10 ** 9}}).encode())
@example(data=json.dumps({**OPTIONS, "char_cnn": {**OPTIONS.get("char_cnn", {}),
                                                   "max_characters_per_token": 1 << 20}}).encode())
def test_fuzz_options_json(work, data):
    d = _published(work, "opts") if not (work / "opts").exists() else work / "opts"
    (d / "options.json").write_bytes(data)
    outcome(d)


def test_options_ten_megabyte_line(work):
    d = _published(work, "opts_big")
    (d / "options.json").write_bytes(b"{\"x\": \"" + b"a" * (10 << 20) + b"\"}")
    with pytest.raises(CheckpointError, match="too large"):
        load_checkpoint(d)


@pytest.mark.parametrize("change,needle", [
    (lambda o: o["lstm"].update(use_skip_connections="false"), "use_skip_connections"),
    (lambda o: o["char_cnn"].update(n_highway=10 ** 9), "n_highway"),
    (lambda o: o["lstm"].update(n_layers=1000), "n_layers"),
    (lambda o: o["char_cnn"].update(filters=[[1, 10 ** 12]]), "filters[0]"),
    (lambda o: o["lstm"].update(dim=1 << 20, projection_dim=1 << 20), "larger than this tool"),
])
def test_options_that_would_need_huge_memory_or_mean_something_else(work, change, needle):
    d = _published(work, "opts_bad")
    opts = json.loads(json.dumps(OPTIONS))
    change(opts)
    (d / "options.json").write_text(json.dumps(opts))
    before = _peak_kb()
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert needle in str(e.value) and "options.json" in str(e.value)
    assert _peak_kb() - before < 200_000


def test_options_matching_nothing_fail_before_allocating(work):
    """A plausible but big model (4096-wide LSTMs) beside small weights: the shapes are compared
    before the model is built, so no gigabytes are allocated."""
    d = _published(work, "opts_mismatch")
    opts = json.loads(json.dumps(OPTIONS))
    opts["lstm"].update(dim=4096 * 4, projection_dim=1024)
    (d / "options.json").write_text(json.dumps(opts))
    before = _peak_kb()
    with pytest.raises(CheckpointError, match="wrong shape|missing"):
        load_checkpoint(d)
    assert _peak_kb() - before < 200_000


# ---- weights HDF5: bytes ---------------------------------------------------------------------
WEIGHTS_SIZE = (SOURCE / "lm_weights.hdf5").stat().st_size if SOURCE.exists() else 1


@st.composite
def damaged_weights(draw) -> list:
    offset = st.one_of(st.integers(0, 4095), st.integers(0, WEIGHTS_SIZE - 1))
    ops = []
    for _ in range(draw(st.integers(1, 8))):
        ops.append(("flip", draw(offset), draw(st.integers(1, 255))))
    if draw(st.booleans()):
        ops.append(("truncate", draw(offset)))
    return ops


@FUZZ
@given(ops=damaged_weights())
@example(ops=[("truncate", 0)])
@example(ops=[("truncate", 8)])
@example(ops=[("truncate", WEIGHTS_SIZE // 2)])
@example(ops=[("truncate", WEIGHTS_SIZE - 1)])
def test_fuzz_weights_bytes(work, ops):
    d = work / "bytes"
    if not d.exists():
        _published(work, "bytes")
    data = bytearray((SOURCE / "lm_weights.hdf5").read_bytes())
    for op in ops:
        if op[0] == "flip":
            data[op[1]] ^= op[2]
        else:
            del data[op[1]:]
    (d / "lm_weights.hdf5").write_bytes(bytes(data))
    outcome(d)


# ---- weights HDF5: structure -------------------------------------------------------------------
DATASETS = (sorted(expected_layout(BiLMOptions.from_file(SOURCE / "options.json")))
            if SOURCE.exists() else ["x"])


def _replace(fh, name, make):
    del fh[name]
    make(fh, name)


STRUCTURAL = {
    "int32": lambda fh, n: fh.create_dataset(n, data=np.ones((3, 4), np.int32)),
    "bool": lambda fh, n: fh.create_dataset(n, data=np.ones((3,), bool)),
    "string": lambda fh, n: fh.create_dataset(n, data=np.array([b"x" * 30])),
    "compound": lambda fh, n: fh.create_dataset(n, data=np.zeros(3, [("a", "f4"), ("b", "i4")])),
    "scalar": lambda fh, n: fh.create_dataset(n, data=np.float32(1.5)),
    "empty": lambda fh, n: fh.create_dataset(n, shape=(0,), dtype="f4"),
    "group": lambda fh, n: fh.create_group(n),
    "huge": lambda fh, n: fh.create_dataset(n, shape=(1 << 40,), dtype="f4", chunks=(1 << 16,)),
    "huge2d": lambda fh, n: fh.create_dataset(n, shape=(1 << 24, 1 << 24), dtype="f8",
                                             chunks=(64, 64)),
    "soft_link_loop": lambda fh, n: fh.__setitem__(n, h5py.SoftLink("/" + n)),
    "external_missing": lambda fh, n: fh.__setitem__(n, h5py.ExternalLink("/nonexistent.h5", "/x")),
    # issue 18: a chunk far larger than its dataset (maxshape=None), holding ~16 MB of zeros
    "big_chunk": lambda fh, n: fh.create_dataset(
        n, shape=(4,), maxshape=(None,), chunks=(1 << 22,), dtype="f4",
        compression="gzip").id.write_direct_chunk((0,), ZEROS_16MB),
    "external_text": lambda fh, n: fh.__setitem__(n, h5py.ExternalLink("options.json", "/x")),
}
ZEROS_16MB = zlib.compress(bytes(16 << 20), 9)


def _right_shape_but(kind):
    """Datasets with the right shape whose contents are not usable."""
    def make(fh, n, shape, data):
        if kind == "float16":
            fh.create_dataset(n, data=data.astype(np.float16))
        elif kind == "float64":
            fh.create_dataset(n, data=data.astype(np.float64))
        elif kind == "int_right_shape":
            fh.create_dataset(n, data=data.astype(np.int64))
        elif kind == "unwritten":
            fh.create_dataset(n, shape=shape, dtype="f4")
        elif kind == "nan":
            bad = data.copy().reshape(-1)
            bad[0] = np.nan
            fh.create_dataset(n, data=bad.reshape(shape))
        elif kind == "external_storage":
            fh.create_dataset(n, shape=shape, dtype="f4",
                              external=[("/nonexistent-raw-data", 0, h5py.h5f.UNLIMITED)])
        elif kind == "gzip":
            fh.create_dataset(n, data=data, compression="gzip", chunks=True)
        elif kind == "deflate_bomb":             # issue 18: a chunk that inflates to 4 MB
            ds = fh.create_dataset(n, shape=shape, chunks=shape, dtype="f4", compression="gzip")
            ds.id.write_direct_chunk((0,) * len(shape), ZEROS_4MB)
    return make


ZEROS_4MB = zlib.compress(bytes(4 << 20), 9)
RIGHT_SHAPE = ["float16", "float64", "int_right_shape", "unwritten", "nan", "external_storage",
               "gzip", "deflate_bomb"]


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(DATASETS),
                                st.sampled_from(sorted(STRUCTURAL) + RIGHT_SHAPE
                                                + ["extra", "deep", "empty_groups"])),
                      min_size=1, max_size=3, unique_by=lambda e: e[0]))
def test_fuzz_weights_structure(work, edits):
    d = _published(work, "struct")
    with h5py.File(d / "lm_weights.hdf5", "a") as fh:
        for name, kind in edits:
            if kind == "extra":
                fh.create_dataset(name + "_extra", data=np.zeros(2, np.float32))
            elif kind in ("deep", "empty_groups"):   # issue 18: nested empty groups
                g = fh.require_group(name.split("/")[0] + "_nest")
                for _ in range(200 if kind == "deep" else 5):
                    g = g.require_group("g")
            elif kind in STRUCTURAL:
                _replace(fh, name, STRUCTURAL[kind])
            else:
                data = fh[name][()]
                del fh[name]
                _right_shape_but(kind)(fh, name, data.shape, data)
    result = outcome(d)
    kinds = {k for _, k in edits}
    if kinds <= {"float64", "gzip", "float16"}:
        assert result == "ok"                 # lossless or widening storage still loads
    if kinds & {"huge", "huge2d", "unwritten", "nan", "int32", "group", "extra", "big_chunk",
                 "deflate_bomb", "deep", "external_text"}:
        assert result == "error"


@pytest.mark.parametrize("kind,needle", [
    ("huge", "wrong shape"), ("group", "group"), ("int_right_shape", "floating point"),
    ("unwritten", "holds no data"), ("external_storage", "outside this file"),
    ("external_missing", "external link to|missing|corrupt|cannot"),
])
def test_weights_structure_messages(work, kind, needle):
    d = _published(work, "struct_msg")
    name = "CNN_high_0/W_carry"
    with h5py.File(d / "lm_weights.hdf5", "a") as fh:
        data = fh[name][()]
        if kind in STRUCTURAL:
            _replace(fh, name, STRUCTURAL[kind])
        else:
            del fh[name]
            _right_shape_but(kind)(fh, name, data.shape, data)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert e.value.dataset == name, str(e.value)
    assert re.search(needle, str(e.value)), str(e.value)


def test_external_link_to_a_real_file_is_refused(work):
    """Weights must be self-contained: a link into another file (which could be any file on the
    user's disk) is not followed into the model."""
    d = _published(work, "struct_link")
    name = "CNN_high_0/W_carry"
    other = work / "elsewhere.h5"
    with h5py.File(d / "lm_weights.hdf5", "a") as fh, h5py.File(other, "w") as ext:
        ext["w"] = fh[name][()]
        del fh[name]
        fh[name] = h5py.ExternalLink(str(other), "/w")
    with pytest.raises(CheckpointError, match="outside this file") as e:
        load_checkpoint(d)
    assert e.value.dataset == name


# ---- native safetensors ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def native_bytes(work):
    folder = work / "native_src"
    save_native(load_checkpoint(SOURCE), folder)
    return (folder / "bilm.json").read_bytes(), (folder / "bilm.safetensors").read_bytes()


def _split(raw: bytes):
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _join(header: dict, body: bytes) -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


@st.composite
def damaged_safetensors(draw, raw: bytes) -> bytes:
    header, body = _split(raw)
    names = sorted(k for k in header if k != "__metadata__")
    kind = draw(st.sampled_from(["truncate", "length", "flip_header", "dtype", "offsets",
                                 "shape", "flip_body", "header_value"]))
    if kind == "truncate":
        return raw[:draw(st.integers(0, len(raw) - 1))]
    if kind == "length":
        value = draw(st.one_of(st.integers(0, 2 ** 64 - 1),
                               st.sampled_from([0, 1, 2 ** 64 - 1, 2 ** 63, len(raw), 100 << 20])))
        return struct.pack("<Q", value) + raw[8:]
    if kind == "flip_header":
        n = struct.unpack("<Q", raw[:8])[0]
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(8, 8 + n - 1))] ^= draw(st.integers(1, 255))
        return bytes(data)
    if kind == "flip_body":
        data = bytearray(raw)
        at = draw(st.integers(len(raw) - len(body), len(raw) - 1))
        data[at] ^= draw(st.integers(1, 255))
        return bytes(data)
    name = draw(st.sampled_from(names))
    entry = header[name]
    if kind == "dtype":
        entry["dtype"] = draw(st.sampled_from(["I32", "U8", "BOOL", "BF16", "F16", "F64", "F8_E4M3",
                                               "X", "", "f32", "F32 "]))
    elif kind == "offsets":
        a, b = entry["data_offsets"]
        entry["data_offsets"] = draw(st.sampled_from([
            [a, b + 4], [a + 4, b], [b, a], [a, len(body) + 4], [2 ** 63, 2 ** 63 + b - a],
            [-4, b], [a, 2 ** 64 + 1]]))
    elif kind == "shape":
        entry["shape"] = draw(st.sampled_from([[], [0], [2 ** 40], [2 ** 32, 2 ** 32], [-1],
                                               list(reversed(entry["shape"])), [1] + entry["shape"]]))
    else:
        entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(json_value)
    return _join(header, body)


@FUZZ
@given(data=st.data())
def test_fuzz_safetensors(work, native_bytes, data):
    cfg, raw = native_bytes
    d = work / "native"
    d.mkdir(exist_ok=True)
    (d / "bilm.json").write_bytes(cfg)
    (d / "bilm.safetensors").write_bytes(data.draw(damaged_safetensors(raw)))
    outcome(d)


@FUZZ
@given(data=mutated_options())
def test_fuzz_native_config(work, native_bytes, data):
    cfg, raw = native_bytes
    d = work / "native_cfg"
    d.mkdir(exist_ok=True)
    (d / "bilm.safetensors").write_bytes(raw)
    doc = json.loads(cfg)
    try:
        opts = json.loads(data)
    except (ValueError, RecursionError):
        (d / "bilm.json").write_bytes(data)            # raw damaged bytes as the whole config
    else:
        doc["options"] = opts
        (d / "bilm.json").write_text(json.dumps(doc, allow_nan=True))
    outcome(d)
