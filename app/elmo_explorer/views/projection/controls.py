"""The control bar of the projection view and its legend list (plain widgets, no jobs)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QGridLayout, QHBoxLayout,
                               QLabel, QLineEdit, QListWidget, QListWidgetItem, QMenu,
                               QPushButton, QSpinBox, QToolButton, QWidget, QWidgetAction)

from elmo_engine.errors import InputError
from elmo_engine.analysis.projection import UmapParams, parse_word_list
from elmo_explorer.views.layer_norm import layer_norm_box
from elmo_explorer.views.projection.model import (STATE_VERSION, as_float, as_int,
                                                   mix_weights_text, parse_weights)

SOURCES = (("reference", "Word in reference corpus"), ("loaded", "Loaded sentences"),
           ("words", "Word list"), ("dataset", "Labelled data set"))
COLOUR_BY = (("group", "Group"), ("sense", "Sense"), ("label", "Part of speech / label"),
             ("sentence", "Sentence"), ("word", "Word"),
             ("kept", "Neighbourhood preserved"))     # per map: its kNN kept (issue 42)
DEFAULT_MAX_POINTS = 20_000


class ProjectionControls(QWidget):
    """Token source, colouring, search, UMAP parameters, layer-mix weights, Run / Cancel.

    Signals
    -------
    run_requested, cancel_requested, open_dataset_requested : the buttons
    source_changed(str) : "loaded", "words" or "dataset"
    colour_changed(str) : "word", "label" or "sentence"
    search_changed(str) : the search text (as typed)
    select_mode_toggled(bool) : the box-select tool
    clear_selection_requested
    """

    run_requested = Signal()
    cancel_requested = Signal()
    open_dataset_requested = Signal()
    source_changed = Signal(str)
    colour_changed = Signal(str)
    search_changed = Signal(str)
    select_mode_toggled = Signal(bool)
    clear_selection_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        g = QGridLayout(self)
        g.setContentsMargins(4, 4, 4, 0)
        g.setHorizontalSpacing(6)
        g.setVerticalSpacing(3)

        self.source = QComboBox()
        for key, text in SOURCES:
            self.source.addItem(text, key)
        self.words = QLineEdit()
        self.words.setPlaceholderText("words, e.g. bank, play, light")
        self.words.setToolTip("Project every occurrence of these words (space or comma separated)")
        self.open_button = QPushButton("Open data set…")
        self.open_button.setToolTip("CoNLL-U (UPOS labels), WSD framework XML (+ .gold.key.txt) "
                                    "or token<TAB>label TSV")
        self.dataset_label = QLabel("no data set")
        self.dataset_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.max_points = QSpinBox()
        self.max_points.setRange(100, 200_000)
        self.max_points.setSingleStep(1000)
        self.max_points.setValue(DEFAULT_MAX_POINTS)
        self.max_points.setGroupSeparatorShown(True)
        self.max_points.setToolTip("At most this many tokens (a fixed random sample beyond it)")
        self.max_points.setMaximumWidth(110)
        self.colour = QComboBox()
        for key, text in COLOUR_BY:
            self.colour.addItem(text, key)
        self.search = QLineEdit()
        self.search.setPlaceholderText("find a token…")
        self.search.setClearButtonEnabled(True)

        row = QHBoxLayout()
        for w in (QLabel("Tokens:"), self.source, self.words, self.open_button, self.dataset_label,
                  QLabel("at most"), self.max_points):
            row.addWidget(w)
        row.setStretchFactor(self.words, 1)
        row.addStretch(0)
        g.addLayout(row, 0, 0)

        self.n_neighbors = QSpinBox()
        self.n_neighbors.setRange(2, 200)
        self.n_neighbors.setValue(15)
        self.min_dist = QDoubleSpinBox()
        self.min_dist.setRange(0.0, 1.0)
        self.min_dist.setSingleStep(0.05)
        self.min_dist.setDecimals(2)
        self.min_dist.setValue(0.1)
        self.seed = QSpinBox()
        self.seed.setRange(-1, 999_999)
        self.seed.setValue(42)
        self.seed.setSpecialValueText("random")
        self.seed.setToolTip("A fixed seed reproduces the picture (single-threaded); "
                             "'random' (-1) runs multi-threaded")
        self.epochs = QSpinBox()
        self.epochs.setRange(0, 5000)
        self.epochs.setSingleStep(50)
        self.epochs.setValue(0)
        self.epochs.setSpecialValueText("auto")
        self.epochs.setToolTip("Layout epochs; 'auto' = umap's rule (500 up to 10,000 tokens, "
                               "200 above). Time grows with it.")
        self.mix = QLineEdit()
        self.mix.setPlaceholderText("equal")
        self.mix.setToolTip("Scalar-mix weights, one per layer (normalised to sum 1), e.g. "
                            "0.2, 0.3, 0.5; empty = equal weights")
        self.layer_norm = layer_norm_box("Normalise layers before mixing",
                                         "the projected sentences")
        self.run_button = QPushButton("Run UMAP")
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.select_button = QToolButton()
        self.select_button.setText("Box select")
        self.select_button.setCheckable(True)
        self.select_button.setToolTip("Drag a box to select tokens (or Shift+drag at any time)")
        self.clear_button = QToolButton()
        self.clear_button.setText("Clear")
        self.clear_button.setToolTip("Clear the selection")
        self.status = QLabel("")            # placed by the panel, under the plots
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setWordWrap(True)

        self.settings_button = QToolButton()
        self.settings_button.setText("Settings")
        self.settings_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        form_widget = QWidget()
        form = QFormLayout(form_widget)
        form.addRow("UMAP neighbours", self.n_neighbors)
        form.addRow("UMAP min dist", self.min_dist)
        form.addRow("UMAP seed", self.seed)
        form.addRow("UMAP epochs", self.epochs)
        form.addRow("Mix weights", self.mix)
        form.addRow("", self.layer_norm)
        menu = QMenu(self.settings_button)
        action = QWidgetAction(menu)
        action.setDefaultWidget(form_widget)
        menu.addAction(action)
        menu.aboutToHide.connect(self._update_settings_tip)
        self.settings_button.setMenu(menu)
        self._update_settings_tip()

        row2 = QHBoxLayout()
        for w in (self.run_button, self.cancel_button, self.settings_button,
                  QLabel("Colour by:"), self.colour, self.search, self.select_button,
                  self.clear_button):
            row2.addWidget(w)
        row2.setStretchFactor(self.search, 1)
        g.addLayout(row2, 1, 0)

        self.source.currentIndexChanged.connect(self._on_source)
        self.colour.currentIndexChanged.connect(
            lambda _i: self.colour_changed.emit(self.colour_by()))
        self.search.textChanged.connect(self.search_changed)
        self.words.returnPressed.connect(self.run_requested)
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.open_button.clicked.connect(self.open_dataset_requested)
        self.select_button.toggled.connect(self.select_mode_toggled)
        self.clear_button.clicked.connect(self.clear_selection_requested)
        self._on_source()

    # ---- values -------------------------------------------------------------------------------
    def source_key(self) -> str:
        return self.source.currentData()

    def set_source(self, key: str) -> None:
        self.source.setCurrentIndex([k for k, _ in SOURCES].index(key))

    def colour_by(self) -> str:
        return self.colour.currentData()

    def set_colour_by(self, key: str) -> None:
        self.colour.setCurrentIndex([k for k, _ in COLOUR_BY].index(key))

    def word_list(self) -> List[str]:
        return parse_word_list(self.words.text())

    def params(self) -> UmapParams:
        """The UMAP settings (raises InputError on a bad value)."""
        seed = self.seed.value()
        epochs = self.epochs.value()
        return UmapParams(n_neighbors=self.n_neighbors.value(), min_dist=self.min_dist.value(),
                          random_state=None if seed < 0 else seed,
                          n_epochs=epochs or None)     # 1–9 refused, as `project --epochs`

    def mix_weights(self, n_layers: int) -> List[float]:
        """The scalar-mix weights for ``n_layers`` layers (equal when the field is empty)."""
        text = self.mix.text().strip()
        if not text:
            return [1.0] * n_layers
        try:
            w = [float(v) for v in text.replace(";", ",").replace(" ", ",").split(",") if v]
        except ValueError:
            raise InputError(f"mix weights must be numbers, got {text!r}") from None
        if len(w) != n_layers:
            raise InputError(f"{len(w)} mix weights for {n_layers} layers")
        return w

    def settings_text(self) -> str:
        """The UMAP settings in one line (the Settings button's tooltip)."""
        seed = self.seed.value()
        return (f"neighbours {self.n_neighbors.value()}, min dist {self.min_dist.value():.2f}, "
                f"seed {'random' if seed < 0 else seed}, epochs {self.epochs.text()}, "
                f"mix weights {self.mix.text().strip() or 'equal'}"
                + (", layers normalised" if self.layer_norm.isChecked() else ""))

    def _update_settings_tip(self) -> None:
        self.settings_button.setToolTip("UMAP and scalar-mix settings: " + self.settings_text())

    def set_running(self, running: bool) -> None:
        self.cancel_button.setEnabled(running)

    # ---- saved with a workspace ---------------------------------------------------------------
    def state(self, dataset_file: Optional[str]) -> Dict[str, Any]:
        """The controls as JSON values (the view state of docs/guide/projection.md)."""
        return {"version": STATE_VERSION, "source": self.source_key(), "words": self.words.text(),
                "dataset_file": dataset_file,
                "max_points": self.max_points.value(), "colour_by": self.colour_by(),
                "umap": {"n_neighbors": self.n_neighbors.value(),
                         "min_dist": self.min_dist.value(), "seed": self.seed.value(),
                         "epochs": self.epochs.value()},
                "mix_weights": parse_weights(self.mix.text()),
                "layer_norm": self.layer_norm.isChecked(), "search": self.search.text()}

    def apply_state(self, state: Dict[str, Any]) -> None:
        """Show what a saved ``state()`` sets validly, without announcing it (missing, unknown
        or invalid keys are ignored; the controller recomputes once, after)."""
        widgets = (self, self.source, self.words, self.max_points, self.colour, self.search,
                   self.n_neighbors, self.min_dist, self.seed, self.epochs, self.mix,
                   self.layer_norm)
        blocked = [w.blockSignals(True) for w in widgets]
        try:
            self._apply(state)
            self._on_source()                    # show the source's widgets (signal blocked)
        finally:
            for w, was in zip(widgets, blocked):
                w.blockSignals(was)
        self._update_settings_tip()

    def _apply(self, state: Dict[str, Any]) -> None:
        if state.get("source") in [k for k, _ in SOURCES]:
            self.set_source(state["source"])
        if isinstance(state.get("words"), str):
            self.words.setText(state["words"])
        if as_int(state.get("max_points")) is not None:
            self.max_points.setValue(state["max_points"])    # clamped to the box's range
        if state.get("colour_by") in [k for k, _ in COLOUR_BY]:
            self.set_colour_by(state["colour_by"])
        if isinstance(state.get("search"), str):
            self.search.setText(state["search"])
        umap = state.get("umap")
        if isinstance(umap, dict):
            for key, box in (("n_neighbors", self.n_neighbors), ("seed", self.seed),
                             ("epochs", self.epochs)):
                if as_int(umap.get(key)) is not None:
                    box.setValue(umap[key])
            if as_float(umap.get("min_dist")) is not None:
                self.min_dist.setValue(umap["min_dist"])
        text = mix_weights_text(state)                       # "": equal weights
        if text is not None:
            self.mix.setText(text)
        if isinstance(state.get("layer_norm"), bool):
            self.layer_norm.setChecked(state["layer_norm"])

    def _on_source(self, *_args) -> None:
        key = self.source_key()
        self.words.setVisible(key in ("words", "reference"))
        self.words.setPlaceholderText("word, e.g. bank (default: the selected word)"
                                      if key == "reference" else "words, e.g. bank, play, light")
        self.open_button.setVisible(key == "dataset")
        self.dataset_label.setVisible(key == "dataset")
        self.source_changed.emit(key)


class LegendList(QListWidget):
    """The colour legend: a swatch, the category and its count per row.

    ``entry_clicked(int)`` gives the row of a clicked entry.
    """

    entry_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMinimumWidth(120)
        self.setMaximumWidth(220)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.setWordWrap(True)              # "reference: openstax_prose (235)" whole, on 2 lines
        self.setToolTip("Click an entry to select its tokens in every plot")
        self.itemClicked.connect(lambda item: self.entry_clicked.emit(self.row(item)))
        self._icons = {}

    def set_entries(self, entries: Sequence[Tuple[str, str, int]]) -> None:
        self.clear()
        for name, colour, count in entries:
            item = QListWidgetItem(self._icon(colour), f"{name}  ({count:,})")
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setToolTip(f"{name}: {count:,} tokens")
            self.addItem(item)

    def entries(self) -> List[str]:
        return [self.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.count())]

    def _icon(self, colour: str) -> QIcon:
        icon = self._icons.get(colour)
        if icon is None:
            pm = QPixmap(12, 12)
            pm.fill(QColor(colour))
            icon = self._icons[colour] = QIcon(pm)
        return icon

