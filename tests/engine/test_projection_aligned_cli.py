"""``elmo-explorer project --aligned`` (issue 42): the layouts, the kNN change, the animation."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from elmo_engine.cli.main import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TEXT = ("He sat on the bank of the river .\nThe bank raised its rates again .\n"
        "She walked along the bank at dawn .\nA bank loan is due in May .\n"
        "The river bank was muddy after rain .\n")


@pytest.fixture
def sentences(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text(TEXT, "utf-8")
    return p


def test_procrustes_csv_json_and_gif(tmp_path, sentences, tiny_checkpoint, capsys):
    iio = pytest.importorskip("imageio.v3")
    out, gif, frames = tmp_path / "a.csv", tmp_path / "a.gif", tmp_path / "frames"
    code = main(["project", str(sentences), "--checkpoint", str(tiny_checkpoint), "--device",
                 "cpu", "--aligned", "procrustes", "--method", "pca", "--aligned-layers",
                 "0f,0b,1,2", "--reference", "0f", "--knn", "3", "--knn-layers", "1,2",
                 "--knn-top", "5", "-o", str(out), "--json", "--animation", str(gif),
                 "--frames", str(frames), "--steps", "2", "--trails", "bank"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["layers"] == ["layer0f", "layer0b", "layer1", "layer2"]
    assert doc["reference"] == "layer0f" and doc["procrustes_residuals"]["layer0b"] < 1e-6
    kc = doc["knn_change"]
    assert kc["k"] == 3 and (kc["from"], kc["to"]) == ("layer 1", "layer 2")
    assert len(kc["most_changed"]) == 5
    js = [c["jaccard"] for c in kc["most_changed"]]
    assert js == sorted(js) and all(0.0 <= j <= 1.0 for j in js)
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == doc["tokens"] == sum(len(s.split()) for s in TEXT.splitlines())
    # layer 0's halves are the same vector: the aligned positions coincide
    for r in rows:
        assert float(r["layer0f_aligned_x"]) == pytest.approx(float(r["layer0b_aligned_x"]),
                                                              abs=1e-4)
    assert min(float(r["knn_jaccard"]) for r in rows) == pytest.approx(js[0], abs=1e-4)
    assert iio.imread(gif, index=None).shape[0] == 3 * 2 + 1
    assert len(list(frames.glob("frame_*.png"))) == 7


def test_npz_and_refusals(tmp_path, sentences, tiny_checkpoint, capsys):
    out = tmp_path / "a.npz"
    base = ["project", str(sentences), "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
            "--method", "pca"]
    assert main(base + ["--aligned", "procrustes", "-o", str(out)]) == 0
    z = np.load(out, allow_pickle=False)
    assert z["coords"].shape == (3, len(z["words"]), 2) and list(z["layers"]) == [
        "layer0", "layer1", "layer2"]
    assert z["knn_jaccard"].shape == (len(z["words"]),) and int(z["knn_k"]) == 10
    capsys.readouterr()
    for extra, msg in ((["--animation", str(tmp_path / "x.gif")], "needs --aligned"),
                       (["--aligned", "umap", "--aligned-layers", "0,5"], "does not exist"),
                       (["--aligned", "procrustes", "--reference", "1", "--aligned-layers",
                         "0,2"], "not one of"),
                       (["--aligned", "procrustes", "--animation", str(tmp_path / "x.avi")],
                        ".gif or an .mp4")):
        code = main(base + extra + ["-o", str(tmp_path / "b.csv")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1 and msg in err[0], err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", "utf-8")
    code = main(base + ["--aligned", "procrustes", "--frames", str(tmp_path / "mine"), "--force",
                        "-o", str(tmp_path / "c.csv")])
    assert code == 1 and "is not a frames folder" in capsys.readouterr().err
    assert (tmp_path / "mine" / "notes.txt").read_text("utf-8") == "keep"
    # a fourth attack pass: the user's own frame_0000.png … (ffmpeg's naming) were deleted by
    # --force and replaced by ours; a folder output replaces only frames it wrote itself
    users = tmp_path / "users-frames"
    users.mkdir()
    for k in range(12):
        (users / f"frame_{k:04d}.png").write_bytes(b"the user's frame %d" % k)
    code = main(base + ["--aligned", "procrustes", "--frames", str(users), "--force", "--steps",
                        "2", "-o", str(tmp_path / "d.csv")])
    assert code == 1 and "is not a frames folder" in capsys.readouterr().err
    assert sorted(p.name for p in users.iterdir()) == [f"frame_{k:04d}.png" for k in range(12)]
    assert (users / "frame_0003.png").read_bytes() == b"the user's frame 3"
    ours = tmp_path / "ours"
    for force in ((), ("--force",)):              # new, then our own replaced with --force
        code = main(base + ["--aligned", "procrustes", "--frames", str(ours), "--steps", "2",
                            "-o", str(tmp_path / f"e{len(force)}.csv"), *force])
        assert code == 0, capsys.readouterr().err
        assert len(list(ours.glob("frame_*.png"))) == 5 and (ours / ".elmo-output.json").is_file()
    code = main(base + ["--aligned", "procrustes", "--frames", str(ours), "--steps", "2",
                        "-o", str(tmp_path / "f.csv")])
    assert code == 1 and "--force" in capsys.readouterr().err      # not without --force
    assert not list(tmp_path.glob(".ours.part-*"))                 # no staging left behind


def test_a_late_refusal_leaves_no_output(tmp_path, sentences, tiny_checkpoint, capsys):
    """An option that can only be checked against the model or the tokens (the TensorBoard
    layer, a trail word) is checked before the work: the command fails with nothing written
    (the coordinates CSV was written first, then the check failed)."""
    base = ["project", str(sentences), "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
            "--method", "pca", "-o", str(tmp_path / "p.csv")]
    for extra, msg in ((["--tensorboard", str(tmp_path / "tb"), "--tensorboard-layer", "9"],
                        "--tensorboard-layer '9'"),
                       (["--aligned", "procrustes", "--trails", "zzz", "--animation",
                         str(tmp_path / "a.gif")], "zzz"),
                       (["--mix-weights", "1,1"], "2 weights for a model with 3 layers"),
                       (["--mix-weights", "1,x,1"],     # parsed as every --mix-weights is
                        "--mix-weights must be comma-separated numbers, got '1,x,1'")):
        capsys.readouterr()
        assert main(base + extra) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.txt"]
    notes = tmp_path / "notes.txt"             # a fourth attack pass: a file given as the
    notes.write_text("mine\n", "utf-8")         # TensorBoard folder failed after the work
    assert main(base + ["--tensorboard", str(notes)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "notes.txt: --tensorboard names a folder" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "s.txt"]
