"""``elmo-explorer project``: the projection view's computation, headless.

Embeds sentences (a text file, one per line) or a labelled data set, projects the chosen tokens
per layer (and the scalar mix) with PCA → UMAP, and writes the coordinates as CSV and, optionally,
one layer's vectors as a TensorBoard projector pair. With ``--aligned`` it writes the layers'
layouts in one frame instead (:mod:`elmo_engine.cli.project_aligned`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict

from elmo_engine.cli import common, project_aligned
from elmo_engine.errors import InputError

#: --faithfulness-k / --faithfulness-points: every map's trustworthiness, continuity and kNN kept
#: (:mod:`elmo_engine.analysis.projection.faithfulness`) on stderr and in the JSON's
#: ``projections`` entries; the defaults are the app's captions' (a test)
FAITHFULNESS_K = 10
FAITHFULNESS_POINTS = 5000


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``project`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "project", help="UMAP/PCA coordinates of tokens per layer (CSV, TensorBoard TSV)",
        description="Project the tokens of a sentence file (or a labelled data set) to 2-D, one "
                    "projection per biLM layer and one for the scalar mix, as the projection "
                    "view does.")
    p.add_argument("input", type=Path,
                   help="sentences, one per line (tokenized with the app's tokenizer; blank "
                        "lines skipped); with --labelled: a CoNLL-U, WSD XML or token<TAB>label "
                        "file")
    p.add_argument("--labelled", action="store_true", help="INPUT is a labelled data set")
    p.add_argument("--words", help="only these words (comma or space separated, any case)")
    common.add_pretokenized(p)
    common.add_checkpoint(p)
    common.add_device(p)
    p.add_argument("--method", choices=["umap", "pca"], default="umap",
                   help="the map of each layer (default umap); with --aligned procrustes, each "
                        "layer's own map before it is moved")
    p.add_argument("--n-neighbors", type=int, default=15)
    p.add_argument("--min-dist", type=float, default=0.1)
    p.add_argument("--seed", dest="umap_seed", type=int, default=42,
                   help="UMAP's seed (default 42); -1: unseeded (multi-threaded)")
    p.add_argument("--epochs", type=int, default=None, help="UMAP epochs (default: umap's rule)")
    common.add_mix_weights(p)
    p.add_argument("--no-layer-norm", action="store_true",
                   help="mix the layers as they are (default: each layer normalised by its mean "
                        "and standard deviation first, as contexts does)")
    p.add_argument("--max-points", type=int, default=20_000,
                   help="a seeded random sample of at most this many tokens (default 20000)")
    p.add_argument("--faithfulness-k", type=int, default=FAITHFULNESS_K,
                   help=f"neighbours for trustworthiness, continuity and kNN kept (default "
                        f"{FAITHFULNESS_K})")
    p.add_argument("--faithfulness-points", type=int, default=FAITHFULNESS_POINTS,
                   help="measure the maps' faithfulness on a seeded sample of at most N tokens "
                        f"(default {FAITHFULNESS_POINTS}; the cost is N² × the vector width)")
    common.add_out(p, "the coordinates, CSV ('-': stdout)")
    p.add_argument("--tensorboard", type=Path, metavar="DIR",
                   help="also write DIR/vectors.tsv + DIR/metadata.tsv of --tensorboard-layer")
    p.add_argument("--tensorboard-layer", default="mix",
                   help="layer index or 'mix' for --tensorboard (default mix)")
    common.add_json(p)
    project_aligned.add_options(p)
    common.add_force(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from elmo_engine.analysis.projection import (LayerSpec, Projector, UmapParams, layer_features,
                                                 map_faithfulness, write_coordinates_csv,
                                                 write_tensorboard)
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.embed.embedder import Embedder, check_held_activations
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState

    params = UmapParams(n_neighbors=args.n_neighbors, min_dist=args.min_dist,
                        random_state=None if args.umap_seed < 0 else args.umap_seed, n_epochs=args.epochs)
    tb = args.tensorboard
    if args.json and common.is_stdout(args.out):
        raise InputError("--json prints on stdout: write the coordinates to a file (-o FILE)")
    if tb is not None and (tb.exists() or tb.is_symlink()) and not tb.is_dir():
        raise InputError("--tensorboard names a folder (vectors.tsv and metadata.tsv go in "
                         "it); this is not one", path=tb)          # before the work, not after
    common.refuse_existing(args.force, args.out, *(() if tb is None else (
        tb / "vectors.tsv", tb / "metadata.tsv")))
    project_aligned.refuse_outputs(args)
    tokens = _tokens(args)
    tokens = tokens.sample(args.max_points).compact()
    if len(tokens) < 2:
        raise InputError(f"only {len(tokens)} token(s) to project", path=args.input)
    device = common.resolve_device(args.device)
    model = load_checkpoint(checkpoint_or_demo(args.checkpoint), device=device)
    n = model.info.options.n_output_layers
    layers = [LayerSpec.single(k) for k in range(n)]
    if n > 1:
        weights = common.parse_floats(args.mix_weights, "--mix-weights") or [1.0] * n
        if len(weights) != n:                        # before the work, not after it
            raise InputError(f"--mix-weights: {len(weights)} weights for a model with {n} "
                             "layers")
        layers.append(LayerSpec.mix(weights, not args.no_layer_norm))
    tb_layer = None                     # checked before the work, so that nothing is written
    if args.tensorboard is not None:
        key = args.tensorboard_layer
        matches = [lay for lay in layers if lay.key == (key if key == "mix" else f"layer{key}")]
        if not matches:
            raise InputError(f"--tensorboard-layer {key!r}: choose 0..{n - 1} or mix")
        tb_layer = matches[0]

    def say(done, total, message):                  # one line per layer, not per epoch/batch
        if message.startswith(("UMAP of", "PCA of")):
            print(f"  {message}", file=sys.stderr, flush=True)

    state = TaskState(say)
    check_held_activations(sum(len(s) for s in tokens.sentences), model.opts,
                           what="sentences holding the points", path=args.input)
    acts = Embedder(model, device=str(device)).embed(tokens.sentences, state)
    if args.aligned is not None:
        summary = project_aligned.run(args, tokens, acts, n, model.info.checksum, params, state)
        if args.json:
            project_aligned.print_summary(summary)
        return 0
    projs = Projector().run(acts, tokens, layers, args.method, params, model.info.checksum, state,
                            pca_fallback=True)
    for p in projs:
        if p.method != args.method:
            print(f"  {p.layer.name}: too few distinct vectors for UMAP; PCA written instead",
                  file=sys.stderr)
    with common.output_file(args.out, ".csv") as path:
        write_coordinates_csv(path, tokens, projs)
    common.log(f"wrote {args.out} ({len(tokens):,} tokens × {len(projs)} projections)")
    doc: Dict[str, Any] = {"tokens": len(tokens), "written": [str(args.out)],
                           "projections": [{"layer": p.layer.key, "method": p.method,
                                            "seconds": round(p.seconds, 3)} for p in projs]}
    for p, entry in zip(projs, doc["projections"]):       # issue 42: how faithful each map is
        f = map_faithfulness(acts, tokens, p, args.faithfulness_k, params.metric,
                             args.faithfulness_points, state=state)
        common.log(f"  {p.layer.name} {p.method.upper()}: "
                   + (f.caption() if f is not None else "too few points to measure"))
        entry["faithfulness"] = None if f is None else f.to_dict()
    if tb_layer is not None:
        vp, mp = write_tensorboard(args.tensorboard, layer_features(acts, tokens, tb_layer),
                                   tokens)
        common.log(f"wrote {vp} and {mp}")
        doc["written"] += [str(vp), str(mp)]
    if args.json:
        common.print_json(doc)
    return 0


def _tokens(args):
    """The points: every token of the sentences (or of a labelled data set), or only the tokens
    of ``--words``; a listed word that does not occur is an error with a did-you-mean."""
    from elmo_engine.analysis.projection.tokens import (all_tokens, check_words_occur,
                                                        labelled_tokens, load_labelled,
                                                        parse_word_list, word_tokens)

    if args.labelled:
        tokens = labelled_tokens(load_labelled(args.input), source=args.input.name)
        sentences = tokens.sentences
    else:
        sentences = common.read_text(args.input, args.pretokenized).tokens
        tokens = all_tokens(sentences, args.input.name)
    if not args.words:
        return tokens
    words = parse_word_list(args.words)
    check_words_occur(sentences, words, "the sentences", path=args.input)
    if not args.labelled:
        return word_tokens(sentences, words)
    wanted = {w.casefold() for w in words}
    keep = [i for i, w in enumerate(tokens.words) if w.casefold() in wanted]
    return type(tokens)(tokens.sentences, tokens.sentence[keep], tokens.position[keep],
                        [tokens.labels[i] for i in keep], tokens.source)
