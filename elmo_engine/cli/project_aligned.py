"""``elmo-explorer project --aligned {umap,procrustes}``: aligned layer trajectories, headless.

The options and the run of the aligned mode of ``project`` (issue 42): the layers' layouts in one
frame (:func:`elmo_engine.analysis.projection.aligned.align_layers`), every token's k-NN change
between two layers (:func:`elmo_engine.analysis.projection.knn_change.knn_changes`), written as
one CSV (``<layer>_aligned_x/_y`` per layer, ``knn_jaccard``) or NPZ, and optionally the
animation (GIF/MP4) and its frames (PNG).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from elmo_engine.cli import common
from elmo_engine.errors import InputError



def add_options(p: argparse.ArgumentParser) -> None:
    """The aligned mode's options (added to ``project``)."""
    g = p.add_argument_group(
        "aligned trajectories (--aligned)",
        "one layout per layer in a shared frame: AlignedUMAP across the layers, or each layer's "
        "own --method map moved onto --reference by Procrustes (rotation/reflection, one scale, "
        "a translation); docs/guide/projection.md#trajectories-between-the-layers")
    g.add_argument("--aligned", choices=["umap", "procrustes"],
                   help="write aligned layouts (one per --aligned-layers) instead of one "
                        "projection per layer and the mix")
    g.add_argument("--aligned-layers", metavar="LIST",
                   help="the layers in trajectory order, e.g. 0,1,2 (default: every layer); "
                        "1f / 1b: the forward / backward half of layer 1 (layer 0's halves are "
                        "the same vector)")
    g.add_argument("--reference", metavar="LAYER",
                   help="Procrustes: the layer the others are moved onto (one of "
                        "--aligned-layers; default the last)")
    g.add_argument("--knn", type=int, default=10,
                   help="k of the k-nearest-neighbour change between two layers (default 10)")
    g.add_argument("--knn-layers", metavar="A,B",
                   help="the two layers compared (default: the second and the last of "
                        "--aligned-layers — layer 0 gives all occurrences of a word one vector, "
                        "so its neighbour sets are ties; the first and last when there are two)")
    g.add_argument("--knn-top", type=int, default=20,
                   help="how many of the most changed tokens to list (default 20)")
    g.add_argument("--animation", type=Path, metavar="FILE",
                   help="also write the animation: FILE.gif (or .mp4 with imageio-ffmpeg)")
    g.add_argument("--frames", type=Path, metavar="DIR",
                   help="also write the animation's frames as DIR/frame_0000.png …")
    g.add_argument("--steps", type=int, default=12,
                   help="animation frames from one layer to the next (default 12)")
    g.add_argument("--fps", type=float, default=12.0, help="animation frames per second (12)")
    g.add_argument("--trails", metavar="WORDS",
                   help="draw the trails of these words' tokens in the animation (comma or "
                        "space separated; at most 12 tokens)")


def refuse_outputs(args) -> None:
    """Before any long work: existing outputs without ``--force``; a frames folder holding
    anything but frames written earlier (never replaced, ``--force`` or not)."""
    if args.aligned is None:
        for opt in ("aligned_layers", "reference", "knn_layers", "animation", "frames", "trails"):
            if getattr(args, opt) is not None:
                raise InputError(f"--{opt.replace('_', '-')} needs --aligned")
        return
    common.refuse_existing(args.force, args.animation)
    if args.animation is not None and args.animation.suffix.lower() not in (".gif", ".mp4"):
        raise InputError(f"--animation {args.animation}: write a .gif or an .mp4")
    if args.frames is not None:              # a folder output: never a folder of the user's
        from elmo_engine.io.figures.trajectories import FRAMES_KIND
        from elmo_engine.io.writing import replace_folder_problem

        problem = replace_folder_problem(args.frames, FRAMES_KIND)
        if problem:
            raise InputError(problem, path=args.frames)
        if not args.force and args.frames.is_dir() and any(args.frames.iterdir()):
            raise InputError(f"{args.frames} holds frames written earlier; pass --force to "
                             "replace them")


