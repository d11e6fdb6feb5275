"""Save a plot or a widget as PNG, SVG or PDF (by extension), atomically.

pyqtgraph items (``PlotItem``, ``GraphicsLayout``, ``PlotWidget``…) go through pyqtgraph's
exporters for PNG and SVG; any other widget is grabbed (PNG), rendered into an SVG generator (SVG)
or rendered into a PDF page at screen resolution (vector text and lines, see ENVIRONMENT.md).
Every file is written whole to memory first and then replaces the target in one rename.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Union

from PySide6.QtCore import QBuffer, QIODevice, QMarginsF, QPoint, QRectF, QSizeF
from PySide6.QtGui import QImage, QPageLayout, QPageSize, QPainter, QPdfWriter
from PySide6.QtWidgets import QFileDialog, QWidget

from elmo_engine.atomic import atomic_write_bytes
from elmo_engine.errors import InputError

FORMATS = (".png", ".svg", ".pdf")
IMAGE_FILTERS = "PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)"


def export_widget(obj: Union[QWidget, object], path) -> Path:
    """Write ``obj`` (a QWidget or a pyqtgraph graphics item) to ``path`` (.png/.svg/.pdf).

    Raises
    ------
    InputError : unknown extension, or nothing to draw
    """
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in FORMATS:
        raise InputError(f"cannot export to '{path.suffix}': use .png, .svg or .pdf", path=path)
    item = _graphics_item(obj)
    if ext == ".png":
        data = _png_bytes(item if item is not None else obj)
    elif ext == ".svg":
        data = _svg_bytes(item if item is not None else obj)
    else:
        data = _pdf_bytes(obj, item)
    atomic_write_bytes(path, data)
    return path


def _graphics_item(obj):
    """The pyqtgraph item to export, or None for a plain widget."""
    try:
        import pyqtgraph as pg
    except ImportError:  # pragma: no cover - pyqtgraph is a dependency
        return None
    if isinstance(obj, pg.PlotWidget):
        return obj.getPlotItem()
    if isinstance(obj, pg.GraphicsLayoutWidget):
        return obj.ci
    if isinstance(obj, pg.GraphicsObject) or isinstance(obj, pg.GraphicsWidget):
        return obj
    return None


def _image_png(image: QImage) -> bytes:
    if image.isNull():
        raise InputError("nothing to export: the view is empty or has no size")
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):
        raise InputError("could not encode the image as PNG")
    return bytes(buf.data())


def _png_bytes(obj) -> bytes:
    if isinstance(obj, QWidget):
        return _image_png(obj.grab().toImage())
    from pyqtgraph.exporters import ImageExporter

    image = ImageExporter(obj).export(toBytes=True)
    return _image_png(image)


def _svg_bytes(obj) -> bytes:
    if isinstance(obj, QWidget):
        from PySide6.QtSvg import QSvgGenerator

        buf = QBuffer()
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        gen = QSvgGenerator()
        gen.setOutputDevice(buf)
        gen.setSize(obj.size())
        gen.setViewBox(obj.rect())
        painter = QPainter(gen)
        try:
            obj.render(painter, QPoint())
        finally:
            painter.end()
        return bytes(buf.data())
    from pyqtgraph.exporters import SVGExporter

    data = SVGExporter(obj).export(toBytes=True)
    return data if isinstance(data, bytes) else bytes(data)


def _pdf_bytes(obj, item) -> bytes:
    widget = obj if isinstance(obj, QWidget) else None
    if item is not None:
        rect = item.sceneBoundingRect()
    elif widget is not None:
        rect = QRectF(widget.rect())
    else:
        raise InputError("nothing to export: not a widget or a plot")
    if rect.width() < 1 or rect.height() < 1:
        raise InputError("nothing to export: the view has no size")
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buf)
    dpi = _screen_dpi(widget)
    writer.setResolution(dpi)
    size_pt = QSizeF(rect.width() * 72.0 / dpi, rect.height() * 72.0 / dpi)
    writer.setPageLayout(QPageLayout(QPageSize(size_pt, QPageSize.Unit.Point),
                                     QPageLayout.Orientation.Portrait, QMarginsF(0, 0, 0, 0)))
    painter = QPainter(writer)
    try:
        target = QRectF(0, 0, rect.width(), rect.height())
        if item is not None:
            item.scene().render(painter, target, rect)
        else:
            widget.render(painter, QPoint())
    finally:
        painter.end()
    buf.close()
    return bytes(buf.data())


def _screen_dpi(widget: Optional[QWidget]) -> int:
    screen = widget.screen() if widget is not None else None
    if screen is None:
        from PySide6.QtGui import QGuiApplication

        screen = QGuiApplication.primaryScreen()
    return max(1, int(round(screen.logicalDotsPerInch()))) if screen is not None else 96


def ask_save_path(parent: Optional[QWidget], title: str, filters: Union[str, Sequence[str]],
                  directory: str = "") -> Optional[Path]:
    """Ask for a file to save; add the selected filter's extension when the name has none.

    ``filters`` is a Qt filter string (``"PNG image (*.png);;CSV (*.csv)"``) or a list of them.
    Returns None when the user cancels.
    """
    if not isinstance(filters, str):
        filters = ";;".join(filters)
    name, chosen = QFileDialog.getSaveFileName(parent, title, directory, filters)
    if not name:
        return None
    path = Path(name)
    if not path.suffix:
        ext = _first_extension(chosen or filters)
        if ext:
            path = path.with_suffix(ext)
    return path


def _first_extension(filter_text: str) -> str:
    start = filter_text.find("*.")
    if start < 0:
        return ""
    end = start + 2
    while end < len(filter_text) and (filter_text[end].isalnum() or filter_text[end] == "."):
        end += 1
    return filter_text[start + 1:end]

