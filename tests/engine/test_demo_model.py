"""The bundled demo biLM: it loads, gives the recorded activations, and separates word senses
in its upper layers (layer 0 is the same for the same spelling)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_engine.model.chars import batch_to_ids
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.resources import demo_checkpoint_available, demo_checkpoint_path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "data" / "demo_model_expected.npz"

pytestmark = pytest.mark.skipif(not demo_checkpoint_available(),
                                reason=f"demo model not installed at {demo_checkpoint_path()}")

BANK_RIVER = ["They walked along the bank of the river .",
              "The boat was pulled onto the muddy bank of the stream ."]
BANK_MONEY = ["She deposited her money in the bank .",
              "The bank raised its interest rates on loans ."]


def _recorder():
    spec = importlib.util.spec_from_file_location("make_demo_expected", HERE / "data" / "make_demo_expected.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def model():
    return load_checkpoint(demo_checkpoint_path())


def test_bundle_is_complete(model):
    folder = demo_checkpoint_path()
    for name in ("options.json", "lm_weights.hdf5", "vocab.txt", "training.json", "README.md",
                 "softmax.safetensors", "ATTRIBUTION.txt", "LICENSE-CC-BY-4.0.txt",
                 "LICENSE-CC0-pd_fiction.txt"):
        assert (folder / name).is_file(), name
    assert (folder / "lm_weights.hdf5").stat().st_size <= 25 * 1024 * 1024
    meta = json.loads((folder / "training.json").read_text("utf-8"))
    assert meta["dev_perplexity"]["mean"] > 1 and meta["command"].startswith("elmo-explorer train-lm")
    readme = (folder / "README.md").read_text("utf-8")
    assert "CC BY 4.0" in readme and "Standard Ebooks" in readme
    # trained on both corpora, evaluated on both valid files
    assert set(meta["dev_perplexity"]["sets"]) == {"openstax_prose/valid.txt", "pd_fiction/valid.txt"}
    assert model.opts.n_layers == 2 and model.info.format == "published"


def test_recorded_activations(model):
    rec = np.load(EXPECTED, allow_pickle=False)
    folder = demo_checkpoint_path()
    mod = _recorder()
    assert str(rec["weights_sha256"]) == mod.sha256(folder / "lm_weights.hdf5"), (
        "the demo weights changed: re-run tests/engine/data/make_demo_expected.py")
    sentences = [str(s) for s in rec["sentences"]]
    got = mod.activations(model, sentences)
    for i, arr in enumerate(got):
        want = rec[f"act_{i}"]
        assert arr.shape == want.shape == (3, len(sentences[i].split()), 2 * model.opts.output_dim)
        np.testing.assert_allclose(arr, want, atol=1e-5, rtol=0, err_msg=sentences[i])


def _word_vectors(model, sentences, word):
    out = []
    with torch.no_grad():
        for s in sentences:
            toks = s.split()
            layers, _, _ = model(torch.from_numpy(batch_to_ids([toks])))
            out.append(layers[:, 0, toks.index(word) + 1])              # (L+1, 2P)
    return torch.stack(out, 1)                                          # (L+1, n, 2P)


def _cos(a, b):
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def test_bank_senses_separate_in_upper_layers(model):
    river = _word_vectors(model, BANK_RIVER, "bank")
    money = _word_vectors(model, BANK_MONEY, "bank")
    # layer 0 is context-free: the same spelling gives the same vector
    assert torch.allclose(river[0, 0], money[0, 0], atol=1e-6)
    for layer in (1, 2):
        same = (_cos(river[layer, 0], river[layer, 1]) + _cos(money[layer, 0], money[layer, 1])) / 2
        cross = np.mean([_cos(r, m) for r in river[layer] for m in money[layer]])
        assert same > cross, (layer, same, cross)
        assert cross < 1 - 1e-3
