"""A report folder: tables as CSV, figures, ``report.md`` and a self-contained ``report.html``.

Layout of the folder::

    report.html          one page, inline CSS, no scripts, no external resources
    report.md            the same content in Markdown
    tables/<name>.csv    every table in full (UTF-8, header row)
    figures/<file>       the figures (PNG and SVG), referenced relatively by both pages

The folder is built beside the target under a temporary name and renamed into place when complete
(every file in it is therefore written whole), with a marker (``.elmo-output.json``, kind
``report``) listing its files; an existing folder is refused unless ``overwrite=True``, and even
then unless it is empty or holds only an earlier report (:func:`replace_problem`); it is replaced
only once the new one is complete.
"""
from __future__ import annotations

import csv
import html
import io
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.io.writing import (check_replaceable, replace_folder_problem, staging_folder,
                                    swap_in_folder,
                                    writing)

#: rows of a table shown on the pages (the CSV always has all of them)
MAX_SHOWN_ROWS = 60


@dataclass
class ReportTable:
    """A results table: ``rows`` are dicts; ``columns`` fixes the order (default: first row's)."""

    name: str                          # file name stem: tables/<name>.csv
    title: str
    rows: List[Dict[str, Any]]
    columns: Optional[List[str]] = None
    caption: str = ""
    show: bool = True                  # False: CSV only, the pages link to it

    def header(self) -> List[str]:
        if self.columns is not None:
            return list(self.columns)
        cols: List[str] = []
        for r in self.rows:
            cols += [k for k in r if k not in cols]
        return cols


@dataclass
class ReportFigure:
    """A figure file already exported (PNG or SVG; a PDF is linked, not shown)."""

    path: Path
    caption: str = ""


@dataclass
class ReportSpec:
    """What a report states: model, data, parameters, results."""

    title: str = "ELMo Explorer report"
    model: Dict[str, Any] = field(default_factory=dict)
    data: Dict[str, Any] = field(default_factory=dict)
    parameters: Dict[str, Any] = field(default_factory=dict)
    tables: List[ReportTable] = field(default_factory=list)
    figures: List[ReportFigure] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    created: str = ""

    def add(self, part: "ReportPart") -> None:
        """Append one part's parameters, tables, figures and notes, in its order."""
        self.parameters |= part.parameters
        self.tables += part.tables
        self.figures += part.figures
        self.notes += part.notes


@dataclass
class ReportPart:
    """One view's share of a report (the contexts comparison, the neighbours, the projection
    grid, the language models), computed from values and added with :meth:`ReportSpec.add`."""

    tables: List[ReportTable] = field(default_factory=list)
    figures: List[ReportFigure] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    parameters: Dict[str, Any] = field(default_factory=dict)


def table_number(v: Any) -> Optional[float]:
    """A number for a table cell or a JSON value: rounded to 6 places; None (an empty cell,
    JSON null) for None or NaN (undefined)."""
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else round(f, 6)


def saved_figures(fig, figure_dir: Path, stem: str, caption: str, style) -> List[ReportFigure]:
    """Write ``fig`` as ``figure_dir/stem`` in the formats of ``style`` (a
    :class:`~elmo_engine.io.figures.FigureStyle`), each file captioned ``caption``."""
    from elmo_engine.io import figures as F

    return [ReportFigure(p, caption)
            for p in F.save(fig, Path(figure_dir) / stem, list(style.formats), style=style)]


