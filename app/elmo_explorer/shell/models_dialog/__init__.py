"""File → Get a published model…: the catalogue, what is on disk, download, open, verify, remove.

``model.py`` (no Qt: rows, what each button may do, the progress and error lines),
``view.py`` (widgets only), ``controller.py`` (:class:`GetModelDialog`: wires them to the engine's
model store and the worker). See docs/guide/models.md.
"""
