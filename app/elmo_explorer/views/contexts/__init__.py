"""The Contexts view: see controller.py (the panel)."""