def _safe_name(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._")
    return keep or "table"


def yes_no(v: bool) -> str:
    """A flag as a reader says it in a report ("yes", "no"), not as Python prints it."""
    return "yes" if v else "no"


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return yes_no(v)
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 1e5 else f"{v:.4g}"
    return str(v)


def table_csv(table: ReportTable) -> str:
    """The table as CSV text (every row; numbers written in full)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    cols = table.header()
    out.writerow(cols)
    for r in table.rows:
        out.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    return buf.getvalue()


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return yes_no(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        shown = ", ".join(_param(x) for x in v[:12])
        return f"[{len(v)} values] {shown}, …" if len(v) > 12 else shown
    if isinstance(v, dict):
        return "(none)" if not v else ", ".join(f"{k}: {_param(x)}" for k, x in v.items())
    return "" if v is None else str(v)


def _flat(d: Dict[str, Any], prefix: str = "") -> List[tuple]:
    """Nested parameters → ``[("views.contexts.direction", "both"), …]``."""
    out: List[tuple] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += _flat(v, key + ".")
        else:
            out.append((key, _param(v)))
    return out


def _figure_groups(figures: List[tuple]) -> List[tuple]:
    """One entry per figure: the same figure in several formats (same file stem) is shown once
    (PNG preferred, else SVG) with a link to every format. Returns ``(shown or None, files,
    caption)``."""
    groups: Dict[str, list] = {}
    for rel, caption in figures:
        groups.setdefault(str(Path(rel).with_suffix("")), []).append((rel, caption))
    out = []
    for items in groups.values():
        files = [r for r, _c in items]
        shown = next((r for r in files if r.lower().endswith(".png")),
                     next((r for r in files if r.lower().endswith(".svg")), None))
        out.append((shown, files, items[0][1]))
    return out


# ---- Markdown ----------------------------------------------------------------------------
def _md(text: Any) -> str:
    """Text as inert Markdown: HTML characters become entities (no raw HTML from a sentence
    reaches report.md), Markdown syntax is backslash-escaped."""
    s = " ".join(str(text).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\`*_[]|#!":
        s = s.replace(ch, "\\" + ch)
    return s


def _md_table(cols: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    lines = ["| " + " | ".join(_md(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    return lines


def render_markdown(spec: ReportSpec, tables: Dict[str, str], figures: List[tuple]) -> str:
    """``tables``: table name → CSV path (relative); ``figures``: (relative path, caption)."""
    out = [f"# {_md(spec.title)}", "", f"Created {_md(spec.created)} with ELMo Explorer.", ""]
    for heading, d in (("Model", spec.model), ("Data", spec.data), ("Parameters", spec.parameters)):
        if d:
            out += [f"## {heading}", ""] + _md_table(["", ""], _flat(d)) + [""]
    if spec.notes:
        out += ["## Notes", ""] + [f"- {_md(n)}" for n in spec.notes] + [""]
    if spec.tables:
        out += ["## Results", ""]
        for t in spec.tables:
            out += [f"### {_md(t.title)}", ""]
            if t.caption:
                out += [_md(t.caption), ""]
            rel = tables[t.name]
            if t.show and t.rows:
                cols = t.header()
                shown = [[_cell(r.get(c)) for c in cols] for r in t.rows[:MAX_SHOWN_ROWS]]
                out += _md_table(cols, shown) + [""]
                if len(t.rows) > MAX_SHOWN_ROWS:
                    out += [f"First {MAX_SHOWN_ROWS} of {len(t.rows)} rows.", ""]
            elif not t.rows:
                out += ["(no rows)", ""]
            out += [f"Full table: [{rel}]({rel})", ""]
    if figures:
        out += ["## Figures", ""]
        for shown, files, caption in _figure_groups(figures):
            if shown:
                out += [f"![{_md(caption)}]({shown})", ""]
            links = ", ".join(f"[{Path(r).suffix[1:].upper()}]({r})" for r in files)
            out += [f"{_md(caption)} ({links})", ""]
    return "\n".join(out).rstrip() + "\n"


# ---- HTML --------------------------------------------------------------------------------
CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em
auto;
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.7em}h2{border-bottom:1px solid #ccc;
padding-bottom:.2em;margin-top:1.6em}table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:.9em;color:#444}.meta{color:#666;font-size:.9em}"""


def _is_num(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _html_table(cols: Sequence[str], rows: Sequence[Sequence[str]], header: bool = True) -> str:
    e = html.escape
    parts = ["<table>"]
    if header:
        parts.append("<tr>" + "".join(f"<th>{e(str(c))}</th>" for c in cols) + "</tr>")
    for r in rows:
        parts.append("<tr>" + "".join(
            f"<td class='num'>{e(c)}</td>" if c and _is_num(c) else f"<td>{e(c)}</td>"
            for c in r) + "</tr>")
    parts.append("</table>")
    return "".join(parts)


def render_html(spec: ReportSpec, tables: Dict[str, str], figures: List[tuple]) -> str:
    """The same content as :func:`render_markdown`, as one self-contained HTML page."""
    e = html.escape
    out = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
           f"<title>{e(spec.title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{e(spec.title)}</h1>",
           f"<p class='meta'>Created {e(spec.created)} with ELMo Explorer.</p>"]
    for heading, d in (("Model", spec.model), ("Data", spec.data), ("Parameters", spec.parameters)):
        if d:
            rows = [[k, v] for k, v in _flat(d)]
            out += [f"<h2>{heading}</h2>", _html_table(["", ""], rows, header=False)]
    if spec.notes:
        out += ["<h2>Notes</h2><ul>"] + [f"<li>{e(n)}</li>" for n in spec.notes] + ["</ul>"]
    if spec.tables:
        out.append("<h2>Results</h2>")
        for t in spec.tables:
            rel = tables[t.name]
            out.append(f"<h3>{e(t.title)}</h3>")
            if t.caption:
                out.append(f"<p>{e(t.caption)}</p>")
            if t.show and t.rows:
                cols = t.header()
                shown = [[_cell(r.get(c)) for c in cols] for r in t.rows[:MAX_SHOWN_ROWS]]
                out.append(_html_table(cols, shown))
                if len(t.rows) > MAX_SHOWN_ROWS:
                    out.append(f"<p class='meta'>First {MAX_SHOWN_ROWS} of {len(t.rows)} rows.</p>")
            elif not t.rows:
                out.append("<p class='meta'>(no rows)</p>")
            out.append(f"<p class='meta'>Full table: <a href='{e(rel, quote=True)}'>{e(rel)}</a></p>")
    if figures:
        out.append("<h2>Figures</h2>")
        for shown, files, caption in _figure_groups(figures):
            img = (f"<img src='{e(shown, quote=True)}' alt='{e(caption, quote=True)}'>"
                   if shown else "")
            links = ", ".join(f"<a href='{e(r, quote=True)}'>{e(Path(r).suffix[1:].upper())}</a>"
                              for r in files)
            out.append(f"<figure>{img}<figcaption>{e(caption)} ({links})</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ---- writing -----------------------------------------------------------------------------
#: the kind of folder a report is (its marker, :data:`elmo_engine.io.writing.MARKER`)
REPORT_KIND = "report"


def replace_problem(folder) -> Optional[str]:
    """Why the existing ``folder`` may not be replaced by a report (None: it may).

    A report replaces its folder as a whole, so the folder must be empty or hold only a report
    written earlier (the files its marker lists), and may not be a link, the current folder,
    one of its parents or the home folder (:func:`elmo_engine.io.writing.replace_folder_problem`:
    the whole tree is looked at; a folder of models, an index or a thesis is never deleted).
    """
    return replace_folder_problem(folder, REPORT_KIND)


def check_report_folder(folder, overwrite: bool) -> None:
    """Before any work: refuse an existing ``folder`` without ``overwrite`` and one a report may
    not replace (:class:`~elmo_engine.io.writing.NotReplaceableError`, one line naming it and
    what it holds)."""
    check_replaceable(folder, REPORT_KIND, overwrite)


def write_report(folder, spec: ReportSpec, overwrite: bool = False,
                 state: Optional[TaskState] = None) -> List[Path]:
    """Write the report folder; return the files written (inside ``folder``).

    Raises
    ------
    TargetExistsError : ``folder`` exists and ``overwrite`` is False
    NotReplaceableError : ``folder`` holds anything but an earlier report (never replaced)
    ExportError : a write failed (disk full, no permission); nothing was left behind
    InputError : a figure file is missing, or two tables share a name
    """
    folder = Path(folder)
    check_report_folder(folder, overwrite)
    names = [_safe_name(t.name) for t in spec.tables]
    if len(set(names)) != len(names):
        raise InputError("two report tables have the same name: " + ", ".join(names))
    for f in spec.figures:
        if not Path(f.path).is_file():
            raise InputError("the figure file is missing", path=f.path)
    if not spec.created:
        spec.created = datetime.fromtimestamp(time.time(), timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC")
    with writing(folder):
        staging = staging_folder(folder)
        try:
            written = _fill(staging, spec, names, state)
            swap_in_folder(staging, folder, overwrite, REPORT_KIND)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return [folder / p for p in written]


def _fill(staging: Path, spec: ReportSpec, names: List[str], state) -> List[str]:
    written: List[str] = []
    tables: Dict[str, str] = {}
    total = len(spec.tables) + len(spec.figures) + 2
    if spec.tables:
        (staging / "tables").mkdir()
    for k, (t, name) in enumerate(zip(spec.tables, names)):
        check(state)
        rel = f"tables/{name}.csv"
        _write(staging / rel, table_csv(t).encode("utf-8"))
        tables[t.name] = rel
        written.append(rel)
        report(state, k + 1, total, "writing the report tables")
    figures: List[tuple] = []
    if spec.figures:
        (staging / "figures").mkdir()
    used = set()
    for k, f in enumerate(spec.figures):
        check(state)
        src = Path(f.path)
        name, n = src.name, 1
        while name in used:
            n += 1
            name = f"{src.stem}-{n}{src.suffix}"
        used.add(name)
        rel = f"figures/{name}"
        _write(staging / rel, src.read_bytes())
        figures.append((rel, f.caption or src.stem.replace("_", " ")))
        written.append(rel)
        report(state, len(spec.tables) + k + 1, total, "copying the figures")
    _write(staging / "report.md", render_markdown(spec, tables, figures).encode("utf-8"))
    _write(staging / "report.html", render_html(spec, tables, figures).encode("utf-8"))
    report(state, total, total, "report written")
    return written + ["report.md", "report.html"]


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


__all__ = ["MAX_SHOWN_ROWS", "REPORT_KIND", "ReportFigure", "ReportSpec", "ReportTable", "render_html",
           "render_markdown", "check_report_folder", "replace_problem", "table_csv",
           "write_report"]
