"""Headless commands over the engine: ``elmo-explorer embed|info|train-lm|probe …``.

Each subcommand lives in a module with ``add_parser(subparsers)`` and ``run(args) -> int``; this
file only dispatches. Engine errors become one clear line on stderr and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path
from typing import List, Optional

from elmo_engine.errors import CancelledError, ElmoError, InputError

# subcommand → module providing add_parser/run
SUBCOMMAND_MODULES = {
    "embed": "elmo_engine.cli",
    "info": "elmo_engine.cli",
    "train-lm": "elmo_engine.lm_train.cli",
    "probe": "elmo_engine.probe_cli",
    "export": "elmo_engine.export_cli",
    "contexts": "elmo_engine.compare_cli",
    "project": "elmo_engine.projection.cli",
    "layers": "elmo_engine.layers_cli",
}


def subcommand_names() -> List[str]:
    return list(SUBCOMMAND_MODULES)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-explorer",
        description="ELMo Explorer. With no subcommand the desktop app starts "
                    "(options: --checkpoint PATH, --screenshot PNG, --view NAME).")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_embed_parser(sub)
    add_info_parser(sub)
    for name, module in SUBCOMMAND_MODULES.items():
        if module == __name__:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        mod.add_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    func = getattr(args, "func", None) or importlib.import_module(
        SUBCOMMAND_MODULES[args.command]).run
    try:
        return int(func(args) or 0)
    except CancelledError:
        print("elmo-explorer: cancelled; nothing was written", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("elmo-explorer: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130
    except ElmoError as e:
        print(f"elmo-explorer {args.command}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # an unwritable folder, a vanished file: one line, no traceback
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        print(f"elmo-explorer {args.command}: error: {e.strerror or e}{where}", file=sys.stderr)
        return 1


def parse_floats(text: Optional[str], option: str) -> Optional[List[float]]:
    """``"0,1,1"`` → ``[0.0, 1.0, 1.0]`` for a comma-separated option; ``None`` stays ``None``."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"{option} must be comma-separated numbers, got {text!r}") from None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("elmo-explorer")
    except Exception:
        return "unknown"


# ---- embed -----------------------------------------------------------------------------------
def add_embed_parser(sub) -> None:
    p = sub.add_parser("embed", help="write ELMo vectors for a file of sentences",
                       description="Embed INPUT (one sentence per line) into OUTPUT (HDF5 in the "
                                   "AllenNLP `elmo` layout, or npz).")
    p.add_argument("input", type=Path, help="UTF-8 text, one sentence per line")
    p.add_argument("output", type=Path, help="output .hdf5 or .npz")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint folder or options/weights file (default: the bundled demo model)")
    p.add_argument("--layers", choices=["all", "top", "average"], default="all")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--stateful", action="store_true",
                   help="reference protocol: lines in order, each batch row keeps its LSTM state")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    p.add_argument("--format", choices=["hdf5", "npz"], default=None,
                   help="default: from OUTPUT's extension (hdf5 unless .npz)")
    p.add_argument("--tokenize", action="store_true",
                   help="tokenize typed text (1B Word Benchmark rules) instead of splitting on spaces")
    p.set_defaults(func=run_embed)


def default_checkpoint() -> Path:
    from elmo_engine.resources import demo_checkpoint_path

    return demo_checkpoint_path()


def read_sentence_lines(path: Path, tokenize: bool) -> List[List[str]]:
    """One sentence per line; an empty line or undecodable byte is an error naming the line."""
    from elmo_engine.embedder import MAX_SENTENCE_TOKENS
    from elmo_engine.tokenize import tokenize as tok_fn, whitespace_tokenize

    split = tok_fn if tokenize else whitespace_tokenize
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read input ({e.strerror or e})", path=path) from None
    sentences = []
    for i, line in enumerate(raw.split(b"\n"), start=1):
        if i == raw.count(b"\n") + 1 and not line:
            break                                      # the final newline
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8 (byte {e.start + 1} of the line)", path=path, line=i) from None
        toks = split(text)
        if not toks:
            raise InputError("empty line: every line must hold a sentence", path=path, line=i)
        if len(toks) > MAX_SENTENCE_TOKENS:
            raise InputError(f"{len(toks)} tokens; the limit is {MAX_SENTENCE_TOKENS} per "
                             "sentence (split the line)", path=path, line=i)
        sentences.append(toks)
    if not sentences:
        raise InputError("the input file has no sentences", path=path)
    return sentences


