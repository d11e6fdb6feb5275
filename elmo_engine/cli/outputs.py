"""Outputs never overwrite inputs: one check of every command's paths before it runs.

The dispatcher calls :func:`guard_outputs` with the parsed arguments. Every path the command
will write — the output options (``OUTPUT``, ``OUTDIR``, ``--out``, ``--json FILE`` …) and the
files they imply (``X.metadata.tsv`` beside ``X.tsv``, one ``X.layerK.tsv`` per layer) — is
compared with every path it will read: path arguments and lists of them (``train-lm CORPUS…
--dev DEV…``), the checkpoint's files (the bundled model's when no ``--checkpoint`` is given), the
checkpoint and arrays file a workspace names, and the bundled resources (demo sentences,
reference corpus, demo tasks), after resolving symbolic links and recognising hard links. Refused
before anything is read or written:

* an output that *is* an input, or a folder output that holds one (a report folder is replaced
  as a whole; ``train-lm --out`` writes ``vocab.txt`` … into it);
* any output inside the bundled resources;
* a folder replaced as a whole (``export report … --force``) that holds anything but an
  earlier report (its marker lists every file; the whole tree is looked at), or that is the
  current folder, one of its parents or the home folder
  (:func:`elmo_engine.io.report.replace_problem`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

from elmo_engine.errors import InputError

#: argparse ``dest`` names of options that are written, per command (everything else is read)
OUTPUT_DESTS = {"output", "outdir", "out", "matrices", "neighbours_csv", "vectors", "json",
                "words_csv", "hubs_tsv", "csv", "tensorboard", "workspace_out", "figure",
                "tsv_out", "animation", "frames"}
#: an output's flag where it is not its dest spelled as a flag
FLAGS = {"output": "OUTPUT", "outdir": "OUTDIR", "tsv_out": "--tsv"}
#: outputs replaced as a whole folder (a report): never a folder holding a model or a workspace
REPLACED_FOLDER_DESTS = {"outdir"}


def _real(p) -> str:
    return os.path.realpath(os.path.expanduser(str(p)))


def same_file(a, b) -> bool:
    """Whether two paths name the same file (links resolved, hard links recognised)."""
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return _real(a) == _real(b)


def _inside(inner, folder) -> bool:
    f = _real(folder)
    return _real(inner).startswith(f.rstrip(os.sep) + os.sep)


def _is_index(folder) -> bool:
    """Whether ``folder`` is a corpus index (every file in it is the index's)."""
    from elmo_engine.index import MANIFEST          # the package's name alone: no numpy

    return os.path.isdir(folder) and os.path.isfile(os.path.join(folder, MANIFEST))


def _checkpoint_files(path: Optional[Path]) -> List[Path]:
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.model.locate import (OWN_SOFTMAX, OWN_VOCAB, PUBLISHED_SOFTMAX_PATTERN,
                                          resolve_checkpoint)

    try:
        _fmt, opts, weights = resolve_checkpoint(checkpoint_or_demo(path))
    except Exception:               # the command itself reports a bad checkpoint
        return []
    # and what the commands read beside them: the vocabulary and the softmax (the language
    # model's predictions, the neighbours among known words)
    folder = opts.parent
    beside = [folder / OWN_VOCAB, folder / OWN_SOFTMAX]
    try:
        beside += sorted(folder.glob(PUBLISHED_SOFTMAX_PATTERN))[:16]
        beside += sorted(folder.glob("*vocab*.txt"))[:16]
    except OSError:
        pass
    return [opts, weights, *beside]


def _workspace_inputs(ws: Path) -> List[Path]:
    """The checkpoint folder and files and the arrays file a workspace names (read without
    loading it: a regular file, at most the workspace size limit)."""
    from elmo_engine.io.datasets.textio import check_regular_file
    from elmo_engine.io.workspace_file import MAX_WORKSPACE_BYTES, locate_checkpoint

    try:
        check_regular_file(ws)
        with open(ws, "rb") as fh:
            raw = fh.read(MAX_WORKSPACE_BYTES + 1)
        # decoded as load_workspace decodes it (a BOM dropped), so that the guard sees what
        # the command will read
        obj = json.loads(raw.decode("utf-8-sig")) if len(raw) <= MAX_WORKSPACE_BYTES else None
    except Exception:               # load_workspace reports what is wrong, naming the key
        return []
    if not isinstance(obj, dict):
        return []
    out: List[Path] = []
    arrays = obj.get("arrays")
    if isinstance(arrays, dict) and isinstance(arrays.get("file"), str) \
            and Path(arrays["file"]).name == arrays["file"] and arrays["file"] not in ("", ".", ".."):
        out.append(ws.with_name(arrays["file"]))
    ck = obj.get("checkpoint")
    saved = ck.get("path") if isinstance(ck, dict) else None
    if isinstance(saved, str) and saved and "\0" not in saved:
        try:
            found = locate_checkpoint(saved, ws)
        except (OSError, ValueError):
            found = None
        if found is not None:
            out.append(Path(found))
            out += _checkpoint_files(Path(found))
    return out


def _as_paths(value) -> List[Path]:
    if isinstance(value, Path):
        return [value]
    if isinstance(value, (list, tuple)):
        return [Path(v) for v in value if isinstance(v, (str, Path)) and v]
    return []


#: the layer files guarded when the checkpoint's own count cannot be read
MAX_LAYER_FILES = 66


def _implied(args, dest: str, out: Path) -> List[Path]:
    """Files an output implies beside itself (``export vectors X.tsv``: the metadata file and
    one file per layer of the checkpoint, whose options say how many; read without torch)."""
    if getattr(args, "export_what", None) != "vectors" or dest != "output":
        return []
    try:
        from elmo_engine.io.vector_formats import format_for
        if format_for(out, args.format) != "tsv":
            return []
        from elmo_engine.cli.common import checkpoint_options
        from elmo_engine.cli.export import engine_layer_mode
        from elmo_engine.io.vectors import LayerChoice, output_files

        choice = LayerChoice(engine_layer_mode(args.layers), None, 1.0, False)
    except Exception:               # the command reports a bad format itself
        return []
    n_layers = 1
    if choice.mode == "each":       # a file per layer: as many as the checkpoint has
        try:
            n_layers = checkpoint_options(getattr(args, "checkpoint", None)).n_output_layers
        except Exception:           # the command reports a bad checkpoint itself; meanwhile
            n_layers = MAX_LAYER_FILES  # every name such an export could have is guarded
    return [p for p in output_files(out, "tsv", choice, n_layers) if p != out]


def _split(args) -> Tuple[List[Tuple[str, Path]], List[Path]]:
    outputs, inputs = [], []
    for dest, value in vars(args).items():
        if dest.startswith("_"):
            continue
        if dest in OUTPUT_DESTS:
            if isinstance(value, (str, Path)) and value and str(value) != "-":   # - is stdout
                outputs.append((dest, Path(value)))
        else:
            inputs += _as_paths(value)
    return outputs, inputs


def _bundled() -> Optional[Path]:
    try:
        from elmo_engine.resources import HERE
    except Exception:
        return None
    return HERE


def guard_outputs(args) -> None:
    """Raise :class:`InputError` naming the output when writing it would destroy an input."""
    outputs, inputs = _split(args)
    if not outputs:
        return
    if hasattr(args, "checkpoint"):
        inputs += _checkpoint_files(args.checkpoint)
    if isinstance(getattr(args, "compare", None), Path):       # layers --compare B: B's files
        inputs += _checkpoint_files(args.compare)
    ws = getattr(args, "workspace", None)
    if isinstance(ws, Path):
        inputs += _workspace_inputs(ws)
    bundled = _bundled()
    inputs = _existing(inputs)
    seen: List[Tuple[str, Path]] = []
    from elmo_engine.atomic import check_name_fits
    from elmo_engine.cli.common import check_writable_folder

    for dest, out in outputs:
        check_writable_folder(out)           # before the work, every command's outputs
        written = [out] + _implied(args, dest, out)
        for target in written:
            check_name_fits(target, of=None if target == out else out)   # as the app checks
            _check_one(dest, target, inputs, bundled)
        if dest in REPLACED_FOLDER_DESTS:
            from elmo_engine.io.report import replace_problem

            problem = replace_problem(out)
            if problem:
                raise InputError(problem, path=out)
        for other_dest, other in seen:
            if any(same_file(t, other) for t in written):
                raise InputError(f"is given for two outputs ({_flag(other_dest)} and "
                                 f"{_flag(dest)})", path=out)
        seen += [(dest, t) for t in written]


def _check_one(dest: str, out: Path, inputs: List[Path], bundled: Optional[Path]) -> None:
    for inp in inputs:
        if same_file(out, inp):
            raise InputError(f"is also an input ({inp}); an output never replaces an input, "
                             "choose another name", path=out)
        if os.path.isdir(out) and _inside(inp, out):
            raise InputError(f"holds an input ({inp}); writing here could replace it, choose "
                             "another folder", path=out)
        if os.path.lexists(out) and _inside(out, inp) and _is_index(inp):
            raise InputError(f"is a file of an input corpus index ({inp}); an output never "
                             "replaces an input's files, choose another name", path=out)
    if bundled is not None and os.path.exists(bundled) and (
            same_file(out, bundled) or _inside(out, bundled)
            or (os.path.isdir(out) and _inside(bundled, out))):
        raise InputError(f"is part of the bundled resources ({bundled}), which are never "
                         "written; choose another name", path=out)


#: path arguments that may name something else than a file: a published model's name
#: (``--checkpoint small``)
NAMED_INPUT_DESTS = {"checkpoint", "compare"}
#: values that name no file: the bundled minimal pairs, stdin
NAMED_VALUES = {"bundled", "-"}


def refuse_missing_inputs(args) -> None:
    """Raise :class:`InputError` for the first input path that does not exist, before the
    command imports torch or loads a model (a misspelt file name answers at once, as the
    readers would word it: ``in.txt: cannot open: No such file or directory``)."""
    import errno

    from elmo_engine.index import MANIFEST, NOT_AN_INDEX

    for dest, value in vars(args).items():
        if dest.startswith("_") or dest in OUTPUT_DESTS or dest in NAMED_INPUT_DESTS:
            continue
        typed = [value] if isinstance(value, Path) else [
            v for v in value if isinstance(v, Path)] if isinstance(value, (list, tuple)) else []
        for path in typed:                       # paths only (a list of words is no input)
            if dest == "index" and not os.path.exists(path / MANIFEST):     # a folder
                raise InputError(NOT_AN_INDEX, path=path)
            if str(path) not in NAMED_VALUES and not os.path.lexists(path):
                raise InputError(f"cannot open: {os.strerror(errno.ENOENT)}", path=path)


def _existing(paths: Iterable[Path]) -> List[Path]:
    return [p for p in paths if os.path.exists(p)]


def _flag(dest: str) -> str:
    return FLAGS.get(dest, "--" + dest.replace("_", "-"))
