"""What ``pip install`` puts into site-packages: the project's own import names only.

``app/elmo_explorer/`` is installed as ``elmo_explorer`` and ``resources/`` as
``elmo_engine.resources`` (``pyproject.toml``); no top-level ``app`` or ``resources`` that could
collide with another project's.
"""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib

from support import REPO


def package_folders():
    """Every package folder of the source tree, by its installed name."""
    found = {}
    for folder, name in (("elmo_engine", "elmo_engine"), ("app/elmo_explorer", "elmo_explorer"),
                         ("resources", "elmo_engine.resources")):
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found[".".join((name, *rel))] = init.parent
    return found


def test_pyproject_lists_every_package_under_its_own_name():
    conf = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert sorted(conf["packages"]) == sorted(package_folders())
    assert conf["package-dir"] == {"elmo_explorer": "app/elmo_explorer",
                                  "elmo_engine.resources": "resources"}
    assert all(top in ("elmo_engine", "elmo_explorer") for top in
               {p.split(".")[0] for p in conf["packages"]})


def test_installed_names_are_the_projects_own(tmp_path):
    dist = importlib.metadata.distribution("elmo-explorer")
    assert set(dist.read_text("top_level.txt").split()) == {"elmo_engine", "elmo_explorer"}
    scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
    assert scripts == {"elmo-explorer": "elmo_explorer.entry:main"}
    code = ("import importlib.util as u\n"
            "print([u.find_spec(n) is not None for n in "
            "('app', 'resources', 'elmo_explorer', 'elmo_engine', 'elmo_engine.resources')])\n"
            "import elmo_engine.resources as r\n"
            "print(r.demo_checkpoint_available(), r.demo_sentences_path().is_file(),"
            " r.demo_tasks_dir().is_dir())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=True).stdout.splitlines()
    assert out == ["[False, False, True, True, True]", "True True True"]
