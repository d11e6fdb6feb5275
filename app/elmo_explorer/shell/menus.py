"""The main window's menus: File, View, Settings, Help; recent checkpoints and Export."""
from __future__ import annotations

import logging

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QShortcut

from elmo_engine.runtime import cpu_bf16
from elmo_explorer.shell.models_dialog.controller import show_get_model_dialog

log = logging.getLogger(__name__)


def build_menus(window) -> None:
    """Create the menu bar of ``window`` (a MainWindow) and the Esc shortcut."""
    mb = window.menuBar()
    f = mb.addMenu("&File")
    window.act_open_ckpt = _action(window, f, "Open &checkpoint…", window.ask_open_checkpoint,
                                   QKeySequence.StandardKey.Open,
                                   "Open an options .json, weights .hdf5 or .safetensors file")
    _action(window, f, "Open checkpoint &folder…", window.ask_open_checkpoint_folder, "Ctrl+Shift+O")
    window.act_demo = _action(window, f, "Open &demo model", window.open_demo_model, "Ctrl+D")
    window.act_get_model = _action(window, f, "&Get a published model…",
                                   lambda: show_get_model_dialog(window), "Ctrl+G",
                                   "Download AllenNLP's published ELMo models (small, medium, "
                                   "original, original-5.5b) and open them")
    window.recent_menu = f.addMenu("&Recent checkpoints")
    window.recent_menu.aboutToShow.connect(lambda: fill_recent(window))
    window.act_compare = _action(window, f, "Co&mpare with checkpoint…", window.ask_compare_checkpoint,
                                 "Ctrl+Shift+M", "CKA between the loaded model's layers and "
                                 "another checkpoint's (Layers tab)")
    f.addSeparator()
    _action(window, f, "Open &sentences…", window.ask_open_sentences, "Ctrl+L")
    _action(window, f, "&Save sentences…", window.ask_save_sentences, QKeySequence.StandardKey.Save)
    _action(window, f, "Demo sentences", window.load_demo_sentences)
    f.addSeparator()
    window.export_menu = f.addMenu("&Export")
    window.export_menu.aboutToShow.connect(lambda: fill_export(window))
    f.addSeparator()
    _action(window, f, "&Quit", window.close, QKeySequence.StandardKey.Quit)

    v = mb.addMenu("&View")
    v.addAction(window.sentences_dock.toggleViewAction())
    _action(window, v, "Sentence editor", lambda: window.show_view("sentences"), "Ctrl+1")
    for k, view in enumerate(window.panels, start=2):
        _action(window, v, window.tabs.tabText(k - 2),
                lambda _=False, w=view: window.show_view(w), f"Ctrl+{k}")

    v.addSeparator()
    _action(window, v, "&Run the view's main action", window.run_shown_view, "Ctrl+R",
            "Run, Run UMAP / Compute, Train, Score, Build, or the shown tab's action")

    s = mb.addMenu("&Settings")
    window.device_menu = s.addMenu("&Device")
    window.precision_menu = s.addMenu("&Precision")
    _build_choice_menu(window, window.device_menu, "device",
                       [("auto", "Automatic (GPU when available)"), ("cpu", "CPU"),
                        ("cuda", "GPU (CUDA)")])
    _build_choice_menu(window, window.precision_menu, "precision",
                       [("fp32", "fp32 (exact)"), ("fp16", "fp16 (GPU only)"),
                        ("bf16", "bf16 (GPU, or a CPU with bf16 units)")])
    window.tokenization_menu = s.addMenu("&Tokenization")
    _build_choice_menu(window, window.tokenization_menu, "tokenization",
                       [("tokenize", "Typed text (tokenized as the 1B Word Benchmark)"),
                        ("whitespace", "Pretokenized (split on spaces, as --pretokenized)")],
                       window.set_tokenization)

    h = mb.addMenu("&Help")
    window.act_info = _action(window, h, "Model &info…", window.show_model_info, "Ctrl+I")
    _action(window, h, "Open &log folder", window.open_log_folder)
    _action(window, h, "&About", window.show_about)

    window.menus = {"file": f, "view": v, "settings": s, "help": h}
    esc = QShortcut(QKeySequence(Qt.Key.Key_Escape), window)
    esc.setContext(Qt.ShortcutContext.WindowShortcut)
    esc.activated.connect(window.cancel_jobs)


