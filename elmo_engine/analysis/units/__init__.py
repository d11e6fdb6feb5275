"""Inside the LSTM: units ranked for a property, and switched off in the live biLM (issue 40).

* :mod:`.collect` — :func:`~.collect.collect` gathers the internal states
  (:mod:`elmo_engine.model.lstm_inspect`) of labelled words;
* :mod:`.rank` — :func:`~.rank.rank_units` ranks the units of each layer, direction and state kind
  by an elastic-net probe and by the class-mean difference, with the top-k against random-k curve;
* :mod:`.ablate` — scores the minimal pairs with units zeroed (Lakretz et al. 2019);
* :mod:`.contexts`, :mod:`.pattern`, :mod:`.corpus` — a unit's top contexts, a pattern search and
  the corpora they read; :mod:`.remeasure` and :mod:`.report` — interventions re-measured, and
  the results as documents.

The package itself imports nothing, so a light helper (``corpus.is_conllu``) does not bring
torch along: import the names from their modules. See docs/guide/units.md.
"""
