"""Dialogs: model information, about, and the one place errors are shown to the user."""
from __future__ import annotations

import html
import logging
from typing import Optional

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from elmo_explorer.common import error_dialog

log = logging.getLogger(__name__)

APP_TITLE = "ELMo Explorer"


def human_bytes(n: int) -> str:
    """1536 → '1.5 KB'."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def human_count(n: int) -> str:
    """93_600_000 → '93.6 M'."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:.2f} G"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} M"
    if n >= 10_000:
        return f"{n / 1e3:.1f} k"
    return str(n)


def model_info_html(info, device_label: str, precision: str) -> str:
    """An HTML summary of a :class:`~elmo_engine.model.checkpoint.CheckpointInfo`."""
    esc = html.escape
    rows = [("Name", info.name), ("Format", info.format), ("Options", info.options_path),
            ("Weights", info.weights_path), ("Weights size", human_bytes(info.weights_bytes)),
            ("SHA-256", info.checksum), ("Device", device_label), ("Precision", precision)]
    parts = ["<h3>Model</h3><table cellspacing='4'>"]
    parts += [f"<tr><td><b>{esc(k)}</b></td><td>{esc(str(v))}</td></tr>" for k, v in rows]
    parts.append("</table><h3>Parameters</h3><table cellspacing='4'>")
    counts = dict(info.parameter_counts)
    total = counts.pop("total", sum(counts.values()))
    for part, n in counts.items():
        parts.append(f"<tr><td>{esc(part.replace('_', ' '))}</td><td align='right'>{n:,}</td></tr>")
    parts.append(f"<tr><td><b>total</b></td><td align='right'><b>{total:,}</b></td></tr></table>")
    parts.append("<h3>Options</h3><table cellspacing='4'>")
    for k, v in info.options.describe().items():
        parts.append(f"<tr><td>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>")
    opts = info.options
    parts.append(f"<tr><td><i>layers out (L+1)</i></td><td>{opts.n_output_layers}</td></tr>")
    parts.append(f"<tr><td><i>vector size (2·out)</i></td><td>{2 * opts.output_dim}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


class ModelInfoDialog(QDialog):
    """Options, parameter counts per part, checksum, device and precision of the loaded model."""

    def __init__(self, info, device_label: str, precision: str, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setWindowTitle(f"Model info — {info.name}")
        self.resize(620, 560)
        layout = QVBoxLayout(self)
        self.browser = QTextBrowser(self)
        self.browser.setOpenLinks(False)
        self.browser.setHtml(model_info_html(info, device_label, precision))
        layout.addWidget(self.browser)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        buttons.accepted.connect(self.accept)
        layout.addWidget(buttons)


def about_text(version: str) -> str:
    return (f"<h3>{APP_TITLE} {html.escape(version)}</h3>"
            "<p>A desktop tool for studying ELMo contextual word embeddings: how a word's vectors "
            "change with context, layer by layer, and what each layer encodes.</p>"
            "<p>Loads published AllenNLP / bilm-tf checkpoints (options.json + HDF5) and the "
            "app's own safetensors checkpoints. Apache-2.0.</p>"
            + _demo_attribution())


def _demo_attribution() -> str:
    from elmo_engine.resources import demo_model_attribution

    text = demo_model_attribution()
    if not text:
        return ""
    paragraphs = "".join(f"<p><small>{html.escape(p)}</small></p>" for p in text.split("\n\n"))
    return "<p><b>The bundled demo model</b> was trained on:</p>" + paragraphs


#: the error dialog (common.error_dialog); the window calls it through this module
show_error = error_dialog.show_error
