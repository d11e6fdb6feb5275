"""Publication figures of a view at a chosen size (inches) and DPI, and the export dialogs.

:func:`render_bytes` draws a widget (a panel, a pyqtgraph ``PlotWidget``…) as PNG, SVG or PDF.
PNG and PDF get the size asked for: the widget is laid out at ``inches × 96`` logical pixels (so
fonts keep their on-screen point size relative to the figure: readable at print size) and drawn
scaled to the DPI, with crisp text. A widget that is not visible cannot be laid out again; it is
drawn at its current layout, scaled to fit, on a white page. SVG is drawn by
:func:`elmo_explorer.export.export_widget`'s vector path at the widget's size.
"""
from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from PySide6.QtCore import QBuffer, QIODevice, QMarginsF, QPoint, QRectF, QSize, QSizeF, Qt
from PySide6.QtGui import QColor, QImage, QPageLayout, QPageSize, QPainter, QPdfWriter, QPen
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox,
                               QFormLayout, QGraphicsView, QLabel, QLineEdit, QSpinBox,
                               QWidget)

from elmo_engine.atomic import atomic_write_bytes
from elmo_engine.errors import InputError

LOGICAL_DPI = 96.0                 # Qt's logical pixels per inch for laying the widget out


@dataclass(frozen=True)
class FigureOptions:
    """Size and resolution of exported figures."""

    width_in: float = 6.5          # a full column/page width
    height_in: float = 4.0
    dpi: int = 300
    keep_aspect: bool = True       # height follows the view's proportions
    formats: Tuple[str, ...] = ("png", "svg")

    def pixel_size(self) -> QSize:
        return QSize(round(self.width_in * self.dpi), round(self.height_in * self.dpi))


def _target_widget(obj) -> QWidget:
    if isinstance(obj, QWidget):
        return obj
    scene = obj.scene() if hasattr(obj, "scene") else None
    views = scene.views() if scene is not None else []
    if not views:
        raise InputError("nothing to export: the plot is not shown in a view")
    return views[0]


def _sized(options: FigureOptions, widget: QWidget) -> FigureOptions:
    if not options.keep_aspect or widget.width() < 1:
        return options
    h = options.width_in * widget.height() / widget.width()
    return FigureOptions(options.width_in, round(h, 3), options.dpi, True, options.formats)


def _paint(widget: QWidget, painter: QPainter, target: QSizeF, pen_scale: float = 1.0) -> None:
    """Draw ``widget`` into ``target`` (logical pixels, 96 per inch): re-laid-out at that size
    when visible, else scaled to fit. The device's pixel ratio supplies the DPI, so cosmetic
    pens (pyqtgraph's lines) and text scale with it."""
    logical = QSize(round(target.width()), round(target.height()))
    painter.fillRect(QRectF(0, 0, target.width(), target.height()), QColor("white"))
    old = widget.size()
    relayout = widget.isVisible() and logical.width() >= 50 and logical.height() >= 50
    if relayout:
        widget.resize(logical)
        src_w, src_h = logical.width(), logical.height()
    else:
        src_w, src_h = max(1, old.width()), max(1, old.height())
    scale = min(target.width() / src_w, target.height() / src_h)
    painter.save()
    painter.translate((target.width() - src_w * scale) / 2, (target.height() - src_h * scale) / 2)
    painter.scale(scale, scale)
    try:
        scene = widget.scene() if isinstance(widget, QGraphicsView) else None
        if scene is not None and hasattr(scene, "prepareForPaint"):
            scene.prepareForPaint()                   # pyqtgraph: bring items up to date
        with _widened_pens(widget, pen_scale):     # after the resize: items re-set pens on it
            QWidget.render(widget, painter, QPoint())  # the widget as shown, not only a scene
    finally:
        painter.restore()
        if relayout:
            widget.resize(old)


@contextlib.contextmanager
def _widened_pens(widget: QWidget, factor: float) -> Iterator[None]:
    """Scale the cosmetic pens of pyqtgraph curves and axes by ``factor`` for the duration.

    Cosmetic pens keep their width in device pixels whatever the DPI, so a 2-pixel curve would
    be a 0.5 pt hairline at 300 dpi. Curves (``PlotDataItem``/``PlotCurveItem``) and axes get
    their on-screen thickness back; the original pens are restored afterwards. Scatter symbols
    and bars are drawn from their own pixmaps/brushes and are not changed.
    """
    undo = []
    if factor > 1.01:
        try:
            import pyqtgraph as pg
        except ImportError:  # pragma: no cover - pyqtgraph is a dependency
            pg = None
        views = [widget] if isinstance(widget, QGraphicsView) else []
        views += widget.findChildren(QGraphicsView)
        for view in views if pg is not None else []:
            for item in view.scene().items() if view.scene() is not None else []:
                if isinstance(item, pg.PlotDataItem) and isinstance(item.opts.get("pen"), QPen):
                    old = item.opts["pen"]                  # its curve takes the pen from here
                elif (isinstance(item, pg.PlotCurveItem) and isinstance(item.opts.get("pen"), QPen)
                      and not isinstance(item.parentItem(), pg.PlotDataItem)):
                    old = item.opts["pen"]
                elif isinstance(item, pg.AxisItem):
                    old = item.pen()
                else:
                    continue
                if not old.isCosmetic() or old.style() == Qt.PenStyle.NoPen:
                    continue
                pen = QPen(old)
                pen.setWidthF(max(1.0, old.widthF()) * factor)
                item.setPen(pen)
                undo.append((item, old))
    try:
        yield
    finally:
        for item, old in reversed(undo):
            item.setPen(old)


