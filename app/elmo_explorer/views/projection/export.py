"""Exports of the projection view, as functions of values: plot images (the engine's figure
path), coordinates CSV and TensorBoard-projector TSV (jobs for the worker), and the dialogs that
ask for the paths. :class:`~.export_actions.ProjectionExports` builds the File → Export entries
and the plots' right-click entries from them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from PySide6.QtWidgets import QMessageBox, QWidget

from elmo_explorer.common.save_dialog import existing_folder

from elmo_engine.errors import ElmoError
from elmo_engine.analysis.projection import (LayerSpec, Projection, TokenSet, layer_features,
                                             write_coordinates_csv, write_tensorboard)

SVG_WARN_POINTS = 5_000        # an SVG of more points is slow and large
#: File → Export entries: (menu text, the ProjectionExports method name)
ENTRIES = (("Projection: all plots as image…", "ask_export_all"),
           ("Projection: current plot as image…", "ask_export_plot"),
           ("Projection: coordinates as CSV…", "ask_export_csv"),
           ("Projection: vectors for TensorBoard projector…", "ask_export_tensorboard"))
Job = Callable[[Any], Any]


def svg_warning(path: Path, n_points: int) -> Optional[str]:
    """The question to ask before writing an SVG of many points (None: no need to ask)."""
    if path.suffix.lower() != ".svg" or n_points <= SVG_WARN_POINTS:
        return None
    return (f"An SVG of {n_points:,} points per plot takes several seconds and many megabytes "
            "(PNG or PDF is faster). Write the SVG anyway?")


def coordinates_job(path, tokens: TokenSet, projections: Sequence[Projection]) -> Job:
    """Write the drawn coordinates of every plot as CSV."""
    projections = list(projections)
    return lambda state: write_coordinates_csv(path, tokens, projections)


def tensorboard_job(folder, tokens: TokenSet, acts: list, layer: LayerSpec) -> Job:
    """Write ``vectors.tsv`` + ``metadata.tsv`` of ``layer`` (the one projector format)."""
    def job(state):
        vec = layer_features(acts, tokens, layer)
        return write_tensorboard(folder, vec, tokens, state=state)

    return job


def confirm(parent: QWidget, message: str) -> bool:
    answer = QMessageBox.question(parent, "Slow export", message)
    return answer == QMessageBox.StandardButton.Yes


def ask_image_path(parent: QWidget, title: str) -> Optional[Path]:
    from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

    return ask_save_path(parent, title, IMAGE_FILTERS)


def ask_and_write_image(parent: QWidget, title: str, write: Callable[[Path], Optional[Path]],
                        message: Callable[[str], None]) -> None:
    """Ask for an image file, ``write(path)`` it (None: the user declined) and say so."""
    path = ask_image_path(parent, title)
    if not path:
        return
    try:
        if write(path) is not None:
            message(f"Saved {path}")
    except ElmoError as e:
        message(f"Export failed: {e}")


def ask_csv_path(parent: QWidget) -> Optional[Path]:
    from elmo_explorer.common.save_dialog import ask_save_path

    return ask_save_path(parent, "Export coordinates", "CSV (*.csv)")


def ask_folder(parent: QWidget, layer_name: str) -> str:
    """The folder for the projector files of ``layer_name`` ("": cancelled)."""
    return existing_folder(parent, f"Folder for vectors.tsv + metadata.tsv of {layer_name}")
