"""Training a biLM on your own corpus (``elmo-explorer train-lm``). Qt-free.

Modules: :mod:`.data` (reading, sentence framing, carried-state windows), :mod:`.vocab`,
:mod:`.dataset` (prepared data), :mod:`.model` (biLM + shared sampled/full softmax),
:mod:`.trainer` (the loop), :mod:`.state_io` (resumable state, export), :mod:`.ddp`
(data-parallel with ``torchrun``), :mod:`.presets`, :mod:`.cli`.
"""
