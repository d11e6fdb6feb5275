"""The bundled model's recorded reference probe results (``resources/probe_reference/*.json``).

Each file is one ``results.json`` written by the ``probe`` command, with the exact ``command``
that made it; the Probes tab shows them at first launch, labelled as recorded, until the user
trains. They are read as JSON only; a bad file is skipped with a logged message naming it.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import List, Optional, Tuple

from elmo_engine.analysis.probes.results import ProbeResult

log = logging.getLogger(__name__)
#: the files, in display order (syntax first)
REFERENCE_FILES = ("pos_ewt.json", "wsd_semcor_semeval2007.json")


def reference_dir() -> Path:
    from elmo_engine.resources import probe_reference_dir

    return probe_reference_dir()


def load_reference_runs(folder: Optional[Path] = None) -> Tuple[List[ProbeResult], List[str]]:
    """The recorded runs that exist and parse, and one message per file that could not be read."""
    folder = reference_dir() if folder is None else Path(folder)
    runs, problems = [], []
    for name in REFERENCE_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            run = ProbeResult.from_dict(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            problems.append(f"{path}: not a probe result ({type(e).__name__}: {e})")
            log.warning("skipping recorded probe result %s: %s", path, e)
            continue
        if not run.name.startswith("Recorded: "):
            run.name = "Recorded: " + run.name
        runs.append(run)
    return runs, problems


__all__ = ["REFERENCE_FILES", "load_reference_runs", "reference_dir"]
