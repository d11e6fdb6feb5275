"""Commands that answer at once (issue 39): ``--version``, ``--help``, a usage error and an output
that exists answer before torch (or numpy, scipy, h5py, matplotlib, faiss, umap) is imported;
torch's process settings still apply to every command that loads it.

Each check runs the command in a fresh interpreter with ``-X importtime``, which lists every
module the process imported on stderr (one ``import time:`` line each). The timings themselves
are measured by benchmarks/bench_startup.py (docs/performance.md, "Start-up").
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO
from import_check import heavy, run_importtime

def test_version_loads_no_heavy_library():
    code, out, err, imported = run_importtime(["--version"])
    assert code == 0 and out.strip() and err == ""
    assert heavy(imported) == []


def test_help_and_a_command_help_load_no_heavy_library():
    code, out, _err, imported = run_importtime(["--help"])
    assert code == 0 and heavy(imported) == []
    for command in ("embed", "export", "contexts", "layers", "probe", "wsd-nn"):
        assert f"    {command} " in out
    code, out, _err, imported = run_importtime(["export", "vectors", "--help"])
    assert code == 0 and "--format" in out and heavy(imported) == []


def test_a_usage_error_loads_no_heavy_library():
    code, out, err, imported = run_importtime(["embed"])
    assert code == 2 and out == "" and "required" in err
    assert heavy(imported) == []


@pytest.mark.parametrize("command", [
    ["embed", "{input}", "-o", "{existing}"],
    ["export", "vectors", "{input}", "-o", "{existing}"],
    ["layers", "{input}", "--words-csv", "{existing}"],
    ["probe", "--task", "pos", "-o", "{existing}"],
    ["chars", "filters", "--figure", "{existing}"],
    ["chars", "blorft", "-o", "{existing}"],
])
def test_an_output_that_exists_is_refused_before_torch_loads(tmp_path: Path, command):
    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank .\n", encoding="utf-8")
    existing = tmp_path / "out.hdf5"
    existing.write_bytes(b"keep me")
    args = [a.format(input=text, existing=existing) for a in command]
    code, out, err, imported = run_importtime(args)
    assert code == 1 and out == ""
    assert err.strip() == f"elmo-explorer: error: {existing} exists; pass --force to overwrite it"
    assert existing.read_bytes() == b"keep me"
    assert heavy(imported) == []


@pytest.mark.parametrize("command", [
    ["embed", "{missing}", "-o", "{out}"],
    ["export", "vectors", "{missing}", "-o", "{out}"],
    ["layers", "{missing}"],
    ["contexts", "--word", "bank", "--sentences", "{missing}"],
    ["index", "{text}", "{missing}", "-o", "{out}"],
    ["wsd-nn", "--train", "{text}", "--test", "{missing}"],
    ["report", "{missing}", "--word", "bank", "-o", "{out}"],
    ["search", "{missing}", "--word", "bank", "--sentence", "the bank"],
])
def test_a_missing_input_is_refused_before_torch_loads(tmp_path: Path, command):
    """A misspelt input file (or index folder) answers at once, worded as the readers word it
    (it took 2 s, importing torch and loading the model first)."""
    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank .\n", encoding="utf-8")
    missing = tmp_path / "no_such.txt"
    args = [a.format(text=text, missing=missing, out=tmp_path / "out") for a in command]
    code, out, err, imported = run_importtime(args)
    assert code == 1 and out == ""
    want = ("is not a corpus index (no index.json); build one with 'elmo-explorer index'"
            if command[0] == "search" else "cannot open: No such file or directory")
    assert err.strip() == f"elmo-explorer: error: {missing}: {want}"
    assert heavy(imported) == [] and not (tmp_path / "out").exists()


def test_a_probe_task_without_its_files_is_refused_before_torch_loads(tmp_path: Path):
    text = tmp_path / "in.conllu"
    text.write_text("1\tThe\t_\tDET\t_\t_\t0\tdep\t_\t_\n\n", encoding="utf-8")
    for extra, flag in ((["--task", "pos", "--train", str(text)], "--test"),
                        (["--task", "wsd", "--train", str(text), "--test", str(text)],
                         "--train-keys")):
        code, out, err, imported = run_importtime(["probe", *extra])
        assert code == 1 and out == "" and heavy(imported) == []
        assert err.strip() == f"elmo-explorer: error: --task {extra[1]} needs {flag}"


def test_embed_and_export_read_their_input_before_torch_loads(tmp_path: Path):
    """In fp32 (the default) ``embed`` and ``export vectors`` read their input before they
    import torch: an absent word or a malformed line answers at once. (bf16 and fp16 that the
    CPU may run ask the device first, which needs torch.)"""
    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank .\n", encoding="utf-8")
    code, out, err, imported = run_importtime(["export", "vectors", str(text), "--word", "zzz",
                                               "-o", str(tmp_path / "v.npz")])
    assert code == 1 and "'zzz' does not occur" in err and heavy(imported) == ["numpy"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\n")
    code, out, err, imported = run_importtime(["embed", str(bad), "-o", str(tmp_path / "e.h5")])
    assert code == 1 and "bad.txt:1" in err and "torch" not in heavy(imported)
    from elmo_engine.embed.device import pick_device

    try:                                                 # a device named: asked first
        pick_device("cuda")
    except Exception as e:                               # no GPU here: its line, not the file's
        code, out, err, imported = run_importtime(["embed", str(bad), "-o",
                                                   str(tmp_path / "e.h5"), "--device", "cuda"])
        assert code == 1 and str(e) in err and "bad.txt" not in err


def test_a_precision_the_cpu_cannot_run_is_refused_before_torch_loads(tmp_path: Path):
    """fp16 on the CPU is refused at once (it took 1.8 s, importing torch to ask the device);
    the line is the one torch's check gives."""
    from elmo_engine import runtime

    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank .\n", encoding="utf-8")
    code, out, err, imported = run_importtime(["embed", str(text), "-o", str(tmp_path / "e.h5"),
                                               "--precision", "fp16", "--device", "cpu"])
    assert code == 1 and heavy(imported) == []
    assert err.strip() == f"elmo-explorer: error: {runtime.FP16_ON_CPU}"
    assert not (tmp_path / "e.h5").exists()


