"""Inside the LSTM: units ranked for a property, and switched off in the live biLM (issue 40).

``collect`` gathers the internal states (:mod:`elmo_engine.model.lstm_inspect`) of labelled
words; ``rank`` ranks the units of each layer, direction and state kind by an elastic-net probe
and by the class-mean difference, with the top-k against random-k curve; ``ablate`` scores the
minimal pairs with units zeroed (Lakretz et al. 2019). See docs/guide/units.md.
"""
from elmo_engine.analysis.units.ablate import (Accuracy, AblationResult, AblationRow,
                                               WordPredictions, ablation_experiment,
                                               pair_accuracy, sentence_log_probs,
                                               token_predictions)
from elmo_engine.analysis.units.collect import UnitData, collect
from elmo_engine.analysis.units.rank import (CurvePoint, Method, RankSettings, UnitRanking,
                                             rank_units)

__all__ = ["Accuracy", "AblationResult", "AblationRow", "CurvePoint", "Method", "RankSettings",
           "UnitData", "UnitRanking", "ablation_experiment", "collect", "pair_accuracy",
           "rank_units", "sentence_log_probs", "token_predictions", "WordPredictions"]
