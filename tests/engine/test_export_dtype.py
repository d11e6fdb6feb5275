"""``export vectors --dtype float16`` (issue 29 item 4): the same vectors rounded to float16 in
npz and hdf5 (whole sentences and a word's occurrences); refused for the text formats."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from elmo_engine.cli.main import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = ["He sat on the bank of the river .", "She went to the bank .", "bank loans rose"]


@pytest.fixture
def text_file(tmp_path):
    p = tmp_path / "in.txt"
    p.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return p


def _export(text_file, out, ckpt, *extra):
    return main(["export", "vectors", str(text_file), "-o", str(out), "--checkpoint", str(ckpt),
                 "--device", "cpu", *extra])


def test_float16_is_the_float32_export_rounded(tmp_path, text_file, tiny_checkpoint):
    f32, f16 = tmp_path / "a.hdf5", tmp_path / "b.hdf5"
    assert _export(text_file, f32, tiny_checkpoint) == 0
    assert _export(text_file, f16, tiny_checkpoint, "--dtype", "float16") == 0
    with h5py.File(f32, "r") as a, h5py.File(f16, "r") as b:
        for key in ("0", "1", "2"):
            full, half = a[key][()], b[key][()]
            assert full.dtype == np.float32 and half.dtype == np.float16
            np.testing.assert_array_equal(half, full.astype(np.float16))
    sel = tmp_path / "bank.npz"
    assert _export(text_file, sel, tiny_checkpoint, "--layers", "top", "--word", "bank",
                   "--dtype", "float16") == 0
    with np.load(sel, allow_pickle=False) as z, h5py.File(f32, "r") as a:
        assert z["vectors"].dtype == np.float16 and z["vectors"].shape == (3, 32)
        np.testing.assert_array_equal(z["vectors"][1], a["1"][()][2, 4].astype(np.float16))


def test_float16_is_refused_for_text_formats(tmp_path, text_file, tiny_checkpoint, capsys):
    out = tmp_path / "v.csv"
    assert _export(text_file, out, tiny_checkpoint, "--dtype", "float16") == 1
    assert "--dtype float16 applies to npz and hdf5 outputs; csv is text" in \
        capsys.readouterr().err
    assert not out.exists()
