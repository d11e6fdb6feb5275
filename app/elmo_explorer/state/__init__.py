"""Shared state: the workspace (model handle, sentences, selection), the worker (job handles, two
lanes) and the app settings. Imports the engine only."""
