"""The app's folders are its layers, checked statically (every import statement, lazy ones
inside functions included, read with :mod:`ast`; no Qt needed):

- ``common`` → ``state`` → ``views`` → ``persistence`` → ``shell`` → ``entry``: a module imports
  only app modules of its own layer or the layers before it;
- a view package (``views/<name>/``) imports no other view package (shared pieces live in
  ``views/`` itself), and its ``model.py`` imports neither Qt nor the view's widgets;
- no part of a view imports the view's controller (a collaborator takes values and returns
  values; it does not hold the panel it was cut from), nor does persistence import its owner;
- the views are imported by name (``shell/views.py``), never through ``importlib``.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

ROOT = Path(__file__).resolve().parents[2] / "app" / "elmo_explorer"
ORDER = ("common", "state", "views", "persistence", "shell", "entry")
QT = ("PySide6", "shiboken6", "pyqtgraph", "superqt", "qtpy", "PyQt5", "PyQt6")


def app_modules() -> Iterator[Tuple[str, Path]]:
    for f in sorted(ROOT.rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(["elmo_explorer", *parts]), f


def imports(path: Path) -> List[Tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "entry"


def test_every_module_is_in_a_layer():
    names = [m for m, _ in app_modules()]
    assert len(names) > 40
    assert {layer(m) for m in names} - {"entry"} <= set(ORDER) | {"elmo_explorer"}
    assert [m for m in names if layer(m) not in ORDER and m != "elmo_explorer"] == []


def test_imports_run_down_the_layers_only():
    bad = []
    for mod, f in app_modules():
        if mod == "elmo_explorer":
            continue
        rank = ORDER.index(layer(mod))
        for line, name in imports(f):
            if name.split(".")[0] == "elmo_explorer" and name.count(".") >= 1:
                target = layer(name)
                if target in ORDER and ORDER.index(target) > rank:
                    bad.append(f"{mod}:{line} ({layer(mod)}) imports {name} ({target})")
    assert bad == []


def test_a_view_imports_no_other_view():
    bad = []
    for mod, f in app_modules():
        parts = mod.split(".")
        if parts[1:2] != ["views"] or len(parts) < 4:
            continue
        for line, name in imports(f):
            other = name.split(".")
            if other[:2] == ["elmo_explorer", "views"] and len(other) >= 3 \
                    and (ROOT / "views" / other[2]).is_dir() and other[2] != parts[2]:
                bad.append(f"{mod}:{line} imports {name}")
    assert bad == []


def test_view_models_import_neither_qt_nor_widgets():
    models = sorted(ROOT.glob("views/*/model.py"))
    assert {f.parent.name for f in models} >= {"contexts", "projection", "probes", "layers"}
    bad = [f"{f.parent.name}/model.py:{line} imports {name}" for f in models
           for line, name in imports(f)
           if name.split(".")[0] in QT or name.endswith((".view", ".controller", ".widgets"))]
    assert bad == []


def test_views_are_imported_by_name():
    bad = [f"{mod}:{line}" for mod, f in app_modules() for line, name in imports(f)
           if name == "importlib" or name.startswith("importlib.import_module")]
    assert bad == []


def test_no_collaborator_reaches_back_to_its_owner():
    owners = {"controller": "the panel", "workspace_actions": "WorkspaceActions"}
    bad = []
    for mod, f in app_modules():
        parts = mod.split(".")
        if parts[1:2] not in (["views"], ["persistence"]) or parts[-1] in owners:
            continue
        bad += [f"{mod}:{line} imports {name}" for line, name in imports(f)
                if name.split(".")[-1] in owners or ".controller." in name
                or ".workspace_actions." in name]
    assert bad == []
