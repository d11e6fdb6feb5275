"""Bundled data files (demo model, demo sentences, demo probe tasks); no code."""
