"""The Units view: see controller.py (the panel)."""