def run(args, tokens, acts, n_layers: int, checksum: str, params, state) -> Dict[str, Any]:
    """Align, compare, write; the JSON summary."""
    from elmo_engine.analysis.projection.aligned import (AlignMethod, aligned_features,
                                                         align_layers, parse_layers)
    from elmo_engine.analysis.projection.knn_change import knn_changes

    layers = parse_layers(args.aligned_layers or ",".join(map(str, range(n_layers))), n_layers)
    keys = [lay.key for lay in layers]
    reference = -1
    if args.reference is not None:
        ref = parse_layers(f"{args.reference},{args.reference}", n_layers)[0]
        if ref not in layers:
            raise InputError(f"--reference {args.reference} is not one of --aligned-layers "
                             f"({', '.join(keys)})")
        reference = layers.index(ref)
    # the first contextual layer and the last (layer 0's neighbour sets are ties among repeats)
    pair = (layers[1 if len(layers) > 2 else 0], layers[-1])
    if args.knn_layers is not None:
        two = parse_layers(args.knn_layers, n_layers)
        if len(two) != 2:
            raise InputError(f"--knn-layers takes two layers, got {args.knn_layers!r}")
        pair = (two[0], two[1])
    if args.knn >= len(tokens):
        raise InputError(f"--knn {args.knn}: only {len(tokens)} tokens")
    method = AlignMethod(args.aligned)
    animate = args.animation is not None or args.frames is not None
    trails = _trail_rows(args, tokens) if animate else []    # before the work and any write
    common.log(f"  aligning {len(layers)} layers of {len(tokens):,} tokens "
               f"({'AlignedUMAP' if method is AlignMethod.ALIGNED_UMAP else 'Procrustes'})")
    lay = align_layers(acts, tokens, layers, method, params, base=args.method,
                       reference=reference, checksum=checksum, state=state)
    changes = knn_changes(aligned_features(acts, tokens, pair[0]),
                          aligned_features(acts, tokens, pair[1]), tokens, args.knn,
                          args.knn_top, (pair[0].name, pair[1].name), state)
    with common.output_file(args.out, Path(str(args.out)).suffix or ".csv") as path:
        if Path(str(args.out)).suffix.lower() == ".npz":
            _write_npz(path, tokens, lay, changes)
        else:
            _write_csv(path, tokens, lay, changes)
    written = [str(args.out)]
    if animate:
        written += _animate(args, tokens, lay, trails, state)
    if not args.json:
        common.log(f"wrote {', '.join(written)}")
        common.log(f"  tokens whose {args.knn} nearest neighbours change most from "
                   f"{pair[0].name} to {pair[1].name} (Jaccard, mean {changes.mean:.3f}):")
        for c in changes.top[:10]:
            common.log(f"    {c.jaccard:.2f}  {c.context}")
    return _summary(tokens, lay, changes, written)


def _write_csv(path: Path, tokens, lay, changes) -> None:
    import csv
    import io

    from elmo_engine.atomic import atomic_path

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["index", "token", "sentence", "position", "label"]
               + [f"{k}_aligned_{a}" for k in (x.key for x in lay.layers) for a in "xy"]
               + ["knn_jaccard", "sentence_text"])
    for i in range(len(tokens)):
        row: List[Any] = [i, tokens.words[i], int(tokens.sentence[i]), int(tokens.position[i]),
                          tokens.label_of(i)]
        for k in range(len(lay.layers)):
            row += [f"{float(lay.coords[k, i, 0]):.6g}", f"{float(lay.coords[k, i, 1]):.6g}"]
        row += [f"{float(changes.jaccard[i]):.4f}", tokens.sentence_text(i)]
        w.writerow(row)
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")


def _write_npz(path: Path, tokens, lay, changes) -> None:
    import numpy as np

    from elmo_engine.atomic import atomic_path

    with atomic_path(path, ".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, coords=lay.coords, layers=np.array([x.key for x in lay.layers]),
                     words=np.array(tokens.words), sentence=tokens.sentence,
                     position=tokens.position, knn_jaccard=changes.jaccard,
                     knn_k=np.int64(changes.k))


