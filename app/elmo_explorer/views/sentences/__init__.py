"""The Sentences view: see controller.py (the panel)."""
