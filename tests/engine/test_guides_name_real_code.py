"""The guides name only code that exists: every file path (``elmo_engine/…``, ``app/…``,
``tests/…``, ``benchmarks/…``, ``docs/…``, ``scripts/…``) and every dotted name
(``elmo_engine.io.report.ReportTable``, ``elmo_explorer.state.worker``) quoted in the README and
in ``docs/`` resolves to a file, a module, or a name defined at the top of that module.

Read with ``ast`` only (nothing is imported), so it runs in the engine's venv without Qt.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
PACKAGES = {"elmo_engine": REPO / "elmo_engine", "elmo_explorer": REPO / "app" / "elmo_explorer",
            "elmo_engine.resources": REPO / "resources"}
PATH_ROOTS = ("elmo_engine/", "app/", "tests/", "benchmarks/", "docs/", "scripts/", "resources/")
CODE = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"\b((?:elmo_engine|elmo_explorer)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
PATHISH = re.compile(r"^[\w./-]+$")


def quoted(doc: Path) -> Iterator[Tuple[int, str]]:
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        for m in CODE.finditer(line):
            yield n, m.group(1).strip()


@functools.lru_cache(maxsize=None)
def top_names(module_file: Path) -> frozenset:
    """Names defined or imported at the top of a module (and in its classes' bodies: a dotted
    name may go on to a method)."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                    elif isinstance(sub, ast.Attribute):
                        names.add(sub.attr)
    return frozenset(names)


def resolve_dotted(name: str) -> Optional[str]:
    """None when ``name`` exists; else what is missing."""
    parts = name.split(".")
    if parts[:2] == ["elmo_engine", "resources"]:      # installed from resources/ (pyproject)
        parts = ["elmo_engine.resources", *parts[2:]]
    here = PACKAGES[parts[0]]
    module_file: Optional[Path] = here / "__init__.py"
    for k, part in enumerate(parts[1:], start=1):
        if (here / part).is_dir() and (here / part / "__init__.py").exists():
            here = here / part
            module_file = here / "__init__.py"
            continue
        if (here / f"{part}.py").is_file():
            module_file = here / f"{part}.py"
            rest = parts[k + 1:]
            if rest and rest[0] not in top_names(module_file):
                return f"{rest[0]} is not defined in {module_file.relative_to(REPO)}"
            return None
        if module_file is not None and module_file.exists() and part in top_names(module_file):
            return None
        return f"no module or name {'.'.join(parts[:k + 1])}"
    return None


def missing_references() -> List[str]:
    problems = []
    for doc in DOCS:
        where = doc.relative_to(REPO)
        for line, text in quoted(doc):
            for dotted in DOTTED.findall(text):
                problem = resolve_dotted(dotted.rstrip("."))
                if problem:
                    problems.append(f"{where}:{line}: `{dotted}`: {problem}")
            token = text.split()[0] if text.split() else ""
            token = token.split("::")[0].rstrip(",.:;)")
            if (token.startswith(PATH_ROOTS) and PATHISH.match(token)
                    and not any(c in token for c in "*{}<>")
                    and "/NAME" not in token and not (REPO / token).exists()):
                problems.append(f"{where}:{line}: `{token}` does not exist")
    return problems


def test_every_module_file_and_name_the_guides_quote_exists():
    problems = missing_references()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name, ok", [
    ("elmo_engine.io.report.ReportTable", True),
    ("elmo_engine.embed.embedder.Embedder.embed", True),
    ("elmo_engine.sharing", True),
    ("elmo_engine.io.report.NoSuchThing", False),
    ("elmo_engine.no_such_module", False),
])
def test_the_resolver_can_fail(name, ok):
    assert (resolve_dotted(name) is None) is ok
