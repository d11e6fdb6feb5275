"""Field-by-field validation of a ``layers --json`` document, as ``report --layers-json`` reads
it and a workspace holds it (``views["layers"]["result"]``), before a report draws it.

Checked are the parts the report and its figures read: ``model`` and ``corpus`` objects (when
present); ``contextuality.layers``, a list of at most :data:`MAX_LAYERS` objects, each with an
integer ``layer`` and a ``directions`` object whose entries hold the three measures
(``self_similarity``, ``intra_sentence_similarity``, ``max_explainable_variance``), each an
object whose ``value`` and ``baseline`` are numbers or null; and ``cka``, an object whose
``matrix`` (when present and not empty) is a grid of numbers or nulls matching its
``rows`` and ``columns`` labels, at most :data:`MAX_LAYERS` a side. A problem raises
:class:`LayersFormatError` (a ``ValueError``) naming the key, e.g.
``contextuality.layers[1].directions.forward.self_similarity`` (issue 38: such a document ended
in AttributeError or KeyError).
"""
from __future__ import annotations

import math
from typing import Any

from elmo_engine.io.probe_result_check import _kind

#: most layers of a document, and the largest side of its CKA matrix (the report annotates
#: every cell)
MAX_LAYERS = 64
#: the measures every direction of a layer holds (as :data:`elmo_engine.io.figures.layers.MEASURES`)
MEASURE_KEYS = ("self_similarity", "intra_sentence_similarity", "max_explainable_variance")


class LayersFormatError(ValueError):
    """A ``layers --json`` document with a missing key or a wrong type."""


def _fail(key: str, want: str, v: Any) -> LayersFormatError:
    return LayersFormatError(f"key '{key}' must be {want}, found {_kind(v)}")


def _number_or_null(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                         and not (isinstance(v, float) and math.isinf(v)))


def _object(d: dict, key: str, where: str, optional: bool = False) -> Any:
    v = d.get(key)
    if v is None and optional:
        return {}
    if key not in d:
        raise LayersFormatError(f"key '{where}{key}' is missing")
    if not isinstance(v, dict):
        raise _fail(f"{where}{key}", "an object", v)
    return v


def check_layers_document(doc: Any) -> None:
    """Raise :class:`LayersFormatError` naming the first key that does not hold what the report
    reads (see the module docstring)."""
    if not isinstance(doc, dict):
        raise LayersFormatError(f"the document must be an object, found {_kind(doc)}")
    _object(doc, "model", "", optional=True)
    _object(doc, "corpus", "", optional=True)
    ctx = _object(doc, "contextuality", "")
    layers = ctx.get("layers")
    if not isinstance(layers, list):
        raise _fail("contextuality.layers", "a list", layers)
    if len(layers) > MAX_LAYERS:
        raise LayersFormatError(f"key 'contextuality.layers' holds {len(layers):,} layers; at "
                                f"most {MAX_LAYERS} are read")
    for i, e in enumerate(layers):
        where = f"contextuality.layers[{i}]"
        if not isinstance(e, dict):
            raise _fail(where, "an object", e)
        if not isinstance(e.get("layer"), int) or isinstance(e.get("layer"), bool):
            raise _fail(f"{where}.layer", "an integer", e.get("layer"))
        dirs = _object(e, "directions", f"{where}.")
        for d, vals in dirs.items():
            if not isinstance(vals, dict):
                raise _fail(f"{where}.directions.{d}", "an object", vals)
            for key in MEASURE_KEYS:
                m = _object(vals, key, f"{where}.directions.{d}.")
                for part in ("value", "baseline"):
                    if not _number_or_null(m.get(part)):
                        raise _fail(f"{where}.directions.{d}.{key}.{part}",
                                    "a finite number or null", m.get(part))
    cka = _object(doc, "cka", "")
    _check_cka(cka)


def _check_cka(cka: dict) -> None:
    matrix = cka.get("matrix")
    if matrix is None or matrix == []:
        return
    if not isinstance(matrix, list):
        raise _fail("cka.matrix", "a list of rows", matrix)
    rows, cols = cka.get("rows"), cka.get("columns")
    for key, labels in (("rows", rows), ("columns", cols)):
        if not isinstance(labels, list):
            raise _fail(f"cka.{key}", "a list of labels", labels)
        if len(labels) > MAX_LAYERS:
            raise LayersFormatError(f"key 'cka.{key}' holds {len(labels):,} labels; at most "
                                    f"{MAX_LAYERS} are read")
    assert isinstance(rows, list) and isinstance(cols, list)
    if len(matrix) != len(rows):
        raise LayersFormatError(f"key 'cka.matrix' has {len(matrix)} rows for {len(rows)} "
                                "labels in 'cka.rows'")
    for i, row in enumerate(matrix):
        if not isinstance(row, list) or len(row) != len(cols):
            raise _fail(f"cka.matrix[{i}]", f"a list of {len(cols)} numbers", row)
        for j, v in enumerate(row):
            if not _number_or_null(v):
                raise _fail(f"cka.matrix[{i}][{j}]", "a finite number or null", v)
    if not isinstance(cka.get("estimator"), str):
        raise _fail("cka.estimator", "a string", cka.get("estimator"))


__all__ = ["LayersFormatError", "MAX_LAYERS", "check_layers_document"]
