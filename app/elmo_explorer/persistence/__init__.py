"""Persistence: workspace files (save / open), autosave, crash recovery and the report actions.
Talks to the views only through the AnalysisPanel protocol."""
