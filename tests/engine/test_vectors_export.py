"""Vector exports: AllenNLP HDF5 layout, npz, projector TSV pair, CSV; layer choices; safety."""
from __future__ import annotations

import csv
import errno
import json
import os

import h5py
import numpy as np
import pytest

from elmo_engine.errors import ElmoError, InputError
from elmo_engine.model.mix import scalar_mix_numpy
from elmo_engine.io.vectors import (LayerChoice, SentenceVectors, export_stream, export_vectors,
                                    format_for)
from elmo_engine.io.writing import ExportError, NotReplaceableError, TargetExistsError

TOKENS = [["the", "bank", "of", "the", "river"], ["a", "bank"], ["bank", "loan", "rates", "rose"]]


@pytest.fixture(scope="module")
def acts():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((3, len(t), 8)).astype(np.float32) for t in TOKENS]


def test_hdf5_allennlp_layout_each_layer(tmp_path, acts):
    out = tmp_path / "v.hdf5"
    summary = export_vectors(out, TOKENS, acts, layers=LayerChoice("each"))
    assert summary.n_sentences == 3 and summary.n_vectors == 11 and summary.fmt == "hdf5"
    with h5py.File(out, "r") as fh:
        assert sorted(fh.keys()) == ["0", "1", "2", "sentence_to_index"]
        for i, a in enumerate(acts):
            assert fh[str(i)].shape == (3, len(TOKENS[i]), 8) and fh[str(i)].dtype == np.float32
            np.testing.assert_array_equal(fh[str(i)][()], a)
        index = json.loads(fh["sentence_to_index"][0])
    assert index == {"the bank of the river": "0", "a bank": "1", "bank loan rates rose": "2"}
    assert [p.name for p in tmp_path.iterdir()] == ["v.hdf5"]          # no temporary left


@pytest.mark.parametrize("mode", ["top", "average"])
def test_npz_top_and_average(tmp_path, acts, mode):
    out = tmp_path / f"{mode}.npz"
    export_vectors(out, TOKENS, acts, layers=LayerChoice(mode))
    with np.load(out, allow_pickle=False) as z:
        for i, a in enumerate(acts):
            want = a[-1] if mode == "top" else a.mean(axis=0)
            np.testing.assert_allclose(z[str(i)], want, rtol=1e-6, atol=1e-6)
        assert json.loads(str(z["sentence_to_index"]))["a bank"] == "1"
        assert str(z["layers"]) == mode


def test_mix_matches_scalar_mix_reference(tmp_path, acts):
    w = (0.2, 0.0, 0.6)                                   # normalised to (0.25, 0, 0.75)
    out = tmp_path / "mix.npz"
    export_vectors(out, TOKENS, acts, layers=LayerChoice("mix", w, gamma=2.0))
    with np.load(out, allow_pickle=False) as z:
        got = z["1"]
    want = 2.0 * (0.25 * acts[1][0] + 0.75 * acts[1][2])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    s = (0.5, -1.0, 2.0)                                  # ScalarMix scalars
    export_vectors(tmp_path / "s.npz", TOKENS, acts, layers=LayerChoice("mix", s, 1.5, True))
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        np.testing.assert_allclose(z["2"], scalar_mix_numpy(acts[2], s, 1.5), rtol=1e-5, atol=1e-6)



