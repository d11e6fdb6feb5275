"""A trained biLM's perplexity on a text (``elmo-explorer eval-lm``).

The text is read as ``train-lm`` reads a corpus (UTF-8, ``.gz`` allowed, ``= … =`` header lines
skipped, paragraphs split into sentences, the same tokenizer) and scored with the full softmax,
the state carried from sentence to sentence in file order, as ``train-lm`` scores its dev files.
Words outside the model's vocabulary count as ``<UNK>`` (the share is reported).

The softmax is read by :func:`elmo_engine.model.softmax.load_softmax`: ``softmax.safetensors`` +
``vocab.txt`` written by ``train-lm``, or the published ``*_softmax_weights.hdf5`` + ``vocab*.txt``
beside the options and weights (or given with ``softmax``/``vocab``). Published weights without
their softmax file: :class:`CheckpointError` names the missing file and where to get it (the
command prints it in one line, status 1). The logits are made block by block over the vocabulary
(:func:`elmo_engine.model.softmax_scan.nll_sum`), so the original model's 793k-word softmax is
held once, in float16, and never as a (rows, V) float32 matrix of a whole window.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from elmo_engine.errors import InputError


def model_folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def evaluate_text(checkpoint, text, device: str = "cpu", batch_size: int = 32,
                  unroll: int = 20, tokenizer: str = "tokenize", progress=None,
                  softmax: Optional[Path] = None, vocab: Optional[Path] = None) -> dict:
    """Perplexity of ``text`` under the biLM in ``checkpoint``: ``fwd``, ``bwd``, ``mean``,
    ``tokens`` (positions scored per direction), ``oov_rate`` and ``vocab_size``.

    Raises :class:`CheckpointError` (no softmax, mismatched files) or :class:`InputError`."""
    import numpy as np
    import torch

    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.softmax import load_softmax
    from elmo_engine.train.data import TypeTable, frame
    from elmo_engine.io.datasets.corpus_text import read_sentences
    from elmo_engine.train.trainer import perplexity

    if batch_size < 1 or unroll < 1:
        raise InputError("--batch-size and --unroll must be at least 1")
    folder = model_folder(Path(checkpoint))
    bilm = load_checkpoint(checkpoint)
    soft = load_softmax(folder, softmax, vocab, output_dim=bilm.opts.output_dim)
    model = _SoftmaxLM(bilm, soft)
    dev = torch.device(device)
    model.to(dev)
    sents = read_sentences(text, tokenizer, True, True, "text")
    table = TypeTable(bilm.opts.max_characters_per_token)
    framed = frame(table, sents)
    type_chars = torch.from_numpy(table.char_ids()).to(dev)
    type2vocab = torch.from_numpy(table.vocab_ids(soft)).to(dev)
    words = np.concatenate([f[1:-1] for f in framed])
    oov = float((table.vocab_ids(soft)[words] == soft.unk).mean()) if len(words) else 0.0
    res = perplexity(model, framed, type_chars, type2vocab, batch_size, unroll, dev, text,
                     progress)
    res.update(oov_rate=oov, vocab_size=soft.vocab_size, sentences=len(framed))
    return res


class _SoftmaxLM:
    """The biLM's top layer + a (possibly huge) :class:`~elmo_engine.model.softmax.Softmax`,
    with the two methods :func:`elmo_engine.train.trainer.perplexity` calls."""

    def __init__(self, bilm, soft):
        from elmo_engine.train.model import BiLanguageModel

        self.lm = BiLanguageModel(bilm.opts, 1, fused=False)   # a 1-word placeholder softmax
        self.lm.bilm = bilm
        self.lm.eval()
        self.bilm = bilm
        self.soft = soft

    def to(self, device):
        self.lm.to(device)
        return self

    def full_nll(self, type_chars, inputs, targets, state):
        import torch

        from elmo_engine.model.softmax_scan import nll_sum

        with torch.no_grad():
            h, new_state = self.lm.top(type_chars, inputs, state)     # (2, B, T, P)
            y = targets.reshape(2, -1)
            h = h.reshape(2, -1, h.shape[-1])
            total = torch.stack([nll_sum(self.soft, h[d], y[d]) for d in range(2)])
        return total, new_state
