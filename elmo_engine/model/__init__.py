"""The biLM itself: options, character ids, tokenization, the network, its checkpoints.

* :mod:`.options` — the published ``options.json`` (:class:`BiLMOptions`);
* :mod:`.chars`, :mod:`.tokenize` — tokens → character ids; typed text → tokens;
* :mod:`.char_cnn`, :mod:`.lstm`, :mod:`.lstm_packed`, :mod:`.bilm` — the network
  (char-CNN → highway → projection → L × forward/backward LSTM with projection);
* :mod:`.cpu_fast` — the CPU fast path (oneDNN pre-packed weights, directions in two threads,
  scratch buffers) and its switches (:class:`~.cpu_fast.FastPath`);
* :mod:`.layout`, :mod:`.checkpoint` — the published tensor layout; loading and saving;
* :mod:`.mix` — ELMo's scalar mix; :mod:`.reference` — a plain step-by-step reference path.

See docs/checkpoint-format.md for the format and the computation.
"""