@pytest.mark.parametrize("weights,gamma,pre,expect", [
    ((1e308, 1e308, 1e308), 1.0, False, "sum overflows"),      # every weight became 0: NaN out
    ((1.0, -1.0, 1.0), 1.0, False, "non-negative"),
    ((0.0, 0.0, 0.0), 1.0, False, "not all zero"),
    ((1.0, 1.0, 1.0), 1e300, False, "gamma"),                   # the vectors came out inf
    ((1.0, float("nan"), 1.0), 1.0, True, "finite"),
])
def test_a_mix_that_would_give_nan_or_inf_is_refused(weights, gamma, pre, expect):
    from elmo_engine.analysis.projection.compute import LayerSpec

    with pytest.raises(InputError, match=expect):
        LayerChoice("mix", weights, gamma, pre).validate(3)
    if not pre and expect != "gamma":
        with pytest.raises(InputError, match=expect):
            LayerSpec.mix(weights)
    big = LayerChoice("mix", (1e300, 1e300, 1e300), 1.0, False)
    big.validate(3)                                             # large but summable: its ratios
    np.testing.assert_allclose(big.normalised(), [1 / 3] * 3)
    assert np.allclose(LayerSpec.mix((1e300, 1e300, 1e300)).weights, [1 / 3] * 3)
    LayerChoice("mix", (900.0, -900.0, 0.0), 1.0, True).validate(3)   # softmax: any finite s


def test_selection_layout(tmp_path, acts):
    refs = [(0, 1), (1, 1), (2, 0)]
    export_vectors(tmp_path / "sel.hdf5", TOKENS, acts, layers=LayerChoice("top"), refs=refs)
    with h5py.File(tmp_path / "sel.hdf5", "r") as fh:
        assert fh["vectors"].shape == (3, 8)
        assert list(fh["sentence"][()]) == [0, 1, 2] and list(fh["token"][()]) == [1, 1, 0]
        assert [w.decode() for w in fh["word"][()]] == ["bank"] * 3
        np.testing.assert_array_equal(fh["vectors"][1], acts[1][-1, 1])
    export_vectors(tmp_path / "sel.npz", TOKENS, acts, layers=LayerChoice("each"), refs=refs)
    with np.load(tmp_path / "sel.npz", allow_pickle=False) as z:
        assert z["vectors"].shape == (3, 3, 8)
        np.testing.assert_array_equal(z["vectors"][2], acts[2][:, 0])
        assert list(z["word"]) == ["bank"] * 3


def test_tsv_pair_rows_and_header(tmp_path, acts):
    out = tmp_path / "projector"
    summary = export_vectors(out, TOKENS, acts, "tsv", LayerChoice("top"))
    assert sorted(p.name for p in summary.files) == ["metadata.tsv", "vectors.tsv"]
    vec = (out / "vectors.tsv").read_text(encoding="utf-8").splitlines()
    meta = (out / "metadata.tsv").read_text(encoding="utf-8").splitlines()
    assert len(vec) == 11 and len(meta) == 12                      # metadata has a header row
    assert meta[0].split("\t") == ["word", "sentence", "token", "context"]
    assert meta[2].split("\t")[:3] == ["bank", "0", "1"]
    row = np.array([float(x) for x in vec[1].split("\t")])
    np.testing.assert_allclose(row, acts[0][-1, 1], rtol=1e-6)
    each = export_vectors(tmp_path / "each", TOKENS, acts, "tsv", LayerChoice("each"), refs=[(2, 0)])
    assert sorted(p.name for p in each.files) == ["metadata.tsv", "vectors_layer0.tsv",
                                                  "vectors_layer1.tsv", "vectors_layer2.tsv"]
    assert len((tmp_path / "each" / "vectors_layer2.tsv").read_text().splitlines()) == 1


