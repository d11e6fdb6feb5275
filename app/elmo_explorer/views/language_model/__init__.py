"""The "Language model" view (issue 27): predictions, reach and minimal pairs."""