def test_bf16_is_refused_early_only_where_the_run_is_certainly_on_a_cpu_without_units(
        monkeypatch):
    import argparse

    from elmo_engine import runtime
    from elmo_engine.cli.common import refuse_unoffered_precision
    from elmo_engine.errors import InputError

    def args(precision, device="auto", merge=False):
        return argparse.Namespace(precision=precision, device=device, merge=merge)

    monkeypatch.setattr(runtime, "_cpu_flags_and_model", lambda: ({"avx2"}, "Test CPU"))
    monkeypatch.setattr(runtime, "gpu_possible", lambda: False)
    with pytest.raises(InputError, match=r"bf16 needs a CPU with bf16 units .*\(Test CPU\) has"):
        refuse_unoffered_precision(args("bf16"))
    with pytest.raises(InputError, match="fp16 is only offered on a GPU"):
        refuse_unoffered_precision(args("fp16", "cpu"))
    refuse_unoffered_precision(args("fp32", "cpu"))
    refuse_unoffered_precision(args("bf16", "cuda"))          # torch decides (a GPU may be there)
    refuse_unoffered_precision(args(None))                    # train-lm's default
    refuse_unoffered_precision(args("bf16", "cpu", merge=True))   # index --merge computes nothing
    monkeypatch.setattr(runtime, "gpu_possible", lambda: True)
    refuse_unoffered_precision(args("fp16"))                  # auto may pick the GPU
    with pytest.raises(InputError, match="fp16"):
        refuse_unoffered_precision(args("fp16", "cpu"))
    monkeypatch.setattr(runtime, "_cpu_flags_and_model",
                        lambda: ({"avx512f", "avx512_bf16"}, "Test CPU"))
    refuse_unoffered_precision(args("bf16", "cpu"))           # the flags show units: torch's check