def test_csv_parses_back(tmp_path, acts):
    out = tmp_path / "v.csv"
    export_vectors(out, TOKENS, acts, layers=LayerChoice("each"), refs=[(0, 4), (1, 0)])
    with open(out, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:4] == ["sentence", "token", "word", "layer"] and len(rows[0]) == 4 + 8
    assert len(rows) == 1 + 2 * 3
    assert rows[3][:4] == ["0", "4", "river", "2"]
    np.testing.assert_allclose([float(x) for x in rows[3][4:]], acts[0][2, 4], rtol=1e-6)
    odd = [["1,000", 'say"hi']]                                      # fields that need quoting
    export_vectors(tmp_path / "odd.csv", odd, [acts[1]], layers=LayerChoice("top"))
    with open(tmp_path / "odd.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert [r[:4] for r in rows[1:]] == [["0", "0", "1,000", "top"], ["0", "1", 'say"hi', "top"]]
    assert all(len(r) == 12 for r in rows)


def test_refuses_to_overwrite_unless_asked(tmp_path, acts):
    out = tmp_path / "v.npz"
    out.write_bytes(b"old")
    with pytest.raises(TargetExistsError, match="already exists"):
        export_vectors(out, TOKENS, acts)
    assert out.read_bytes() == b"old"
    folder = tmp_path / "tsv"
    folder.mkdir()
    (folder / "keep.txt").write_text("x")
    with pytest.raises(TargetExistsError):
        export_vectors(folder, TOKENS, acts, "tsv", LayerChoice("top"))
    export_vectors(out, TOKENS, acts, overwrite=True)
    with np.load(out, allow_pickle=False) as z:
        assert z["0"].shape == (3, 5, 8)
    # a folder of the user's is never replaced, even when asked (issue 38)
    with pytest.raises(NotReplaceableError, match="tsv: is not a projector folder: it holds keep"):
        export_vectors(folder, TOKENS, acts, "tsv", LayerChoice("top"), overwrite=True)
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
    (folder / "keep.txt").unlink()
    for _ in range(2):                        # empty, then an earlier projector folder: replaced
        export_vectors(folder, TOKENS, acts, "tsv", LayerChoice("top"), overwrite=True)
        assert sorted(p.name for p in folder.iterdir()) == [".elmo-output.json", "metadata.tsv",
                                                           "vectors.tsv"]


@pytest.mark.parametrize("fmt,name", [("npz", "v.npz"), ("hdf5", "v.hdf5"), ("csv", "v.csv"),
                                      ("tsv", "proj")])
def test_disk_full_leaves_nothing(tmp_path, acts, monkeypatch, fmt, name):
    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ElmoError) as err:                   # ExportError or atomic.WriteError
        export_vectors(tmp_path / name, TOKENS, acts, fmt, LayerChoice("top"))
    msg = str(err.value)
    assert ("disk is full" in msg or "No space left" in msg) and str(tmp_path / name) in msg
    assert "nothing was written" in msg
    assert list(tmp_path.iterdir()) == []


def test_permission_denied_is_clear(tmp_path, acts, monkeypatch):
    def denied(*_a, **_k):
        raise PermissionError(errno.EACCES, "Permission denied")

    import zipfile

    monkeypatch.setattr(zipfile, "ZipFile", denied)
    with pytest.raises(ExportError, match="permission denied"):
        export_vectors(tmp_path / "v.npz", TOKENS, acts)
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_an_input_error(tmp_path, acts):
    with pytest.raises(InputError, match="one weight per layer"):
        export_vectors(tmp_path / "m.npz", TOKENS, acts, layers=LayerChoice("mix", (1.0, 2.0)))
    with pytest.raises(InputError, match="token 9 of sentence 1"):
        export_vectors(tmp_path / "m.npz", TOKENS, acts, refs=[(1, 9)])
    with pytest.raises(InputError, match="do not match"):
        export_vectors(tmp_path / "m.npz", TOKENS, [acts[1]] * 3)
    with pytest.raises(InputError, match="format"):
        format_for(tmp_path / "x.txt")
    assert format_for(tmp_path / "x.h5") == "hdf5" and format_for(tmp_path / "dir") == "tsv"
    assert list(tmp_path.iterdir()) == []


# ---- streaming (issue 29: bounded memory) ---------------------------------------------------
class _Lazy:
    """Sentences handed out one at a time, remembering how many were out at once (taken but
    not yet released by the writer: a writer that held them all would reach ``len``)."""

    def __init__(self, tokens, acts, positions=None):
        self.tokens, self.acts, self.positions = tokens, acts, positions
        self.taken = 0

    def __iter__(self):
        for i, (t, a) in enumerate(zip(self.tokens, self.acts)):
            pos = None if self.positions is None else self.positions[i]
            if pos == []:
                continue
            self.taken += 1
            yield SentenceVectors(i, t, a, pos)