def _action(window, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
    act = QAction(text, window)
    if shortcut is not None:
        act.setShortcut(QKeySequence(shortcut))
    if tip:
        act.setStatusTip(tip)
    act.triggered.connect(slot)
    menu.addAction(act)
    return act


def _build_choice_menu(window, menu, key: str, choices, slot=None) -> None:
    """One checkable action per choice of the setting ``key``; choosing one calls
    ``slot(value)`` (default: the window's ``set_run_option(key, value)``, which reloads the
    model). Whether the GPU and the CPU's bf16 units are there is asked when the menu first
    opens (:func:`_mark_capabilities`): asking imports torch, which the window does not wait
    for."""
    group = QActionGroup(window)
    group.setExclusive(True)
    current = getattr(window.settings, key)
    for value, text in choices:
        act = QAction(text, window, checkable=True)
        act.setData(value)
        act.setChecked(value == current)
        act.triggered.connect(lambda _=False, k=key, v=value: window.set_run_option(k, v)
                              if slot is None else slot(v))
        group.addAction(act)
        menu.addAction(act)
    if any(value in HARDWARE_CHOICES for value, _ in choices):
        marked = []

        def mark_once() -> None:
            if not marked:
                marked.append(True)
                _mark_capabilities(menu)

        menu.aboutToShow.connect(mark_once)


#: choices that need a CUDA GPU or, for bf16, a CPU with bf16 units
HARDWARE_CHOICES = ("cuda", "fp16", "bf16")


def _mark_capabilities(menu) -> None:
    """Name the GPU, and disable (with the reason as the tooltip) the choices this machine
    cannot run."""
    cuda = cuda_name()
    for act in menu.actions():
        value = act.data()
        if value == "cuda" and cuda:
            act.setText(f"GPU ({cuda})")
        if value == "bf16" and cpu_bf16().offered:
            # measured: cosine to fp32 >= 0.9999 per layer (0.1 % quantile); docs/performance.md
            act.setToolTip(f"runs on this CPU's {cpu_bf16().units} units; vectors within cosine "
                           "0.9999 of fp32 (docs/performance.md)")
        elif value in HARDWARE_CHOICES and not cuda:
            act.setEnabled(False)
            act.setToolTip("no CUDA GPU found" if value != "bf16" else cpu_bf16().refusal())


def fill_recent(window) -> None:
    """Rebuild File → Recent checkpoints from the settings."""
    window.recent_menu.clear()
    items = window.settings.recent_checkpoints()
    for p in items:
        act = window.recent_menu.addAction(p)
        act.triggered.connect(lambda _=False, path=p: window.open_checkpoint(path))
    if not items:
        window.recent_menu.addAction("(none)").setEnabled(False)
    else:
        window.recent_menu.addSeparator()
        window.recent_menu.addAction("Clear list", window.settings.clear_recent_checkpoints)


def fill_export(window) -> None:
    """Rebuild File → Export from every panel's ``export_actions()``."""
    window.export_menu.clear()
    sources = [(window.sentences.title, window.sentences)]
    sources += [(window.tabs.tabText(window.tabs.indexOf(p)), p) for p in window.panels.values()]
    for title, panel in sources:
        try:
            actions = list(panel.export_actions())
        except Exception:
            log.exception("export actions of %s failed", title)
            continue
        if not actions:
            continue
        window.export_menu.addSection(title)
        for act in actions:
            window.export_menu.addAction(act)


def cuda_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # no usable CUDA runtime: CPU only
        log.info("CUDA not available", exc_info=True)
    return ""
