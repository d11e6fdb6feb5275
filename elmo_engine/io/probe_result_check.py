"""Field-by-field validation of a stored probe result (``ProbeResult.to_dict()``), as a
workspace or a results file holds it, before :meth:`ProbeResult.from_dict` builds one.

Each field's type and range is checked: names are strings; the layers are a list of objects
whose ``layer`` indices are distinct integers within the mix's weights; scores are numbers in
[0, 1] (``selectivity`` in [-1, 1]); the mix's weights are finite and non-negative; counts are
non-negative integers; the free-form parts (``config``, ``history``, ``per_label``) are objects
nested at most ``MAX_DEPTH`` levels. A problem raises :class:`ResultFormatError` (a
``ValueError``) naming the key, e.g. ``layers[2].layer``.
"""
from __future__ import annotations

import math
from typing import Any

#: deepest nesting accepted in the free-form parts
MAX_DEPTH = 32
#: most layers of one result (the largest published biLM has 3 output layers)
MAX_LAYERS = 256


class ResultFormatError(ValueError):
    """A stored probe result with a missing key, a wrong type or a value out of range."""


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _fail(key: str, want: str, v: Any) -> ResultFormatError:
    return ResultFormatError(f"key '{key}' must be {want}, found {_kind(v)}"
                             + (f" {v!r}" if isinstance(v, (int, float)) and not isinstance(v, bool)
                                else ""))


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _num(d: dict, key: str, where: str, lo=None, hi=None, optional: bool = False):
    if key not in d and not optional:
        raise ResultFormatError(f"key '{where}{key}' is missing")
    v = d.get(key)
    if v is None and optional:
        return None
    want = "a number" + (f" in [{lo}, {hi}]" if lo is not None else "")
    if not _is_num(v) or (lo is not None and not lo <= v <= hi):
        raise _fail(where + key, want, v)
    return v


def _typed(d: dict, key: str, typ, where: str, want: str):
    if key not in d:
        raise ResultFormatError(f"key '{where}{key}' is missing")
    v = d[key]
    if not isinstance(v, typ):
        raise _fail(where + key, want, v)
    return v


def check_depth(obj: Any, key: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` levels (iterative: no recursion)."""
    stack = [(obj, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth >= limit:
                raise ResultFormatError(f"key '{key}' is nested deeper than {limit} levels")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))


def check_result_dict(d: Any) -> None:
    """Raise :class:`ResultFormatError` unless ``d`` is a well-typed stored probe result."""
    if not isinstance(d, dict):
        raise ResultFormatError(f"a probe result must be an object, found {_kind(d)}")
    for key in ("task", "name", "label", "model"):
        _typed(d, key, str, "", "a string")
    if not isinstance(d.get("description", ""), str):
        raise _fail("description", "a string", d["description"])
    mix = _typed(d, "mix", dict, "", "an object")
    weights = _typed(mix, "weights", list, "mix.", "a list")
    if not 1 <= len(weights) <= MAX_LAYERS:
        raise ResultFormatError(f"key 'mix.weights' must list 1 to {MAX_LAYERS} weights, "
                                f"found {len(weights)}")
    for i, w in enumerate(weights):
        if not _is_num(w) or w < 0:
            raise _fail(f"mix.weights[{i}]", "a non-negative number", w)
    _num(mix, "gamma", "mix.")
    _scores(mix, "mix.")
    cw = mix.get("control_weights")
    if cw is not None:
        if not isinstance(cw, list) or len(cw) != len(weights) or not all(
                _is_num(w) and w >= 0 for w in cw):
            raise _fail("mix.control_weights", f"a list of {len(weights)} non-negative numbers",
                        cw)
    layers = _typed(d, "layers", list, "", "a list")
    if not 1 <= len(layers) <= len(weights):
        raise ResultFormatError(f"key 'layers' must hold 1 to {len(weights)} entries (one per "
                                f"mix weight), found {len(layers)}")
    seen = set()
    for i, e in enumerate(layers):
        where = f"layers[{i}]."
        if not isinstance(e, dict):
            raise _fail(f"layers[{i}]", "an object", e)
        lay = e.get("layer")
        if not isinstance(lay, int) or isinstance(lay, bool) or not 0 <= lay < len(weights) \
                or lay in seen:
            raise _fail(where + "layer", f"a distinct integer from 0 to {len(weights) - 1}", lay)
        seen.add(lay)
        _scores(e, where)
        per_label = e.get("per_label", {})
        if not isinstance(per_label, dict):
            raise _fail(where + "per_label", "an object", per_label)
        check_depth(per_label, where + "per_label")
    for key, lo in (("baselines", None), ("counts", 0), ("timings", 0)):
        sub = d.get(key, {})
        if key != "timings" or key in d:
            sub = _typed(d, key, dict, "", "an object")
        for k, v in sub.items():
            ok = _is_num(v) and (lo is None or v >= lo)
            if key == "counts":
                ok = ok and isinstance(v, int)
            if not ok:
                raise _fail(f"{key}.{k}", "a non-negative integer" if key == "counts"
                            else "a number", v)
    for key in ("config", "history"):
        check_depth(_typed(d, key, dict, "", "an object"), key)
    _num(d, "wall_time_s", "", optional=True)


def _scores(e: dict, where: str) -> None:
    for key in ("dev", "test", "macro_f1"):
        _num(e, key, where, 0, 1)
    for key in ("centroid_test", "control_test"):
        _num(e, key, where, 0, 1, optional=True)
    _num(e, "selectivity", where, -1, 1, optional=True)
