"""Faults: a process killed (SIGKILL) at random moments while it writes.

After each kill the target is either the earlier complete file or the new complete file — never
a corrupt one, never missing — and the only thing left over is a hidden ``.NAME.*.part``
temporary file, which nothing reads and :func:`cleanup_stale_parts` removes. The workers are
forked from one server (``tests/helpers_kill.py``) so each trial costs no interpreter start-up.
Delays are drawn from a seeded generator: the same kill points on every run.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_engine.atomic import cleanup_stale_parts
from elmo_engine.model.checkpoint import load_checkpoint, model_tensors
from elmo_engine.embed.embedder import Embedder

from helpers_kill import ForkServer, cache_sentences, make_model

TRIALS = int(os.environ.get("ELMO_KILL_TRIALS", "3"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ForkServer(tmp_path_factory.mktemp("forkserver") / "server.log")
    yield srv
    srv.close()


def _strays(folder: Path, keep) -> list:
    """Files in ``folder`` other than ``keep``; each must be a hidden temporary file."""
    names = sorted(p.name for p in folder.iterdir() if p.name not in keep)
    for n in names:
        assert re.fullmatch(r"\.[^/]+\.part", n), f"unexpected file left behind: {n}"
    return names


class KillPlan:
    """Seeded kill delays: ``TRIALS`` of them, plus up to 3 more while no trial has been killed
    (a busy machine can make one run slower than the next). Delays scale with the fastest
    complete run seen, so most kills land inside the work."""

    def __init__(self, rng: random.Random, first_seconds: float):
        self.rng, self.fastest, self.killed = rng, first_seconds, 0

    def __iter__(self):
        trial = 0
        while trial < TRIALS or (not self.killed and trial < TRIALS + 3):
            yield self.rng.uniform(0.1, 0.9) * self.fastest
            trial += 1

    def record(self, result: dict) -> None:
        self.killed += result["killed"]
        if not result["killed"]:
            self.fastest = min(self.fastest, result["seconds"])

    def check(self) -> None:
        assert self.killed >= 1, "no trial was killed before it finished: the test checked nothing"


def _age(paths, seconds: float = 3600.0) -> None:
    old = time.time() - seconds
    for p in paths:
        os.utime(p, (old, old))


# ---- (a) elmo-explorer embed -----------------------------------------------------------------
def _lines(seed: int, n: int) -> list:
    rng = random.Random(seed)
    return [" ".join(f"w{rng.randrange(300)}" for _ in range(rng.randrange(6, 18))) for _ in range(n)]


def _embed_signature(path: Path, lines: list) -> str:
    """Check that ``path`` is a complete embed output for ``lines``; return its content hash."""
    h = hashlib.sha256()
    with h5py.File(path, "r") as fh:
        index = json.loads(fh["sentence_to_index"][0])
        assert index == {line: str(i) for i, line in enumerate(lines)}
        assert len(fh) == len(lines) + 1
        for i, line in enumerate(lines):
            arr = fh[str(i)][()]
            assert arr.shape == (3, len(line.split()), 32) and np.isfinite(arr).all()
            h.update(arr.tobytes())
    return h.hexdigest()


def test_kill_during_embed_output(server, tmp_path, tiny_checkpoint):
    rng = random.Random(1234)
    inputs = {}
    for name, seed in (("a", 1), ("b", 2)):
        inputs[name] = _lines(seed, 800)
        (tmp_path / f"{name}.txt").write_text("\n".join(inputs[name]) + "\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "vectors.hdf5"

    def run(name, target, kill_after=None):
        return server.run("embed", {"input": str(tmp_path / f"{name}.txt"), "output": str(target),
                                    "checkpoint": str(tiny_checkpoint)}, kill_after)

    ref = tmp_path / "ref_b.hdf5"
    assert run("b", ref)["status"] == 0
    first = run("a", out)
    assert first["status"] == 0
    sigs = {"a": _embed_signature(out, inputs["a"]), "b": _embed_signature(ref, inputs["b"])}
    current, plan = "a", KillPlan(rng, first["seconds"])
    for delay in plan:
        other = "b" if current == "a" else "a"
        result = run(other, out, kill_after=delay)
        plan.record(result)
        assert out.exists(), "the earlier output was lost"
        found, sig = None, None
        for name in (current, other):
            try:
                sig = _embed_signature(out, inputs[name])
                found = name
                break
            except AssertionError:
                continue
        assert found is not None and sig == sigs[found], "output is neither the old nor the new file"
        if not result["killed"]:                      # it finished: the new file is there
            assert result["status"] == 0 and found == other
        current = found
        _strays(out_dir, {out.name})
    plan.check()

    parts = [out_dir / n for n in _strays(out_dir, {out.name})]
    print(f"[kill] embed: {plan.killed} killed, {len(parts)} temp files left")
    fresh = out_dir / ".vectors.hdf5.fresh0001.hdf5.part"    # a write in progress elsewhere
    fresh.write_bytes(b"x")
    assert cleanup_stale_parts(out_dir, target="vectors.hdf5") == 0   # too recent to touch
    _age(parts)
    assert cleanup_stale_parts(out_dir, target="vectors.hdf5") == len(parts)
    assert _strays(out_dir, {out.name}) == [fresh.name]


# ---- (b) save_published / save_native ------------------------------------------------------------
@pytest.fixture(scope="module")
def save_refs():
    return {seed: model_tensors(make_model(seed)) for seed in (1, 2)}


def _which(tensors: dict, refs: dict) -> int:
    for seed, ref in refs.items():
        if tensors.keys() == ref.keys() and all(np.array_equal(tensors[k], ref[k]) for k in ref):
            return seed
    raise AssertionError("the saved model is neither the old nor the new one")


@pytest.mark.parametrize("fmt", ["published", "native"])
def test_kill_during_checkpoint_save(server, tmp_path, save_refs, fmt):
    rng = random.Random(77 if fmt == "published" else 78)
    folder = tmp_path / "model"
    first = server.run("save", {"folder": str(folder), "format": fmt, "seed": 1})
    assert first["status"] == 0
    files = {p.name for p in folder.iterdir()}
    assert _which(model_tensors(load_checkpoint(folder)), save_refs) == 1
    current, plan = 1, KillPlan(rng, first["seconds"])
    for delay in plan:
        other = 3 - current
        result = server.run("save", {"folder": str(folder), "format": fmt, "seed": other},
                            kill_after=delay)
        plan.record(result)
        found = _which(model_tensors(load_checkpoint(folder)), save_refs)   # loads, complete
        if not result["killed"]:                      # it finished: the new model is there
            assert result["status"] == 0 and found == other
        current = found
        _strays(folder, files)
    plan.check()
    print(f"[kill] save {fmt}: {plan.killed} killed, "
          f"{len(_strays(folder, files))} temp files left")
    _age(folder / n for n in _strays(folder, files))
    cleanup_stale_parts(folder)
    assert _strays(folder, files) == []


# ---- (c) the activation disk cache -------------------------------------------------------------
def test_kill_during_cache_writes(server, tmp_path, tiny_checkpoint):
    rng = random.Random(4321)
    cache = tmp_path / "cache"
    model = load_checkpoint(tiny_checkpoint)
    plain = Embedder(model, device="cpu")
    count = 40
    sents = cache_sentences(0, count * (TRIALS + 4))
    refs = {tuple(s): a for s, a in zip(sents, plain.embed(sents))}
    first = server.run("cache", {"checkpoint": str(tiny_checkpoint), "cache_dir": str(cache),
                                 "start": 0, "count": count})
    assert first["status"] == 0
    plan = KillPlan(rng, first["seconds"])
    for t, delay in enumerate(plan, start=1):
        plan.record(server.run("cache", {"checkpoint": str(tiny_checkpoint),
                                         "cache_dir": str(cache), "start": t * count,
                                         "count": count}, kill_after=delay))
    plan.check()

    probe = Embedder(model, device="cpu", cache_dir=cache)
    expected_files = {probe.sentence_cache.disk_file(k): k for k in refs}
    entries = [p for p in cache.rglob("*") if p.is_file()]
    npys = [p for p in entries if not p.name.startswith(".")]
    assert count <= len(npys) < len(refs)             # the first run complete, the last ones not
    for f in npys:
        assert f in expected_files, f"unexpected cache file {f}"
        arr = np.load(f, allow_pickle=False)          # every entry is a complete array
        np.testing.assert_allclose(arr, refs[expected_files[f]], rtol=0, atol=1e-6)
    for p in entries:
        if p.name.startswith("."):
            assert re.fullmatch(r"\.[0-9a-f]{64}\.npy\.[^/]+\.npy\.part", p.name), p.name

    # the next run cleans up stale temporary files and serves what the killed runs wrote
    stale = next(iter(expected_files)).parent / f".{'0' * 64}.npy.deadbeef.npy.part"
    stale.write_bytes(b"\x93NUMPY half")
    parts = [p for p in cache.rglob(".*.part")]
    print(f"[kill] cache: {plan.killed} killed, {len(npys)} entries, "
          f"{len(parts) - 1} temp files left")
    _age(parts)
    reopened = Embedder(model, device="cpu", cache_dir=cache)
    assert not list(cache.rglob("*.part"))
    done = [s for s in sents if reopened.sentence_cache.disk_file(tuple(s)).exists()]
    got = reopened.embed(done)
    assert reopened.stats["sentence_misses"] == 0
    for s, arr in zip(done, got):
        np.testing.assert_allclose(arr, refs[tuple(s)], rtol=0, atol=1e-6)
