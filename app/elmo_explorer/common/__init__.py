"""Helpers every layer of the app may use: save dialogs and figure-export options."""