def test_a_gpu_is_possible_unless_torch_is_a_cpu_build_or_no_driver_shows_one(monkeypatch):
    """WSL2 (``/dev/dxg``) and ROCm (``/dev/kfd``) count as GPUs; a ``+cpu`` torch never has
    one."""
    import glob
    import os
    from importlib import metadata

    from elmo_engine import runtime

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(metadata, "version", lambda name: "2.13.0")         # a CUDA build
    devices: set = set()
    monkeypatch.setattr(glob, "glob", lambda pattern: [p for p in devices if p.startswith(
        pattern.split("[")[0].split("*")[0])])
    monkeypatch.setattr(os.path, "exists", lambda p: p in devices)
    assert not runtime.gpu_possible()
    for device in ("/dev/nvidia0", "/proc/driver/nvidia/gpus/0000:01:00.0", "/dev/dxg",
                   "/dev/kfd"):
        devices.clear()
        devices.add(device)
        assert runtime.gpu_possible(), device
    monkeypatch.setattr(metadata, "version", lambda name: "2.13.0+cpu")
    assert not runtime.gpu_possible()
    monkeypatch.setattr(sys, "platform", "win32")
    assert not runtime.gpu_possible()
    monkeypatch.setattr(metadata, "version", lambda name: "2.13.0")
    assert runtime.gpu_possible()                                           # cannot tell


@pytest.mark.parametrize("command, line", [
    (["index", "{text}", "-o", "{tmp}/idx", "--layer", "7"],
     "--layer: this model has layers 0–2, got '7'"),
    (["units", "top", "{text}", "--unit", "99999", "--layer", "0", "--state", "c"],
     "--unit 99999: c has units 0 … 511"),
    (["units", "pattern", "{text}", "--sentence", "a b", "--span", "1:1", "--layer", "9"],
     "--layer 9: the model has LSTM layers 0 … 1"),
    (["units", "rank", "--demo", "pos", "--layer", "4"],
     "--layer 4: the model has LSTM layers 0 … 1"),
    (["units", "ablate", "--layer", "3"], "--layer 3: the model has LSTM layers 0 … 1"),
])
def test_a_layer_or_unit_the_model_lacks_is_refused_before_torch_loads(tmp_path: Path, command,
                                                                        line):
    """The sizes come from the checkpoint's options file (the bundled model's here): a layer or
    a unit it does not have answers at once (it took ~2 s, loading torch and the weights)."""
    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank .\n", encoding="utf-8")
    argv = [a.format(text=text, tmp=tmp_path) for a in command]
    code, out, err, imported = run_importtime(argv)
    assert code == 1 and "torch" not in heavy(imported), (err, heavy(imported))
    assert err.strip() == f"elmo-explorer: error: {line}"


def test_senses_needs_no_semcor_keys_without_semcor(tmp_path: Path, monkeypatch):
    """``--semcor-keys`` defaults to the shared data only in ``--semcor`` mode: an install
    without ../shared runs ``senses INDEX`` (its default was checked as a missing input)."""
    from elmo_engine.cli import build_parser

    from elmo_engine.cli.senses import SEMCOR_KEYS

    parser = build_parser(["senses"])
    args = parser.parse_args(["senses", str(tmp_path), "--word", "bank"])
    assert args.semcor_keys is None
    # with --semcor its default keys come along, so that a missing file is refused before torch
    assert parser.parse_args(["senses", "--semcor"]).semcor_keys == SEMCOR_KEYS
    mine = tmp_path / "keys.txt"
    for argv in (["--semcor-keys", str(mine), "--semcor"], ["--semcor", "--semcor-keys", str(mine)]):
        assert parser.parse_args(["senses", *argv]).semcor_keys == mine
    code, out, err, imported = run_importtime(["senses", "--semcor", str(tmp_path / "x.xml"),
                                               "--semcor-keys", str(mine)])
    assert code == 1 and "cannot open" in err and heavy(imported) == []


def test_torch_settings_apply_when_a_command_loads_torch():
    """configure_on_import: the settings :func:`elmo_engine.runtime.configure` makes are in
    place once torch is imported after it (cuDNN's TF32 is on by torch's default)."""
    code = ("import sys\n"
            "from elmo_engine import runtime\n"
            "runtime.configure_on_import()\n"
            "assert 'torch' not in sys.modules\n"
            "import torch\n"
            "print(torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,\n"
            "      torch.get_float32_matmul_precision())\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "highest"]
