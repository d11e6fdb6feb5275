"""Picture File → Get a published model… over the main window: docs/images/get-model.png.

A throwaway data folder and a loopback server (``tests/model_server.py``) that serves the
vendored AllenNLP test checkpoint under the catalogue's names for ``small`` and ``medium``:
``small`` is downloaded first, then ``medium`` is fetched slowly and the screen is grabbed while
its progress (speed, time left) shows. Needs a display at 1280×800, e.g.::

    Xvfb :99 -screen 0 1280x800x24 &
    DISPLAY=:99 QT_QPA_PLATFORM=xcb python scripts/screenshot_get_model.py docs/images/get-model.png
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main(out: str) -> int:
    from model_server import ModelServer

    fixture = REPO / "tests" / "fixtures" / "elmo" / "allennlp"
    tmp = Path(tempfile.mkdtemp(prefix="get-model-shot-"))
    os.environ["ELMO_EXPLORER_DATA"] = str(tmp / "data")
    os.environ["ELMO_EXPLORER_SETTINGS_DIR"] = str(tmp / "settings")

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from elmo_engine.atomic import atomic_write_bytes
    from elmo_engine.io.catalogue import load_catalogue
    from elmo_engine.io.model_get import get_model
    from elmo_explorer.shell.main_window import MainWindow
    from elmo_explorer.shell.models_dialog.controller import show_get_model_dialog
    from elmo_explorer.state.settings import AppSettings

    files = {}
    for name in ("small", "medium"):
        m = load_catalogue().require(name)
        files[m.file("options").path] = (fixture / "options.json").read_bytes()
        # medium: the weights padded so that the transfer lasts long enough to picture
        weights = (fixture / "lm_weights.hdf5").read_bytes()
        files[m.file("weights").path] = weights + (b"\0" * (40 << 20) if name == "medium" else b"")
    app = QApplication(sys.argv[:1])
    with ModelServer(files) as server:
        os.environ["ELMO_EXPLORER_MODEL_MIRROR"] = server.url
        get_model("small")
        server.delay_s, server.piece = 0.05, 64 << 10
        window = MainWindow(AppSettings(tmp / "settings"))
        window.resize(1280, 800)
        window.show()
        window.start(None, None)
        code = [1]

        def download() -> None:
            if window.workspace.worker.is_busy():           # let the demo model load first
                QTimer.singleShot(500, download)
                return
            dialog = show_get_model_dialog(window)
            dialog.move(window.x() + 80, window.y() + 170)
            dialog.select("medium")
            dialog.get_button.click()
            QTimer.singleShot(5000, grab)

        def grab() -> None:
            screen = QApplication.primaryScreen()
            image = screen.grabWindow(0).toImage()
            from PySide6.QtCore import QBuffer, QIODevice
            from PySide6.QtGui import QColor, QPainter, QPen

            # no window manager under Xvfb: outline the dialog so that it reads as a window
            painter = QPainter(image)
            painter.setPen(QPen(QColor(60, 60, 60), 2))
            painter.drawRect(window.get_model_dialog.frameGeometry().adjusted(-1, -1, 0, 0))
            painter.end()

            buf = QBuffer()
            buf.open(QIODevice.OpenModeFlag.WriteOnly)
            image.save(buf, "PNG")
            atomic_write_bytes(Path(out), bytes(buf.data()))
            print(f"{out}: {image.width()}x{image.height()}")
            code[0] = 0
            window.get_model_dialog.cancel_job()
            window.close()
            app.quit()

        QTimer.singleShot(500, download)
        app.exec()
    return code[0]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/images/get-model.png"))
