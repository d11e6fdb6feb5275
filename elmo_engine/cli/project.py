"""``elmo-explorer project``: the projection view's computation, headless.

Embeds sentences (a text file, one per line) or a labelled data set, projects the chosen tokens
per layer (and the scalar mix) with PCA → UMAP, and writes the coordinates as CSV and, optionally,
one layer's vectors as a TensorBoard projector pair.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from elmo_engine.errors import InputError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``project`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "project", help="UMAP/PCA coordinates of tokens per layer (CSV, TensorBoard TSV)",
        description="Project the tokens of a sentence file (or a labelled data set) to 2-D, one "
                    "projection per biLM layer and one for the scalar mix, as the projection "
                    "view does.")
    p.add_argument("input", type=Path,
                   help="sentences, one per line (tokenized with the app's tokenizer); with "
                        "--labelled: a CoNLL-U, WSD XML or token<TAB>label file")
    p.add_argument("--labelled", action="store_true", help="INPUT is a labelled data set")
    p.add_argument("--words", help="only these words (comma or space separated)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint folder or file (default: the bundled demo model)")
    p.add_argument("--method", choices=["umap", "pca"], default="umap")
    p.add_argument("--n-neighbors", type=int, default=15)
    p.add_argument("--min-dist", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=42, help="-1: unseeded (multi-threaded)")
    p.add_argument("--epochs", type=int, default=None, help="UMAP epochs (default: umap's rule)")
    p.add_argument("--mix-weights", help="scalar-mix weights, one per layer (default: equal)")
    p.add_argument("--max-points", type=int, default=20_000,
                   help="a seeded random sample of at most this many tokens (default 20000)")
    p.add_argument("--csv", type=Path, required=True, help="coordinates output (.csv)")
    p.add_argument("--tensorboard", type=Path, metavar="DIR",
                   help="also write DIR/vectors.tsv + DIR/metadata.tsv of --tensorboard-layer")
    p.add_argument("--tensorboard-layer", default="mix",
                   help="layer index or 'mix' for --tensorboard (default mix)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from elmo_engine.analysis.projection import (LayerSpec, Projector, UmapParams, layer_features,
                                                 tokens_from_file, write_coordinates_csv,
                                                 write_tensorboard)
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState

    params = UmapParams(n_neighbors=args.n_neighbors, min_dist=args.min_dist,
                        random_state=None if args.seed < 0 else args.seed, n_epochs=args.epochs)
    tokens = tokens_from_file(args.input, args.labelled, args.words)
    tokens = tokens.sample(args.max_points).compact()
    if len(tokens) < 2:
        raise InputError(f"only {len(tokens)} token(s) to project", path=args.input)
    model = load_checkpoint(checkpoint_or_demo(args.checkpoint))
    n = model.info.options.n_output_layers
    layers = [LayerSpec.single(k) for k in range(n)]
    if n > 1:
        weights = [1.0] * n
        if args.mix_weights:
            try:
                weights = [float(w) for w in args.mix_weights.replace(",", " ").split()]
            except ValueError:
                raise InputError(f"--mix-weights must be numbers: {args.mix_weights!r}") from None
        layers.append(LayerSpec.mix(weights))

    def say(done, total, message):                  # one line per layer, not per epoch/batch
        if message.startswith(("UMAP of", "PCA of")):
            print(f"  {message}", file=sys.stderr, flush=True)

    state = TaskState(say)
    acts = Embedder(model, device="cpu").embed(tokens.sentences, state)
    projs = Projector().run(acts, tokens, layers, args.method, params, model.info.checksum, state,
                            pca_fallback=True)
    for p in projs:
        if p.method != args.method:
            print(f"  {p.layer.name}: too few distinct vectors for UMAP; PCA written instead",
                  file=sys.stderr)
    write_coordinates_csv(args.csv, tokens, projs)
    print(f"wrote {args.csv} ({len(tokens):,} tokens × {len(projs)} projections)")
    if args.tensorboard is not None:
        key = args.tensorboard_layer
        matches = [lay for lay in layers if lay.key == (key if key == "mix" else f"layer{key}")]
        if not matches:
            raise InputError(f"--tensorboard-layer {key!r}: choose 0..{n - 1} or mix")
        vp, mp = write_tensorboard(args.tensorboard, layer_features(acts, tokens, matches[0]),
                                   tokens)
        print(f"wrote {vp} and {mp}")
    return 0
