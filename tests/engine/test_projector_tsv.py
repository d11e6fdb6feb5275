"""One projector-TSV format: the contexts export, the projection export and the vector export
(``embed`` / Export vectors, TSV target) write the same lines for the same vectors."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_engine.analysis.projection import TokenSet, write_tensorboard
from elmo_engine.io import projector_tsv
from elmo_engine.io.vectors import LayerChoice, export_vectors

TOKENS = [["the", "bank\tof"], ["river"]]


@pytest.fixture
def acts():
    rng = np.random.default_rng(0)
    return [rng.normal(size=(2, len(s), 3)).astype(np.float32) for s in TOKENS]   # (L+1, n, 2P)


def test_the_format(tmp_path):
    vec = np.array([[1.0, -0.5, 1e-8], [123456789.0, 0.1, 2.0]], dtype=np.float32)
    projector_tsv.write_vectors(tmp_path / "v.tsv", vec)
    assert (tmp_path / "v.tsv").read_bytes() == b"1\t-0.5\t1e-08\n1.234568e+08\t0.1\t2\n"
    projector_tsv.write_metadata(tmp_path / "m.tsv", ["word", "context"],
                                 [["a\tb", "line\nbreak  here"]])
    assert (tmp_path / "m.tsv").read_text("utf-8") == "word\tcontext\na b\tline break here\n"
    projector_tsv.write_metadata(tmp_path / "one.tsv", ["word"], [["x"], ["y"]])
    assert (tmp_path / "one.tsv").read_text("utf-8") == "x\ny\n"          # one column: no header
    with pytest.raises(Exception, match="shape"):
        projector_tsv.write_vectors(tmp_path / "bad.tsv", np.zeros(3))


def test_every_writer_writes_the_same_vector_lines(tmp_path, acts):
    top = np.concatenate([a[-1] for a in acts])                              # (3, 3)
    export_vectors(tmp_path / "export", TOKENS, acts, "tsv", LayerChoice("top"))
    words = [w for s in TOKENS for w in s]
    tokens = TokenSet([list(s) for s in TOKENS], np.array([0, 0, 1]), np.array([0, 1, 0]), words)
    write_tensorboard(tmp_path / "projection", top, tokens)
    projector_tsv.write_vectors(tmp_path / "contexts.tsv", top)
    expected = "".join(projector_tsv.vector_lines(top))
    for path in (tmp_path / "export" / "vectors.tsv", tmp_path / "projection" / "vectors.tsv",
                 tmp_path / "contexts.tsv"):
        assert path.read_text("utf-8") == expected, path
    meta = (tmp_path / "export" / "metadata.tsv").read_text("utf-8").splitlines()
    assert meta[0] == "word\tsentence\ttoken\tcontext" and meta[2].startswith("bank of\t0\t1\t")
    pmeta = (tmp_path / "projection" / "metadata.tsv").read_text("utf-8").splitlines()
    assert pmeta[0].split("\t")[0] == "token" and pmeta[2].split("\t")[0] == "bank of"
