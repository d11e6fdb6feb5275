"""The import contract, checked statically: every import statement of every module (lazy ones
inside functions included, and module names handed to ``importlib.import_module``) is read from
the source with :mod:`ast`, so an import that only runs in some code path is caught too.

1. The engine (``elmo_engine``) imports neither Qt (PySide6, shiboken6, pyqtgraph, superqt,
   qtpy, PyQt) nor the app (``elmo_explorer``).
2. The engine's layers import downwards only:
   ``cli`` → ``analysis`` | ``train`` → ``io`` → ``embed`` → ``model`` → the foundation
   (``errors``, ``progress``, ``atomic``, ``runtime``, ``sharing``, ``resources``); ``analysis`` and
   ``train`` do not import each other. (``python -m elmo_engine.train``, a program, may call
   its command line; ``analysis.report``, which gathers every view's part of a report, takes
   the Corpus view's from ``index.report``.)
3. The app never imports the engine's command line (``elmo_engine.cli``), except its one entry
   point, ``elmo_explorer.entry``, which dispatches to it.
4. Nothing imports the folders by their names (``app``, ``resources``): the installed import
   names are ``elmo_explorer`` and ``elmo_engine.resources``.
5. The engine's tests import neither Qt nor the app (CI runs them where PySide6 is not
   installed).
6. The app's view models (``app/elmo_explorer/views/*/model.py``) import no Qt: a view's state is
plain
   Python, its widgets live in the view.
7. Inside ``analysis``, each analysis is a package (``contexts``, ``layers``, ``probes``,
   ``projection``, ``language_model``, ``characters``, ``units``) that imports only itself and
   the shared top-level modules (``activations``; ``report`` gathers them all), except where
   :data:`ANALYSIS_SHARED` says.
8. Figures are drawn in ``io.figures`` only: no other engine module imports matplotlib.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from support import REPO

QT = ("PySide6", "shiboken6", "pyqtgraph", "superqt", "qtpy", "PyQt5", "PyQt6", "pytestqt")
FOUNDATION = ("errors", "progress", "atomic", "runtime", "sharing", "resources", "files")
#: layer → the engine layers it may import (besides itself and the foundation)
ALLOWED: Dict[str, Tuple[str, ...]] = {
    "model": (),
    "embed": ("model",),
    "io": ("model", "embed"),
    "analysis": ("model", "embed", "io"),
    "train": ("model", "embed", "io"),
    "index": ("model", "embed", "io"),
    "cli": ("model", "embed", "io", "analysis", "train", "index"),
}
for name in FOUNDATION:
    ALLOWED[name] = ()
#: a program's entry point; the report, which gathers every view's part, takes the Corpus
#: view's from the index it reads (``index.report``)
EXCEPTIONS = {("elmo_engine.train.__main__", "cli"), ("elmo_engine.analysis.report", "index")}
IMPORTERS = {"import_module", "__import__", "find_spec"}
ANALYSES = ("contexts", "layers", "probes", "projection", "language_model", "characters",
            "units")
#: (analysis, analysis it may import): the projection colours points by the Contexts view's
#: per-layer statistics (``contexts.compare.layer_stats``); a nonce word in context asks the two
#: language models (``characters.nonce`` uses ``language_model.predictions``); the units'
#: ablation scores the language model's minimal pairs (``language_model.pairs``); the probes'
#: usefulness table (issue 42) puts the Layers view's online-code MDL probes (``layers.mdl``)
#: beside the per-layer scores instead of a second MDL implementation; the layers' hubness
#: counts neighbours with the projection's one exact kNN (``projection.compute``)
ANALYSIS_SHARED = {("projection", "contexts"), ("characters", "language_model"),
                   ("units", "language_model"), ("probes", "layers"), ("layers", "projection")}


def modules(folder: str, package: str) -> Iterator[Tuple[str, Path]]:
    """``(dotted name, file)`` of every module under ``REPO/folder``, named as installed."""
    root = REPO / folder
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join([package, *parts]), f


def imported(path: Path) -> List[Tuple[int, str]]:
    """Every module name ``path`` imports: ``(line, name)``; ``from a import b`` gives both
    ``a`` and ``a.b`` (b may be a module). Relative imports are resolved to absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: List[Tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                out.append((node.lineno, f"<relative import of {base!r}>"))
                continue
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in IMPORTERS and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                out.append((node.lineno, node.args[0].value))
        elif isinstance(node, ast.Assign):                # SUBCOMMAND_MODULES = {...: "a.b"}
            if any(isinstance(t, ast.Name) and t.id.endswith("_MODULES") for t in node.targets):
                out += [(node.lineno, v.value) for v in ast.walk(node.value)
                        if isinstance(v, ast.Constant) and isinstance(v.value, str)
                        and "." in v.value]
    return out


def top(name: str) -> str:
    return name.split(".")[0]


def engine_layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_engine_imports_neither_qt_nor_the_app():
    bad = [f"{mod}:{line} imports {name}" for mod, f in modules("elmo_engine", "elmo_engine")
           for line, name in imported(f) if top(name) in QT + ("elmo_explorer", "app")]
    assert bad == []


def test_the_engine_layers_import_downwards():
    bad = []
    checked = 0
    for mod, f in modules("elmo_engine", "elmo_engine"):
        layer = engine_layer(mod)
        if layer not in ALLOWED:
            assert mod == "elmo_engine", f"{mod} is in no layer: add it to ALLOWED"
            continue
        for line, name in imported(f):
            if top(name) != "elmo_engine" or not engine_layer(name):
                continue
            target = engine_layer(name)
            checked += 1
            ok = (target == layer or target in FOUNDATION or target in ALLOWED[layer]
                  or (mod, target) in EXCEPTIONS)
            if not ok:
                bad.append(f"{mod}:{line} ({layer}) imports {name} ({target})")
    assert checked > 100
    assert bad == []


def test_the_app_never_imports_the_command_line():
    bad = [f"{mod}:{line} imports {name}" for mod, f in modules("app/elmo_explorer", "elmo_explorer")
           if mod != "elmo_explorer.entry"
           for line, name in imported(f)
           if name == "elmo_engine.cli" or name.startswith("elmo_engine.cli.")]
    assert bad == []


def test_nothing_imports_the_folder_names():
    bad = []
    for folder in ("elmo_engine", "app", "tests", "benchmarks", "scripts"):
        for f in sorted((REPO / folder).rglob("*.py")):
            bad += [f"{f.relative_to(REPO)}:{line} imports {name}" for line, name in imported(f)
                    if top(name) in ("app", "resources") or name.startswith("<relative")]
    assert bad == []


def test_the_engine_tests_import_neither_qt_nor_the_app():
    bad = [f"{f.name}:{line} imports {name}"
           for f in sorted((REPO / "tests" / "engine").rglob("*.py"))
           for line, name in imported(f) if top(name) in QT + ("elmo_explorer", "app")]
    assert bad == []


def test_the_panel_models_import_no_qt():
    models = sorted((REPO / "app" / "elmo_explorer" / "views").glob("*/model.py"))
    assert len(models) >= 3
    bad = [f"{f.parent.name}/{f.name}:{line} imports {name}" for f in models
           for line, name in imported(f) if top(name) in QT or name.startswith("pyqtgraph")]
    assert bad == []


def test_the_checker_sees_lazy_and_dynamic_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import importlib\n"
                   "def f():\n"
                   "    from PySide6.QtCore import QObject\n"
                   "    importlib.import_module('elmo_explorer.shell.main')\n"
                   "CLI_MODULES = {'x': 'elmo_engine.cli.embed'}\n", encoding="utf-8")
    names = [name for _, name in imported(src)]
    assert {"PySide6.QtCore", "elmo_explorer.shell.main", "elmo_engine.cli.embed"} <= set(names)


