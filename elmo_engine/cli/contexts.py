"""``elmo-explorer contexts``: one word across sentences, layer by layer, from the command line.

Examples::

    elmo-explorer contexts --word bank
    elmo-explorer contexts --word bank --sentences my.txt --groups river,river,money,money \\
        --direction forward --correct --matrices bank.csv --neighbours 5 --reference wiki.txt
    elmo-explorer contexts --word bank --sentences resources/demo_sentences.tsv   # grouped file
    elmo-explorer contexts --word bank --json -o bank.json       # the summary as JSON, a file

The results (a table, or with ``--json`` one JSON document) go to stdout or ``-o FILE``;
``--matrices``, ``--neighbours-csv`` and ``--vectors`` write further files.

A ``group<TAB>sentence`` file gives every occurrence its sentence's group; ``--groups`` overrides.
A word that does not occur is an error (exit 1) with a did-you-mean. The neighbour index is the
app's: the sentences, then the word's sentences of the bundled reference set (unless
``--no-reference-set``), then ``--reference``, and layer 0's known words include the checkpoint's
``vocab.txt`` (else the demo model's), so the CLI lists the same neighbours as the app.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import List, Optional

from elmo_engine.analysis import DIRECTIONS
from elmo_engine.cli import common
from elmo_engine.cli.common import checkpoint_or_demo, parse_floats
from elmo_engine.errors import InputError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``contexts`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "contexts", help="compare one word's vectors across sentences, layer by layer",
        description="Cosine similarity of a word's occurrences per layer (0..L and a scalar "
                    "mix), self-similarity, within/between-group similarity, and contextual "
                    "nearest neighbours.")
    p.add_argument("--word", required=True, help="the word to compare (exact spelling)")
    p.add_argument("--sentences", type=Path, default=None,
                   help="UTF-8 text, one sentence per line, or group<TAB>sentence lines "
                        "(default: the demo sentences)")
    common.add_checkpoint(p)
    common.add_pretokenized(p)
    p.add_argument("--ignore-case", action="store_true", help="match the word in any case")
    p.add_argument("--direction", choices=DIRECTIONS, default="both",
                   help="both halves of every layer, or only the forward / backward LSTM's")
    p.add_argument("--correct", action="store_true",
                   help="anisotropy correction: subtract the mean vector of all tokens "
                        "(of the sentences and the --reference file) before the cosine")
    common.add_mix_weights(p)
    p.add_argument("--no-layer-norm", action="store_true",
                   help="mix the raw layers (default: normalise each layer first, as "
                        "ScalarMix(do_layer_norm=True) does)")
    p.add_argument("--groups", default=None,
                   help="a group label per occurrence in reading order, comma-separated "
                        "(empty = ungrouped), e.g. river,river,money,money (default: the "
                        "groups of a group<TAB>sentence file, e.g. the demo sentences)")
    p.add_argument("--max-occurrences", dest="compared_occurrences", type=int, default=None,
                   metavar="N",
                   help="compare the first N occurrences in reading order (default 300, as the "
                        "app's Contexts view; at most 10,000: the matrices grow as N²)")
    p.add_argument("--neighbours", type=int, default=0, metavar="K",
                   help="also list the K nearest neighbours of the first occurrence per layer")
    p.add_argument("--reference", type=Path, default=None,
                   help="a text file (sentences or paragraphs, one a line) added to the "
                        "neighbour corpus")
    p.add_argument("--no-reference-set", action="store_true",
                   help="leave the word's sentences of the bundled reference set (SemCor, "
                        "fiction, textbooks; at most 250) out of the neighbour corpus")
    common.add_split_sentences(p, True, "the --reference file")
    p.add_argument("--matrices", type=Path, help="write the similarity matrices as CSV")
    p.add_argument("--neighbours-csv", type=Path, help="write the neighbour lists as CSV")
    p.add_argument("--vectors", type=Path, help="write the occurrences' vectors as npz")
    common.add_json(p)
    common.add_device(p)
    common.add_force(p)
    common.add_results_out(p)
    p.set_defaults(func=run)
    return p


def _sentences(path: Optional[Path], pretokenized: bool):
    """The sentences (a :class:`~elmo_engine.io.datasets.text_input.TextInput`)."""
    if path is None:
        from elmo_engine.resources import demo_sentences_path

        path = demo_sentences_path()
        if not path.is_file():
            raise InputError("no demo sentences installed; pass --sentences FILE")
    return common.read_text(path, pretokenized)


def _fmt(v: float) -> str:
    return "     —" if math.isnan(v) else f"{v:6.3f}"


def run(args) -> int:
    """Run the ``contexts`` subcommand; print the summary, write the requested files."""
    from elmo_engine.analysis.contexts import compare as cmp
    from elmo_engine.analysis.contexts.groups import word_groups
    from elmo_engine.io.report import table_number
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder, check_held_activations
    from elmo_engine.analysis.contexts.neighbour_corpus import (build_index, read_corpus,
                                                                read_vocabulary, vocabulary_file)
    from elmo_engine.analysis.contexts.neighbours import neighbour_table, write_neighbours_csv
    from elmo_engine.index.search import kwic_line
    from elmo_engine.progress import TaskState

    if args.neighbours < 0:
        raise InputError("--neighbours must be at least 0")
    common.refuse_existing(args.force, args.matrices, args.neighbours_csv, args.vectors)
    text = _sentences(args.sentences, args.pretokenized)
    tokens = text.tokens
    occ = cmp.find_occurrences(tokens, args.word, args.ignore_case)
    if not occ:
        raise common.absent_word(args.word, tokens, f"the {len(tokens)} sentences",
                                 path=text.path, hint="--ignore-case matches any case")
    labels = (args.groups or "").split(",") if args.groups is not None else []
    if labels and len(labels) != len(occ):
        raise InputError(f"--groups has {len(labels)} labels for {len(occ)} occurrences of "
                         f"'{args.word}'")
    if args.groups is not None:
        groups = {o: g for o, g in zip(occ, labels) if g}
    elif text.grouped:            # the group<TAB>sentence file's senses, by the one group rule
        groups = word_groups(args.word, tokens, text.groups)
    else:
        groups = {}
    reference: List[List[str]] = []
    if args.reference:                 # read as the Contexts view reads its reference text
        ref = read_corpus(args.reference, args.pretokenized, args.split_sentences)
        if ref.blank_note:
            common.log(f"note: {ref.blank_note}")
        reference = ref.sentences
    if not args.no_reference_set:      # the app's rule: sentences, the word's set, the file
        from elmo_engine.io.datasets.reference_set import (REFERENCE_SET_SENTENCES,
                                                           reference_set_corpus)

        reference = reference_set_corpus(args.word.casefold(), REFERENCE_SET_SENTENCES) + reference
    weights = parse_floats(args.mix_weights, "--mix-weights")
    if weights:                        # one per layer of the model: its options say, before torch
        cmp.normalise_weights(weights, common.checkpoint_options(args.checkpoint).n_output_layers)
    device = common.resolve_device(args.device)
    model = load_checkpoint(checkpoint_or_demo(args.checkpoint), device=device)
    n_tokens = sum(len(s) for s in tokens)
    check_held_activations(n_tokens, model.opts, what="sentences (--sentences)", path=text.path)
    with_index = args.neighbours > 0 or (args.correct and reference)
    if with_index and reference:                # the index embeds both at once
        check_held_activations(n_tokens + sum(len(s) for s in reference), model.opts,
                               what="sentences and the --reference text", path=args.reference)
    emb = Embedder(model, device=str(device))
    progress = common.StderrProgress()          # a reference corpus takes a while: say so
    state = TaskState(progress)
    acts = emb.embed(tokens, state=state)
    index = None
    if with_index:
        vocab = vocabulary_file(model.info.options_path)      # as the app: layer 0's known words
        words = read_vocabulary(vocab) if vocab is not None else []
        index = build_index(emb, tokens + reference, words, state=state)
    progress.close()
    center = index.mean if (args.correct and index is not None) else None
    say = (lambda *a: None) if args.json else print          # the table, unless --json
    comp, vectors, total = cmp.compare_word(tokens, acts, args.word, weights, args.direction,
                                            args.correct, groups, args.ignore_case,
                                            args.compared_occurrences or cmp.MAX_OCCURRENCES,
                                            center, not args.no_layer_norm)
    assert comp is not None and vectors is not None, "the occurrences were found above"
    compared = len(comp.occurrences)
    if compared < total:
        common.log(f"compared the first {compared} of {total} occurrences of '{args.word}' "
                   "(--max-occurrences)")
    summary = {"word": args.word, "occurrences": total, "compared": compared,
               "direction": args.direction,
               "corrected": bool(args.correct), "layer_norm": not args.no_layer_norm}
    say(f"'{args.word}': {total} occurrences in {len(tokens)} sentences"
        f"{f' (the first {compared} compared)' if compared < total else ''}; "
        f"{args.direction} halves{', anisotropy-corrected' if args.correct else ''}; "
        f"mix weights {' '.join(f'{w:.2f}' for w in comp.weights)}")
    say(f"{'view':<10}{'self-sim':>9}{'within':>9}{'between':>9}{'w − b':>9}{'p':>9}")
    for k, name in enumerate(comp.names):
        say(f"{name:<10}   {_fmt(comp.self_sim[k])}   {_fmt(comp.within[k])}   "
              f"{_fmt(comp.between[k])}   {_fmt(comp.within[k] - comp.between[k])}   "
              f"{_fmt(comp.p_value[k])}")
    assert comp.test is not None                     # compare_word always tests
    say(f"p: {comp.test.describe()}")
    summary["mix_weights"] = [round(float(w), 6) for w in comp.weights]
    summary["test"] = comp.test.describe()
    summary["views"] = {name: {"self_similarity": table_number(comp.self_sim[k]),
                               "within": table_number(comp.within[k]),
                               "between": table_number(comp.between[k]),
                               "p": table_number(comp.p_value[k])}
                        for k, name in enumerate(comp.names)}
    if args.matrices:
        cmp.write_matrices_csv(args.matrices, comp)
    if args.vectors:
        cmp.write_vectors_npz(args.vectors, vectors, comp.occurrences,
                              [tokens[s][t] for s, t in comp.occurrences],
                              [" ".join(tokens[s]) for s, _ in comp.occurrences], comp.groups)
    if args.neighbours > 0 and index is not None:        # built above when neighbours are asked
        vec, exclude = vectors[:, 0], [comp.occurrences[0]]
        table = neighbour_table(index, vec, args.word, args.neighbours, args.direction, exclude)
        summary["neighbours"] = {
            "layer 0": [{"word": w, "score": table_number(s)} for w, s in table.words],
            **{name: [{"score": table_number(nb.score), "sentence": " ".join(index.tokens[nb.sentence]),
                       "token": int(nb.token)} for nb in nbs] for name, nbs in table.layers}}
        say("layer 0 (nearest known words): "
              + ", ".join(f"{w} ({s:.3f})" for w, s in table.words))
        for name, nbs in table.layers:
            say(f"{name}:")
            for r, nb in enumerate(nbs, start=1):             # bounded lines, the word centred
                say(f"  {r:2d}. {nb.score:.3f}  {kwic_line(index.tokens[nb.sentence], nb.token)}")
        if args.neighbours_csv:
            write_neighbours_csv(args.neighbours_csv, table.csv_rows(index))
    if args.json:
        common.print_json(summary)
    for path in (args.matrices, args.neighbours_csv, args.vectors):
        if path is not None:
            common.log(f"wrote {path}")
    return 0


__all__ = ["add_parser", "run"]
