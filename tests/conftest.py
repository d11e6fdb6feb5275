"""Test setup shared by every test: offscreen Qt, the fixtures, the optional data sets, the
process-wide settings, small torch thread use.

``tests/engine/`` tests the engine and never imports Qt (CI runs it again in a venv without
PySide6); ``tests/app/`` tests the desktop app (pytest-qt, offscreen). The published test
checkpoints are vendored under ``tests/fixtures/elmo/``; only the large data sets are read from
``../shared/data`` beside the checkout, and the tests that need them skip, saying so, when it is
not there.
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from elmo_engine import runtime

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "elmo"          # vendored; see its SOURCE.md
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"

runtime.configure()          # as every entry point does: strict float32 (see elmo_engine.runtime)


def pytest_collection_finish(session):
    """The app's tests run under the app's process-wide settings (elmo_explorer.shell.startup): the
    short GIL switch interval its responsiveness tests depend on. Torch's thread count is left
    as the engine's tests have it."""
    if any(item.nodeid.startswith("tests/app/") for item in session.items):
        from elmo_explorer.shell.startup import GIL_SWITCH_S

        runtime.configure(gil_switch_s=GIL_SWITCH_S)


def json_paths(obj, prefix=()):
    """Every path into a JSON-like object (dict keys and list indexes), the root ``()`` first:
    the places the fuzz tests mutate."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from json_paths(v, prefix + (i,))


def json_values(leaf):
    """A hypothesis strategy of JSON-like values built from ``leaf`` values: lists and
    string-keyed dicts of them, at most 12 leaves (what the fuzz tests write into a document)."""
    from hypothesis import strategies as st

    return st.recursive(
        leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids,
                                                                          max_size=4),
        max_leaves=12)


def mutate_json(draw, doc, paths, value):
    """Edit the JSON-like ``doc`` 1–3 times with hypothesis's ``draw``: at a place drawn from
    ``paths`` (:func:`json_paths` of the original), set a value drawn from the strategy ``value``
    or delete the entry; the root path replaces the whole document. Returns the edited document
    (edited in place, unless the root was replaced)."""
    from hypothesis import strategies as st

    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        if not path:
            doc = draw(value)
            continue
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.sampled_from(["set", "set", "delete"])) == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(value)
        except (KeyError, IndexError, TypeError):
            continue                               # an earlier edit removed the place
    return doc


def need(path: Path) -> Path:
    """Return ``path`` (a file of the optional data sets in ../shared/data) or skip the test,
    saying what is missing and why."""
    if not path.exists():
        pytest.skip(f"optional data set not found: {path} (a large data set kept outside the "
                    "repository; put the shared data folder beside the checkout as ../shared)")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return need(DATA)


# ---- Qt app fixtures (app helper) ----------------------------------------------------------
@pytest.fixture(autouse=True)
def _never_user_settings(tmp_path_factory, monkeypatch):
    """Every test keeps the app's settings and logs in a temporary folder, never the user's."""
    monkeypatch.setenv("ELMO_EXPLORER_SETTINGS_DIR", str(tmp_path_factory.getbasetemp() / "app-settings"))


@pytest.fixture
def app_settings_dir(tmp_path, monkeypatch) -> Path:
    """A per-test settings + data folder; the user's real QSettings are never touched."""
    folder = tmp_path / "settings"
    folder.mkdir()
    monkeypatch.setenv("ELMO_EXPLORER_SETTINGS_DIR", str(folder))
    return folder


#: a WSD-framework corpus (Raganato et al. 2017 XML) of one sentence with two instances, one of
#: them multi-word, and its gold keys (the WSD reader's tests and the readers' fuzz seeds)
WSD_XML = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="test">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="the" pos="DET">The</wf>
<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>
<instance id="d000.s000.t001" lemma="take_place" pos="VERB">took place</instance>
<wf lemma="." pos=".">.</wf>
</sentence>
</text>
</corpus>
"""
WSD_KEYS = "d000.s000.t000 bank%1:14:00:: bank%1:14:01::\nd000.s000.t001 take_place%2:30:00::\n"

#: a small corpus for the layers analyses (CLI and tab tests)
LAYERS_SENTENCES = [
    "the bank of the river was steep .",
    "she sat on the bank and watched the river .",
    "the bank raised its rates .",
    "he paid the money into the bank .",
    "the river ran past the old mill .",
    "they played a game by the river .",
    "the children played in the garden .",
    "money is not the only thing .",
]


def write_tiny_checkpoint(folder: Path, seed: int = 0, n_layers: int = 2) -> Path:
    """A small random biLM in the published layout (options.json + lm_weights.hdf5)."""
    import torch

    from elmo_engine.model.bilm import BiLM
    from elmo_engine.model.checkpoint import save_published
    from elmo_engine.model.options import BiLMOptions

    opts = BiLMOptions(filters=((1, 8), (2, 8), (3, 16)), char_embed_dim=4, n_highway=1,
                       projection_dim=16, lstm_dim=32, n_layers=n_layers)
    model = BiLM(opts)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    save_published(model, folder)
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """Folder of a tiny random checkpoint (2 LSTM layers, P=16), made once per session."""
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ckpt"))


@pytest.fixture(scope="session")
def torch_one_thread():
    """One intra-op torch thread: on a shared 2-core machine more threads are ~10x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def make_checkpoint():
    """``make_checkpoint(folder, seed=0, n_layers=2)``: another tiny random checkpoint."""
    return write_tiny_checkpoint


@pytest.fixture(scope="session")
def layers_sentences():
    """The small corpus of the layers analyses (:data:`LAYERS_SENTENCES`)."""
    return list(LAYERS_SENTENCES)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
