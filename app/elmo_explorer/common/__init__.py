"""Helpers every layer of the app may use: save dialogs, figure-export options, the map views'
box selection."""
