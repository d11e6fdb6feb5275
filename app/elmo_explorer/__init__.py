"""ELMo Explorer desktop app (PySide6): the window, the worker thread, the analysis panels."""