@pytest.mark.parametrize("fmt,name", [("npz", "s.npz"), ("hdf5", "s.hdf5"), ("csv", "s.csv"),
                                      ("tsv", "s.tsv")])
def test_stream_writes_what_the_in_memory_export_writes(tmp_path, acts, fmt, name):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    export_vectors(tmp_path / "a" / name, TOKENS, acts, fmt, LayerChoice("average"))
    summary = export_stream(tmp_path / "b" / name, _Lazy(TOKENS, acts), fmt,
                            LayerChoice("average"))
    assert summary.n_vectors == 11 and summary.n_sentences == 3
    for f in sorted((tmp_path / "a").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name


@pytest.mark.parametrize("fmt", ["npz", "hdf5"])
def test_stream_selection_by_word_matches_refs(tmp_path, acts, fmt):
    refs = [(s, t) for s, toks in enumerate(TOKENS) for t, w in enumerate(toks) if w == "bank"]
    positions = [[t for t, w in enumerate(toks) if w == "bank"] for toks in TOKENS]
    export_vectors(tmp_path / f"a.{fmt}", TOKENS, acts, layers=LayerChoice("each"), refs=refs)
    summary = export_stream(tmp_path / f"b.{fmt}", _Lazy(TOKENS, acts, positions),
                            layers=LayerChoice("each"), n_selected=len(refs), dtype="float16")
    assert summary.n_vectors == 3
    if fmt == "npz":
        a = np.load(tmp_path / "a.npz", allow_pickle=False)
        b = np.load(tmp_path / "b.npz", allow_pickle=False)
        vec_a, vec_b = a["vectors"], b["vectors"]
        assert list(b["word"]) == ["bank"] * 3 and list(b["sentence"]) == [0, 1, 2]
    else:
        with h5py.File(tmp_path / "a.hdf5") as fa, h5py.File(tmp_path / "b.hdf5") as fb:
            vec_a, vec_b = fa["vectors"][()], fb["vectors"][()]
            assert list(fb["token"][()]) == [1, 1, 0]
    assert vec_b.dtype == np.float16 and vec_b.shape == (3, 3, 8)
    np.testing.assert_allclose(vec_b.astype(np.float32), vec_a, rtol=1e-3, atol=1e-3)


def test_stream_refuses_a_selection_that_is_not_the_count_announced(tmp_path, acts):
    positions = [[1], [1], [0]]
    for n in (2, 4):
        with pytest.raises(InputError, match=f"{n} tokens were to be written"):
            export_stream(tmp_path / "x.npz", _Lazy(TOKENS, acts, positions), n_selected=n)
    assert list(tmp_path.iterdir()) == []                      # nothing half-written is kept


def test_stream_takes_one_sentence_at_a_time(tmp_path, acts):
    """The writer takes the next sentence only after writing the last: a generator that
    checks, when asked for sentence i, that sentence i-1 is no longer referenced elsewhere."""
    import gc
    import weakref

    many = TOKENS * 40
    alive = []

    def gen():
        for i, toks in enumerate(many):
            gc.collect(0)                 # (a full collection per sentence took minutes
            #                               in a whole-suite process of millions of objects)
            assert sum(r() is not None for r in alive) <= 1, i   # at most the one just taken
            arr = np.random.default_rng(i).standard_normal((3, len(toks), 8)).astype(np.float32)
            alive.append(weakref.ref(arr))
            yield SentenceVectors(i, toks, arr)
            del arr

    for name in ("w.npz", "w.hdf5", "w.csv", "w"):
        export_stream(tmp_path / name, gen(), layers=LayerChoice("top"))
        alive.clear()