def _trail_rows(args, tokens) -> List[int]:
    """The tokens whose trails the animation draws (``--trails``; the first 12)."""
    from elmo_engine.analysis.projection.tokens import parse_word_list

    trails: List[int] = []
    for w in parse_word_list(args.trails or ""):
        hits = tokens.find(w)
        if not len(hits):
            raise common.absent_word(w, [tokens.words], "the projected tokens")
        trails += hits.tolist()
    return trails[:12]


def _animate(args, tokens, lay, trails: List[int], state) -> List[str]:
    import numpy as np

    from elmo_engine.analysis.projection.animation import (AnimationSpec, render_frames,
                                                           write_animation, write_frames_folder)

    labels = _colour_labels(args, tokens, trails)
    codes: Optional[np.ndarray] = None
    names: List[str] = []
    if labels is not None:
        names = sorted({x for x in labels if x is not None})
        index = {n: k for k, n in enumerate(names)}
        codes = np.array([index.get(x, -1) if x is not None else -1 for x in labels])
    shown = [str(labels[i]) if labels is not None and labels[i] else tokens.words[i]
             for i in trails]
    n = len(tokens)
    spec = AnimationSpec(steps=args.steps, fps=args.fps, trails=tuple(trails),
                         trail_labels=tuple(shown), codes=codes,
                         legend=tuple(names) if len(names) <= 10 else (),
                         point_size=40.0 if n <= 200 else 12.0 if n <= 2000 else 4.0)
    frames = render_frames(lay, tokens.words, spec, state)
    out = []
    if args.animation is not None:
        out.append(str(write_animation(args.animation, frames, spec.fps)))
    if args.frames is not None:
        paths = write_frames_folder(args.frames, frames, overwrite=True)    # checked above
        out.append(f"{args.frames}/ ({len(paths)} frames)")
    return out


def _colour_labels(args, tokens, trails: List[int]) -> Optional[List[Optional[str]]]:
    """What colours the animation's points. A grouped sentence file (``group<TAB>sentence``):
    the group of each token's sentence, for the tokens of the ``--trails`` words (every token
    with ``--words`` and no ``--trails``), the others grey. A labelled data set: its labels.
    Else None (one colour)."""
    if not args.labelled:
        text = common.read_text(args.input, args.pretokenized)
        if text.grouped and (trails or args.words):
            group = {tuple(s): g for s, g in zip(text.tokens, text.groups or [])}
            words = ({tokens.words[i].casefold() for i in trails} if trails else
                     {w.casefold() for w in tokens.words})
            return [group.get(tokens.sentences[int(tokens.sentence[i])])
                    if w.casefold() in words else None for i, w in enumerate(tokens.words)]
    if tokens.labels is not None and not (args.words and not args.labelled):
        return list(tokens.labels)
    return None


def _summary(tokens, lay, changes, written: List[str]) -> Dict[str, Any]:
    return {
        "tokens": len(tokens),
        "method": lay.method.value,
        "base": lay.base,
        "layers": [x.key for x in lay.layers],
        "reference": None if lay.reference is None else lay.layers[lay.reference].key,
        "procrustes_residuals": (None if lay.reference is None else
                                 {x.key: r for x, r in zip(lay.layers, lay.residuals)}),
        "seconds": round(lay.seconds, 3),
        "pca_instead_of_umap": list(lay.pca_instead),
        "knn_change": {
            "k": changes.k, "from": changes.a, "to": changes.b,
            "mean_jaccard": changes.mean,
            "most_changed": [{"index": c.index, "token": c.word, "context": c.context,
                              "jaccard": c.jaccard, "lost": list(c.lost),
                              "gained": list(c.gained)} for c in changes.top],
        },
        "written": written,
    }


def print_summary(doc: Dict[str, Any]) -> None:
    """``--json``: the summary on stdout."""
    common.print_json(doc)
    sys.stdout.flush()
