"""Exported figures' size, resolution and formats, and the export dialogs.

Every exported figure is a matplotlib figure drawn by the engine
(:mod:`elmo_engine.io.figures.contexts` on :mod:`elmo_engine.io.figures`, the one figure
path); :func:`save_figure` writes it at the size and DPI chosen here. Nothing is drawn from the
widgets on screen.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from PySide6.QtCore import QSize
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox,
                               QFormLayout, QLabel, QLineEdit, QSpinBox,
                               QWidget)

from elmo_engine.errors import InputError



@dataclass(frozen=True)
class FigureOptions:
    """Size and resolution of exported figures."""

    width_in: float = 6.5          # a full column/page width
    height_in: float = 4.0
    dpi: int = 300
    keep_aspect: bool = True       # height follows the view's proportions
    formats: Tuple[str, ...] = ("png", "svg")

    def style(self):
        """The engine's :class:`~elmo_engine.io.figures.FigureStyle` of these options: the
        width and dpi exactly; the height the figure's own proportions or ``height_in``."""
        from elmo_engine.io.figures import FigureStyle

        return FigureStyle(self.width_in, self.dpi, tuple(self.formats),
                           None if self.keep_aspect else self.height_in)

    def pixel_size(self) -> QSize:
        return QSize(round(self.width_in * self.dpi), round(self.height_in * self.dpi))


def save_figure(fig, path, options: FigureOptions) -> List[Path]:
    """Write a matplotlib figure (from :mod:`elmo_engine.io.figures.contexts`) through the
    one figure path, :func:`elmo_engine.io.figures.save`: ``path`` with a .png/.svg/.pdf
    suffix writes that format, without one every format of ``options``. The figure is scaled to
    ``options.width_in`` (its height follows when ``keep_aspect``, else ``height_in``
    exactly): the width and dpi asked for are the width and dpi written."""
    from elmo_engine.io import figures as F

    path = Path(path)
    ext = path.suffix.lower().lstrip(".")
    if ext and ext not in F.FORMATS:
        raise InputError(f"cannot export to '{path.suffix}': use .png, .svg or .pdf", path=path)
    return F.save(fig, path, None if ext else list(options.formats), style=options.style())


def write_figures(figures, folder, options: FigureOptions) -> List[Path]:
    """Write each ``(stem, make_figure)`` in every format of ``options`` into ``folder``;
    ``make_figure()`` returns a matplotlib figure."""
    files: List[Path] = []
    for stem, make_figure in figures:
        files += save_figure(make_figure(), Path(folder) / stem, options)
    return files


def panel_figure_options(widget) -> FigureOptions:
    """The report dialog's size/DPI for a panel's figures (File → Export report), else defaults."""
    actions = getattr(widget.window(), "workspace_actions", None)
    opts = getattr(actions, "figure_options", None)
    return opts if isinstance(opts, FigureOptions) else FigureOptions()


# ---- dialogs -------------------------------------------------------------------------------
def _buttons(dlg: QDialog) -> QDialogButtonBox:
    box = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
    box.accepted.connect(dlg.accept)
    box.rejected.connect(dlg.reject)
    return box


