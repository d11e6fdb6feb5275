"""A trained biLM's perplexity on a text (``elmo-explorer eval-lm``).

The text is read as ``train-lm`` reads a corpus (UTF-8, ``.gz`` allowed, ``= … =`` header lines
skipped, paragraphs split into sentences, the same tokenizer) and scored with the full softmax,
the state carried from sentence to sentence in file order, as ``train-lm`` scores its dev files.
Words outside the model's vocabulary count as ``<UNK>`` (the share is reported).

Published ELMo files (``options.json`` + weights) carry no softmax, so their perplexity cannot be
computed: :class:`CheckpointError` says so (the command prints it in one line, status 1). Models written by ``train-lm`` carry it in
``softmax.safetensors`` beside ``vocab.txt``.
"""
from __future__ import annotations

from pathlib import Path

from elmo_engine.errors import CheckpointError, InputError


def model_folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def evaluate_text(checkpoint, text, device: str = "cpu", batch_size: int = 32,
                  unroll: int = 20, tokenizer: str = "regex", progress=None) -> dict:
    """Perplexity of ``text`` under the biLM in ``checkpoint``: ``fwd``, ``bwd``, ``mean``,
    ``tokens`` (positions scored per direction), ``oov_rate`` and ``vocab_size``.

    Raises :class:`CheckpointError` (no softmax, mismatched files) or :class:`InputError`."""
    import numpy as np
    import torch

    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.train import state_io
    from elmo_engine.train.data import TypeTable, frame, read_sentences
    from elmo_engine.train.model import BiLanguageModel
    from elmo_engine.train.trainer import perplexity
    from elmo_engine.train.vocab import Vocabulary

    if batch_size < 1 or unroll < 1:
        raise InputError("--batch-size and --unroll must be at least 1")
    folder = model_folder(Path(checkpoint))
    bilm = load_checkpoint(checkpoint)
    soft = folder / state_io.SOFTMAX_FILE
    vocab_path = folder / "vocab.txt"
    if not soft.is_file():
        raise CheckpointError(folder, "no softmax: published ELMo files carry none, so a "
                              "perplexity cannot be computed (eval-lm needs a model written by "
                              f"train-lm, with {state_io.SOFTMAX_FILE} and vocab.txt)")
    if not vocab_path.is_file():
        raise CheckpointError(folder, "vocab.txt is missing beside the softmax")
    vocab = Vocabulary.load(vocab_path)
    w, b = state_io.load_softmax(soft, len(vocab), bilm.opts.output_dim)
    model = BiLanguageModel(bilm.opts, len(vocab), fused=False)
    model.bilm = bilm
    with torch.no_grad():
        model.softmax_w = torch.nn.Parameter(w, requires_grad=False)
        model.softmax_b = torch.nn.Parameter(b, requires_grad=False)
    dev = torch.device(device)
    model.to(dev)
    sents = read_sentences(text, tokenizer, True, True, "text")
    table = TypeTable(bilm.opts.max_characters_per_token)
    table.ids(vocab.tokens)
    framed = frame(table, sents)
    type_chars = torch.from_numpy(table.char_ids()).to(dev)
    type2vocab = torch.from_numpy(table.vocab_ids(vocab)).to(dev)
    words = np.concatenate([f[1:-1] for f in framed])
    oov = float((table.vocab_ids(vocab)[words] == vocab.unk).mean()) if len(words) else 0.0
    res = perplexity(model, framed, type_chars, type2vocab, batch_size, unroll, dev, text,
                     progress)
    res.update(oov_rate=oov, vocab_size=len(vocab), sentences=len(framed))
    return res