def render_png(obj, options: FigureOptions) -> bytes:
    """PNG of ``obj`` at ``width_in × height_in`` inches and ``dpi`` (stored in the file)."""
    widget = _target_widget(obj)
    opts = _sized(options, widget)
    size = opts.pixel_size()
    if size.width() < 16 or size.height() < 16 or size.width() * size.height() > 400e6:
        raise InputError(f"a {size.width()}×{size.height()} pixel image is not sensible; "
                         "choose another size or DPI")
    image = QImage(size, QImage.Format.Format_ARGB32)
    dots_per_m = round(opts.dpi / 0.0254)
    image.setDotsPerMeterX(dots_per_m)
    image.setDotsPerMeterY(dots_per_m)
    image.fill(QColor("white"))
    image.setDevicePixelRatio(opts.dpi / LOGICAL_DPI)
    painter = QPainter(image)
    painter.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
    try:
        _paint(widget, painter, QSizeF(opts.width_in * LOGICAL_DPI, opts.height_in * LOGICAL_DPI),
               opts.dpi / LOGICAL_DPI)
    finally:
        painter.end()
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):
        raise InputError("could not encode the image as PNG")
    return bytes(buf.data())


def render_pdf(obj, options: FigureOptions) -> bytes:
    """A one-page vector PDF of ``obj``, the page ``width_in × height_in`` inches."""
    widget = _target_widget(obj)
    opts = _sized(options, widget)
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buf)
    writer.setResolution(int(LOGICAL_DPI))          # screen resolution: text keeps its size
    page = QPageSize(QSizeF(opts.width_in, opts.height_in), QPageSize.Unit.Inch, "figure",
                     QPageSize.SizeMatchPolicy.ExactMatch)
    writer.setPageLayout(QPageLayout(page, QPageLayout.Orientation.Portrait, QMarginsF(0, 0, 0, 0)))
    painter = QPainter(writer)
    try:
        _paint(widget, painter, QSizeF(opts.width_in * LOGICAL_DPI, opts.height_in * LOGICAL_DPI))
    finally:
        painter.end()
    buf.close()
    return bytes(buf.data())


def render_svg(obj) -> bytes:
    """SVG of ``obj`` through :func:`elmo_explorer.export.export_widget` (vector, the view's size)."""
    from elmo_explorer.export import export_widget

    with tempfile.TemporaryDirectory() as d:
        path = export_widget(obj, Path(d) / "figure.svg")
        return path.read_bytes()


def render_bytes(obj, ext: str, options: FigureOptions) -> bytes:
    """``ext`` "png", "svg" or "pdf"."""
    if ext == "png":
        return render_png(obj, options)
    if ext == "pdf":
        return render_pdf(obj, options)
    if ext == "svg":
        return render_svg(obj)
    raise InputError(f"cannot export figures as '{ext}' (use png, svg or pdf)")


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
        form.addRow(QLabel("Every view's figure goes into the report as PNG (at this size and "
                           "resolution) and SVG, with the tables as CSV and report.html/.md."))
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

    def accept(self) -> None:  # noqa: D102 - Qt override
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
                weights = [float(v) for v in self.weights.text().replace(";", ",").split(",")]
            except ValueError:
                raise InputError("mix weights must be numbers separated by commas") from None
            if len(weights) != self.n_layers or any(w < 0 for w in weights) or sum(weights) <= 0:
                raise InputError(f"give {self.n_layers} non-negative mix weights, not all zero")
        return {"fmt": self.fmt.currentData(), "layers": self.layers.currentData(),
                "weights": weights, "gamma": self.gamma.value(), "scope": self.scope.currentData()}


__all__ = ["FigureOptions", "ReportDialog", "VectorDialog", "render_bytes", "render_pdf",
           "render_png", "render_svg"]


def write_figure(fig, path, options: FigureOptions) -> Path:
    """Write ``fig`` to ``path`` (.png/.svg/.pdf by extension), atomically.

    The figure is laid out at ``width_in × 96`` logical pixels (the height fitted to the square
    heatmap when ``options.keep_aspect``, else ``height_in``), so fonts keep their point size at
    print size; PNG is drawn at ``options.dpi``.
    """
    from elmo_explorer.export import export_widget

    path = Path(path)
    ext = path.suffix.lower()
    if ext not in (".png", ".svg", ".pdf"):
        raise InputError(f"cannot export to '{path.suffix}': use .png, .svg or .pdf", path=path)
    width, height = fig.lay_out(round(options.width_in * LOGICAL_DPI),
                                None if options.keep_aspect
                                else round(options.height_in * LOGICAL_DPI))
    sized = FigureOptions(width / LOGICAL_DPI, height / LOGICAL_DPI, options.dpi, False)
    if ext == ".svg":
        return export_widget(fig, path)
    atomic_write_bytes(path, render_png(fig, sized) if ext == ".png" else render_pdf(fig, sized))
    return path


def write_figures(figures, folder, options: FigureOptions) -> List[Path]:
    """Write each ``(stem, make_figure)`` in every format of ``options`` into ``folder``.

    ``make_figure()`` builds one figure widget; it is closed and deleted once written.
    """
    files: List[Path] = []
    for stem, make_figure in figures:
        fig = make_figure()
        try:
            for ext in options.formats:
                files.append(write_figure(fig, Path(folder) / f"{stem}.{ext}", options))
        finally:
            fig.close()
            fig.deleteLater()
    return files


def panel_figure_options(widget) -> FigureOptions:
    """The report dialog's size/DPI for a panel's figures (File → Export report), else defaults."""
    actions = getattr(widget.window(), "workspace_actions", None)
    opts = getattr(actions, "figure_options", None)
    return opts if isinstance(opts, FigureOptions) else FigureOptions()