def run_embed(args) -> int:
    import numpy as np
    from tqdm import tqdm

    from elmo_engine.atomic import atomic_hdf5, atomic_path, cleanup_stale_parts
    from elmo_engine.checkpoint import load_checkpoint
    from elmo_engine.embedder import Embedder, pick_device
    from elmo_engine.progress import TaskState

    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    fmt = args.format or ("npz" if args.output.suffix.lower() == ".npz" else "hdf5")
    sentences = read_sentence_lines(args.input, args.tokenize)
    device = pick_device(args.device)
    model = load_checkpoint(args.checkpoint or default_checkpoint(), device=device)
    width = max(len(s) for s in sentences) + 2
    emb = Embedder(model, device=str(device), precision=args.precision,
                   token_budget=max(args.batch_size * width, width), max_batch_rows=args.batch_size)
    total = sum(len(s) for s in sentences)
    bar = tqdm(total=total, unit="tok", desc="embedding", file=sys.stderr,
               disable=total < 2000 and not sys.stderr.isatty())
    last = [0]

    def on_progress(done, _total, _msg):
        bar.update(done - last[0])
        last[0] = done

    def select(arr):
        if args.layers == "top":
            return arr[-1]
        if args.layers == "average":
            return arr.mean(axis=0)
        return arr

    index = {}
    chunk = 2000 if not args.stateful else args.batch_size * 32
    cleanup_stale_parts(args.output.parent, target=args.output.name)
    with (atomic_hdf5(args.output) if fmt == "hdf5" else atomic_path(args.output)) as dest:
        writer = _Writer(dest, fmt)
        try:
            for start in range(0, len(sentences), chunk):
                part = sentences[start:start + chunk]
                last[0] = 0
                base = bar.n
                state = TaskState(lambda d, t, m: bar.update(base + d - bar.n))
                if args.stateful:
                    arrays = emb.embed_stateful(part, batch_size=args.batch_size, state=state)
                else:
                    arrays = emb.embed(part, state=state)
                for j, arr in enumerate(arrays):
                    key = str(start + j)
                    writer.add(key, np.ascontiguousarray(select(arr), dtype=np.float32))
                    index[" ".join(part[j])] = key
            writer.finish(json.dumps(index))
        finally:
            writer.close()
            bar.close()
    print(f"wrote {len(sentences)} sentences ({total} tokens) to {args.output}", file=sys.stderr)
    return 0


class _Writer:
    """Writes datasets "0", "1", … and ``sentence_to_index`` to HDF5 (streaming) or npz.

    ``dest`` is an open ``h5py.File`` (from :func:`atomic_hdf5`, which closes it) or, for npz, the
    temporary path to write.
    """

    def __init__(self, dest, fmt: str):
        self.fmt = fmt
        if fmt == "hdf5":
            self.fh = dest
        else:
            self.path = dest
            self.arrays = {}

    def add(self, key, arr) -> None:
        if self.fmt == "hdf5":
            self.fh.create_dataset(key, data=arr)
        else:
            self.arrays[key] = arr

    def finish(self, index_json: str) -> None:
        import numpy as np

        if self.fmt == "hdf5":
            import h5py

            ds = self.fh.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype("utf-8"))
            ds[0] = index_json
        else:
            with open(self.path, "wb") as fh:
                np.savez(fh, sentence_to_index=np.array(index_json), **self.arrays)

    def close(self) -> None:
        self.arrays = {}


# ---- info ------------------------------------------------------------------------------------
def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="print a checkpoint's options, parameter counts and checksum")
    p.add_argument("checkpoint", type=Path, nargs="?", default=None,
                   help="checkpoint folder or file (default: the bundled demo model)")
    p.set_defaults(func=run_info)


def run_info(args) -> int:
    from elmo_engine.checkpoint import load_checkpoint

    model = load_checkpoint(args.checkpoint or default_checkpoint())
    print(json.dumps(model.info.describe(), indent=2))
    return 0
