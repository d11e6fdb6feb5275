"""The Probes view: see controller.py (the panel)."""