def test_each_analysis_imports_only_itself_and_the_shared_modules():
    bad, seen = [], set()
    for mod, f in modules("elmo_engine/analysis", "elmo_engine.analysis"):
        parts = mod.split(".")
        if len(parts) < 3 or parts[2] not in ANALYSES:
            continue
        seen.add(parts[2])
        for line, name in imported(f):
            np_ = name.split(".")
            if np_[:2] != ["elmo_engine", "analysis"] or len(np_) < 3:
                continue
            target = np_[2]
            if target in ANALYSES and target != parts[2] \
                    and (parts[2], target) not in ANALYSIS_SHARED:
                bad.append(f"{mod}:{line} imports {name}")
            elif target in ("report",):
                bad.append(f"{mod}:{line} imports {name} (the report gathers the analyses)")
    assert seen == set(ANALYSES)
    assert bad == []


def test_figures_are_drawn_in_io_figures_only():
    bad = [f"{mod}:{line} imports {name}" for mod, f in modules("elmo_engine", "elmo_engine")
           if not mod.startswith("elmo_engine.io.figures")
           for line, name in imported(f) if top(name) == "matplotlib"]
    figure_modules = {mod for mod, _ in modules("elmo_engine/io/figures", "elmo_engine.io.figures")}
    assert {"elmo_engine.io.figures.contexts", "elmo_engine.io.figures.layers"} <= figure_modules
    assert bad == []
