"""``elmo-explorer models list | get NAME [--with-softmax] | path NAME | verify [NAME] |
remove NAME``: the published ELMo biLMs (:mod:`elmo_engine.io.catalogue`,
:mod:`elmo_engine.io.model_store`, :mod:`elmo_engine.io.model_get`).

Downloads go to the user's data folder (``ELMO_EXPLORER_DATA`` overrides it) from AllenNLP's
address (``ELMO_EXPLORER_MODEL_MIRROR`` replaces it); progress with speed and time left goes to
stderr, results to stdout. A downloaded model then opens with ``--checkpoint NAME`` in every
command. See docs/guide/models.md.
"""
from __future__ import annotations

import sys
from typing import List

from elmo_engine.cli import common
from elmo_engine.cli.common import log
from elmo_engine.cli.parsing import error_line


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list, download, locate, verify and remove the published "
                                      "ELMo models (small, medium, original, original-5.5b)")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    ls = msub.add_parser("list", help="the catalogue: sizes, what is downloaded, where, free space")
    common.add_json(ls)
    common.add_results_out(ls)
    get = msub.add_parser("get", help="download a model (resumes an interrupted download)")
    get.add_argument("name", help="a catalogue name: small, medium, original or original-5.5b")
    get.add_argument("--with-softmax", action="store_true",
                     help="also the softmax weights and vocabulary (original, original-5.5b): "
                          "needed by eval-lm on these models")
    get.add_argument("--quiet", action="store_true", help="no progress on stderr")
    path = msub.add_parser("path", help="print a downloaded model's folder (for --checkpoint)")
    path.add_argument("name")
    ver = msub.add_parser("verify", help="check the size and SHA-256 of each downloaded file "
                                         "against those recorded at download")
    ver.add_argument("name", nargs="?", default=None,
                     help="a model (default: every downloaded model)")
    rm = msub.add_parser("remove", help="delete a downloaded model (and any partial download)")
    rm.add_argument("name")
    p.set_defaults(func=run)


def run(args) -> int:
    return {"list": _list, "get": _get, "path": _path, "verify": _verify,
            "remove": _remove}[args.models_command](args)


def _list(args) -> int:
    from elmo_engine.io.model_store import list_models
    from elmo_engine.progress import format_bytes

    listing = list_models()
    if args.json:
        common.print_json({
            "folder": str(listing.folder), "free_bytes": listing.free_bytes,
            "models": [{
                "name": s.model.name, "label": s.model.label, "parameters": s.model.parameters,
                "corpus": s.model.corpus, "download_bytes": s.model.download_bytes(False),
                "download_bytes_with_softmax": (s.model.download_bytes(True)
                                                if s.model.softmax else None),
                "memory_bytes": s.model.memory_bytes,
                "memory_with_softmax_bytes": s.model.memory_with_softmax_bytes,
                "downloaded": s.downloaded, "has_softmax": s.has_softmax,
                "folder": str(s.folder), "bytes_on_disk": s.bytes_on_disk,
                "partial_bytes": s.partial_bytes, "problem": s.problem,
            } for s in listing.models]})
        return 0
    rows = [("name", "parameters", "download", "+softmax", "on disk", "corpus")]
    for s in listing.models:
        m = s.model
        state = ("yes" + (" +softmax" if s.has_softmax else "")) if s.downloaded else "no"
        if s.problem:
            state = "damaged"
        elif s.partial_bytes and not s.downloaded:
            state = f"partial ({format_bytes(s.partial_bytes)})"
        rows.append((m.name, f"{m.parameters / 1e6:.1f}M", "~" + format_bytes(m.download_bytes()),
                     ("~" + format_bytes(m.download_bytes(True) - m.download_bytes()))
                     if m.softmax else "-", state, m.corpus))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[5])
    free = "unknown" if listing.free_bytes is None else format_bytes(listing.free_bytes)
    print(f"\nstored in {listing.folder} ({free} free)")
    print("get one with: elmo-explorer models get NAME   (sizes marked ~ are approximate)")
    return 0


def _get(args) -> int:
    from elmo_engine.io.model_get import get_model
    from elmo_engine.io.model_store import model_status
    from elmo_engine.progress import TransferState

    from elmo_engine.errors import CancelledError
    from elmo_engine.io.model_store import staging_dir

    before = model_status(args.name)
    printer = _Printer(enabled=not args.quiet)
    state = TransferState(on_transfer=printer)
    try:
        status = get_model(args.name, with_softmax=args.with_softmax, state=state)
    except (KeyboardInterrupt, CancelledError):
        printer.end()
        printer.enabled = False
        log(f"elmo-explorer: interrupted; nothing was installed, and the partial "
            f"download in {staging_dir(args.name)} is kept: `elmo-explorer models get "
            f"{args.name}` resumes it")
        return 130
    finally:
        printer.end()
    already = before.downloaded and (before.has_softmax or not args.with_softmax)
    log(f"{args.name}: {'already downloaded' if already else 'downloaded'}"
        + (" with its softmax" if status.has_softmax else "") + f" in {status.folder}")
    print(status.folder)
    return 0


class _Printer:
    """Progress on stderr: one line rewritten in a terminal, a line every 10% otherwise."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.shown = -1
        self.last = ""

    def __call__(self, rep) -> None:
        if not self.enabled:
            return
        text = ": ".join(t for t in (rep.message, rep.describe()) if t)
        if self.tty:
            sys.stderr.write("\r" + text.ljust(len(self.last)))
            sys.stderr.flush()
            self.last = text
            return
        tenth = -1 if not rep.total else int(10 * rep.done / rep.total)
        if tenth != self.shown or rep.message != self.last:
            self.shown, self.last = tenth, rep.message
            log(text)

    def end(self) -> None:
        if self.enabled and self.tty and self.last:
            sys.stderr.write("\n")
        self.last = ""


def _path(args) -> int:
    from elmo_engine.io.model_store import model_path

    print(model_path(args.name))
    return 0


def _verify(args) -> int:
    from elmo_engine.errors import InputError
    from elmo_engine.io.model_store import list_models, verify_model
    from elmo_engine.progress import TransferState

    names: List[str]
    if args.name is not None:
        names = [args.name]
    else:
        names = [s.model.name for s in list_models().models if s.downloaded or s.problem]
        if not names:
            raise InputError("no published model is downloaded; get one with "
                             "`elmo-explorer models get small`")
    bad = 0
    printer = _Printer(enabled=True)
    for name in names:
        try:
            report = verify_model(name, TransferState(on_transfer=printer))
        finally:
            printer.end()
        for c in report.checks:
            if c.ok:
                print(f"{name}: {c.name}: ok (size and SHA-256 as recorded)")
            else:
                bad += 1
                print(f"{name}: {c.name}: FAILED", flush=True)
                print(error_line(c.problem), file=sys.stderr)
    return 1 if bad else 0


def _remove(args) -> int:
    from elmo_engine.errors import InputError
    from elmo_engine.io.catalogue import load_catalogue
    from elmo_engine.io.model_store import model_dir, remove_model, staging_dir
    from elmo_engine.progress import format_bytes

    load_catalogue().require(args.name)
    if not model_dir(args.name).exists() and not staging_dir(args.name).exists():
        raise InputError(f"'{args.name}' is not downloaded; nothing to remove")
    freed = remove_model(args.name)
    print(f"removed {args.name} ({format_bytes(freed)} freed)")
    return 0

