"""Which modules a command imports: run it in a fresh interpreter with ``python -X importtime``,
which lists every module imported on stderr (one ``import time:`` line each). Shared by
tests/engine/test_startup.py and tests/app/test_entry.py (issue 39: commands that answer at
once)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List, Set, Tuple

REPO = Path(__file__).resolve().parents[1]

#: the libraries a command that only answers must not load (each costs 0.05 to 1 s to import)
HEAVY = ("torch", "numpy", "scipy", "h5py", "matplotlib", "faiss", "umap", "numba", "sklearn",
         "PySide6", "pyqtgraph", "safetensors")


def run_importtime(args: List[str], module: str = "elmo_engine.cli") -> Tuple[int, str, str,
                                                                              Set[str]]:
    """(exit status, stdout, stderr without the import lines, top-level names imported)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "app"),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", module, *args], env=env,
                       capture_output=True, text=True, timeout=120, cwd=str(REPO))
    imported, rest = set(), []
    for line in r.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            imported.add(name.split(".")[0])
        else:
            rest.append(line)
    return r.returncode, r.stdout, "\n".join(rest), imported


def heavy(imported: Set[str]) -> List[str]:
    return sorted(m for m in HEAVY if m in imported)
