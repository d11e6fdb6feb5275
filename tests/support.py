"""What the tests share that is not a fixture: the repository's places, the optional data sets,
a tiny random checkpoint, small samples and the JSON-fuzz helpers. Test modules import it
(``from support import FIXTURES``); the fixtures are in ``tests/conftest.py``."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "elmo"          # vendored; see its SOURCE.md
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"


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


def write_tiny_checkpoint(folder: Path, seed: int = 0, n_layers: int = 2, **options) -> Path:
    """A small random biLM in the published layout (options.json + lm_weights.hdf5);
    ``options``: other :class:`BiLMOptions` fields (``lstm_dim=24``, …)."""
    import torch

    from elmo_engine.model.bilm import BiLM
    from elmo_engine.model.checkpoint import save_published
    from elmo_engine.model.options import BiLMOptions

    opts = BiLMOptions(**{"filters": ((1, 8), (2, 8), (3, 16)), "char_embed_dim": 4,
                          "n_highway": 1, "projection_dim": 16, "lstm_dim": 32,
                          "n_layers": n_layers, **options})
    model = BiLM(opts)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    save_published(model, folder)
    return folder
