"""Training a biLM on your own corpus (``elmo-explorer train-lm``). Qt-free.

Modules: :mod:`.data` (reading, sentence framing, carried-state windows), :mod:`.vocab`,
:mod:`.dataset` (prepared data), :mod:`.model` (biLM + shared sampled/full softmax),
:mod:`.config` (the run's settings and result), :mod:`.trainer` (the loop), :mod:`.state_io`
(resumable state, export), :mod:`.names` (the files a run writes, and which folder a run
wrote; no torch), :mod:`.ddp` (data-parallel with ``torchrun``), :mod:`.presets`; the
command line is :mod:`elmo_engine.cli.train_lm`.
"""
