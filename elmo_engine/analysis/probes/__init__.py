"""Probes: how much does each biLM layer help a classifier for syntax and for word sense?

* :mod:`.experiment` — :class:`ProbeConfig`, :class:`ProbeResult` and :func:`probe_sentences`
  (per-layer, scalar-mix and centroid probes, control tasks, baselines);
* :mod:`.features` — examples from labelled sentences, control tasks, scores;
* :mod:`.classifiers` — the torch classifiers and their training loop;
* :mod:`.tasks` — which data a probe runs on (demo tasks, the user's files);
* :mod:`.tables` — results as text, rows, CSV and JSON.
"""
