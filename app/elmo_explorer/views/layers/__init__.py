"""The Layers view: see controller.py (the panel)."""