class ReportDialog(QDialog):
    """Figure size (inches), DPI and formats for a report."""

    def __init__(self, options: FigureOptions, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setWindowTitle("Export report")
        form = QFormLayout(self)
        form.addRow(QLabel("The report's figures are written as PNG (exactly this width and "
                           "resolution) and SVG, with the tables as CSV and "
                           "report.html/.md."))
        self.width_in = QDoubleSpinBox(decimals=2, minimum=1.0, maximum=40.0, singleStep=0.25)
        self.width_in.setValue(options.width_in)
        self.width_in.setSuffix(" in")
        self.height_in = QDoubleSpinBox(decimals=2, minimum=1.0, maximum=40.0, singleStep=0.25)
        self.height_in.setValue(options.height_in)
        self.height_in.setSuffix(" in")
        self.keep = QCheckBox("Height follows the view's proportions")
        self.keep.setChecked(options.keep_aspect)
        self.keep.toggled.connect(lambda on: self.height_in.setEnabled(not on))
        self.height_in.setEnabled(not options.keep_aspect)
        self.dpi = QSpinBox(minimum=50, maximum=1200, singleStep=50)
        self.dpi.setValue(options.dpi)
        self.dpi.setSuffix(" dpi")
        self.pdf = QCheckBox("Also PDF (vector, page of this size)")
        self.pdf.setChecked("pdf" in options.formats)
        form.addRow("Width", self.width_in)
        form.addRow("Height", self.height_in)
        form.addRow("", self.keep)
        form.addRow("PNG resolution", self.dpi)
        form.addRow("", self.pdf)
        form.addRow(_buttons(self))

    def options(self) -> FigureOptions:
        formats = ("png", "svg", "pdf") if self.pdf.isChecked() else ("png", "svg")
        return FigureOptions(self.width_in.value(), self.height_in.value(), self.dpi.value(),
                             self.keep.isChecked(), formats)


class VectorDialog(QDialog):
    """Format, layers (each/top/average/mix) and scope of a vector export."""

    def __init__(self, workspace, mix_hint: Optional[List[float]] = None,
                 parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setWindowTitle("Export vectors")
        self.n_layers = workspace.n_layers
        form = QFormLayout(self)
        self.fmt = QComboBox()
        for key, text in (("hdf5", "HDF5 (AllenNLP elmo layout)"), ("npz", "NumPy npz"),
                          ("tsv", "TensorBoard projector (TSV pair)"), ("csv", "CSV")):
            self.fmt.addItem(text, key)
        self.layers = QComboBox()
        for key, text in (("each", "Every layer"), ("top", "Top layer"),
                          ("average", "Average of the layers"), ("mix", "Scalar mix")):
            self.layers.addItem(text, key)
        hint = mix_hint if mix_hint and len(mix_hint) == self.n_layers else \
            [round(1 / max(self.n_layers, 1), 4)] * self.n_layers
        self.weights = QLineEdit(", ".join(f"{w:g}" for w in hint))
        self.gamma = QDoubleSpinBox(decimals=3, minimum=0.0, maximum=100.0, value=1.0)
        self.scope = QComboBox()
        self.scope.addItem(f"All {len(workspace.sentences):,} sentences", "all")
        if workspace.selection is not None:
            word = workspace.word_at(workspace.selection)
            n = len(workspace.occurrences(word))
            self.scope.addItem(f"Every occurrence of '{word}' ({n})", "word")
            self.scope.addItem(f"Only the selected '{word}'", "token")
        self.layers.currentIndexChanged.connect(self._enable)
        self.problem = QLabel()
        self.problem.setStyleSheet("color: #a00")
        form.addRow("Format", self.fmt)
        form.addRow("Layers", self.layers)
        form.addRow("Mix weights", self.weights)
        form.addRow("Mix γ", self.gamma)
        form.addRow("Tokens", self.scope)
        form.addRow(self.problem)
        form.addRow(_buttons(self))
        self._enable()

    def _enable(self) -> None:
        mix = self.layers.currentData() == "mix"
        self.weights.setEnabled(mix)
        self.gamma.setEnabled(mix)

    def accept(self) -> None:  # Qt override
        try:
            self.options()
        except InputError as e:
            self.problem.setText(str(e))
            return
        super().accept()

    def options(self) -> Dict[str, object]:
        """``{"fmt", "layers", "weights", "gamma", "scope"}``; InputError for bad weights."""
        weights = None
        if self.layers.currentData() == "mix":
            try:
                # commas, semicolons or spaces, as --mix-weights and the Projection view
                text = self.weights.text().replace(";", " ").replace(",", " ")
                weights = [float(v) for v in text.split()]
            except ValueError:
                raise InputError("mix weights must be numbers separated by commas or spaces") \
                    from None
            if len(weights) != self.n_layers or any(w < 0 for w in weights) or sum(weights) <= 0:
                raise InputError(f"give {self.n_layers} non-negative mix weights, not all zero")
        return {"fmt": self.fmt.currentData(), "layers": self.layers.currentData(),
                "weights": weights, "gamma": self.gamma.value(), "scope": self.scope.currentData()}


__all__ = ["FigureOptions", "ReportDialog", "VectorDialog", "panel_figure_options",
           "save_figure", "write_figures"]
