"""docs/guide/python-api.md is a doctest (issue 29 item 7): its five lines run with the bundled
demo model and print the numbers the app's comparison (``compare_word``, which the Contexts view
and ``elmo-explorer contexts`` call) gives for the same sentences."""
from __future__ import annotations

import doctest
import re

import numpy as np

import elmo_engine as ee
from elmo_engine.analysis.contexts.compare import compare_word

from support import REPO

PAGE = REPO / "docs" / "guide" / "python-api.md"
TEXTS = ["He sat on the bank of the river.", "We fished from the bank of the stream.",
         "She went to the bank to pay in a cheque."]


def test_the_python_api_page_runs_as_written():
    result = doctest.testfile(str(PAGE), module_relative=False, optionflags=doctest.ELLIPSIS,
                              verbose=False, report=True)
    assert result.attempted >= 10, result
    assert result.failed == 0, result


def _printed_cosines():
    """The page's printed table ``k river·stream river·money`` as floats."""
    text = PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^([0-2]) ([0-9.]+) ([0-9.]+)$", text, flags=re.M)
    assert len(rows) == 3
    return np.array([[float(a), float(b)] for _, a, b in rows])


def test_the_page_numbers_are_the_apps_comparison():
    emb = ee.load()
    tokens = [ee.tokenize(t) for t in TEXTS]
    acts = emb.embed(tokens)
    comp, vectors, total = compare_word(tokens, acts, "bank", weights=[0.2, 0.3, 0.5])
    assert total == 3 and comp.occurrences == ((0, 4), (1, 4), (2, 4))
    table = np.array([[comp.matrices[k][0, 1], comp.matrices[k][0, 2]] for k in range(3)])
    np.testing.assert_allclose(np.round(table, 2), _printed_cosines(), atol=1e-9)
    assert table[2, 0] > table[2, 1] + 0.05          # the river's bank is nearer the stream's
    # ee.mix is the comparison's mix view (raw layers, layer_norm off)
    mixed = [ee.mix(a, [0.2, 0.3, 0.5]) for a in acts]
    np.testing.assert_allclose(ee.cosine(mixed[0][4], mixed[2][4]), comp.matrices[3][0, 2],
                               atol=1e-6)
