"""The loaded checkpoint's softmax for the Units view's jobs: read by the first job that needs
it (on the worker), kept for the next ones while the checkpoint's folder is the same; a folder
without one is :class:`MissingSoftmaxError`, the one line naming the missing file with what
the Units view does without it (Intervene goes on without the language models' part)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Tuple

from elmo_engine.errors import InputError


class MissingSoftmaxError(InputError):
    """The loaded checkpoint has no softmax (or no folder to look in): the one line to show."""


class SoftmaxCache:
    def __init__(self) -> None:
        self._softmax: Optional[Any] = None
        self._of: Optional[Path] = None

    def clear(self) -> None:
        self._softmax, self._of = None, None

    def getter(self, ws) -> Tuple[Optional[Path], Callable[[Any], Any]]:
        """(folder, get) for the workspace ``ws``'s loaded checkpoint: ``get(state)`` returns
        the cached softmax of its folder or reads it (call on the worker;
        :class:`MissingSoftmaxError` when there is none, an InputError when it cannot be read)."""
        spec, emb = ws.model_spec, ws.embedder
        folder: Optional[Path] = None
        if spec is not None:
            p = Path(spec.path)
            folder = p if p.is_dir() else p.parent
        output_dim = emb.opts.output_dim if emb is not None else 0
        cached = self._softmax if self._of == folder else None

        def get(state):
            if cached is not None:
                return cached
            if folder is None:
                raise MissingSoftmaxError("the checkpoint's folder is unknown: no softmax to predict with")
            from elmo_engine.model.softmax import load_softmax
            from elmo_explorer.views.softmax_files import UNITS_WITHOUT, missing_softmax_line

            missing = missing_softmax_line(folder, UNITS_WITHOUT)
            if missing is not None:
                raise MissingSoftmaxError(missing)
            return load_softmax(folder, output_dim=output_dim, progress=state.report)

        return folder, get

    def keep(self, folder: Optional[Path], softmax: Any, current: Optional[Path]) -> None:
        """Keep ``softmax`` of ``folder`` when it is still the loaded checkpoint's."""
        if folder == current:
            self._softmax, self._of = softmax, folder
