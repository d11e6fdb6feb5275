"""The Projection view: see controller.py (the panel)."""
