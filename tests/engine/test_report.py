"""The report folder: CSV tables, report.md, self-contained escaped report.html, safety."""
from __future__ import annotations

import csv
import errno
import os
import re
from html.parser import HTMLParser

import pytest

from elmo_engine.errors import ElmoError, InputError
from elmo_engine.io.report import (MAX_SHOWN_ROWS, ReportFigure, ReportSpec, ReportTable,
                                   write_report)
from elmo_engine.io.writing import NotReplaceableError, TargetExistsError

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
       b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00"
       b"\x00\x00\x00IEND\xaeB`\x82")


def make_spec(tmp_path, n_rows=3) -> ReportSpec:
    fig = tmp_path / "src" / "heat map.png"
    fig.parent.mkdir(exist_ok=True)
    fig.write_bytes(PNG)
    svg = tmp_path / "src" / "bars.svg"
    svg.write_text("<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>")
    rows = [{"view": f"layer {k}", "self-similarity": 0.5 + k / 10, "note": "a|b <c> & d"}
            for k in range(n_rows)]
    return ReportSpec(
        title="Report <script>alert(1)</script>",
        model={"name": "tiny", "checksum": "ab" * 32, "options": {"lstm": {"dim": 32}}},
        data={"sentences": 3, "tokens": 20},
        parameters={"views": {"contexts": {"weights": [0.2, 0.3, 0.5], "direction": "both"}}},
        tables=[ReportTable("summary", "Similarity & co", rows),
                ReportTable("big", "Matrix", [{"a": 1}], show=False)],
        figures=[ReportFigure(fig, "Heat <map>"), ReportFigure(svg)],
        notes=["word 'bank' & friends"])


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.srcs, self.hrefs = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a["src"])
        if tag in ("a", "link"):
            self.hrefs.append(a.get("href"))


def test_report_folder_contents(tmp_path):
    out = tmp_path / "report"
    files = write_report(out, make_spec(tmp_path))
    names = sorted(str(p.relative_to(out)) for p in files)
    assert names == ["figures/bars.svg", "figures/heat map.png", "report.html", "report.md",
                     "tables/big.csv", "tables/summary.csv"]
    with open(out / "tables" / "summary.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["view", "self-similarity", "note"] and len(rows) == 4
    assert rows[2] == ["layer 1", "0.6", "a|b <c> & d"]
    assert (out / "figures" / "heat map.png").read_bytes() == PNG
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no staging left


def test_html_is_self_contained_and_escaped(tmp_path):
    out = tmp_path / "r"
    write_report(out, make_spec(tmp_path))
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a|b &lt;c&gt; &amp; d" in page and "Heat &lt;map&gt;" in page
    p = _Collector()
    p.feed(page)
    assert "script" not in p.tags and "link" not in p.tags
    assert p.srcs == ["figures/heat map.png", "figures/bars.svg"]
    for ref in p.srcs + [h for h in p.hrefs if h]:
        assert not re.match(r"^[a-z]+:", ref) and (out / ref).is_file()    # relative, present
    assert "0.6000" in page and "options.lstm.dim" in page and "0.2, 0.3, 0.5" in page
    assert "tables/big.csv" in page and "<th>a</th>" not in page              # CSV-only table


def test_markdown(tmp_path):
    out = tmp_path / "r"
    write_report(out, make_spec(tmp_path, n_rows=MAX_SHOWN_ROWS + 5))
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# Report &lt;script&gt;alert(1)&lt;/script&gt;")
    assert "<" not in md and ">" not in md          # no raw HTML reaches report.md (issue 18)
    assert "| layer 0 | 0.5000 | a\\|b &lt;c&gt; &amp; d |" in md
    assert f"First {MAX_SHOWN_ROWS} of {MAX_SHOWN_ROWS + 5} rows." in md
    assert "![Heat &lt;map&gt;](figures/heat map.png)" in md and "[tables/summary.csv]" in md
    assert md.count("| layer ") == MAX_SHOWN_ROWS


def test_refuses_existing_folder_unless_asked(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(TargetExistsError):
        write_report(out, make_spec(tmp_path))
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    # a folder of the user's is never replaced, even when asked (issue 38)
    with pytest.raises(NotReplaceableError, match=r"r: is not a report folder: it holds mine"):
        write_report(out, make_spec(tmp_path), overwrite=True)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    (out / "mine.txt").unlink()
    write_report(out, make_spec(tmp_path), overwrite=True)      # empty: replaced
    assert (out / "report.html").is_file()
    write_report(out, make_spec(tmp_path), overwrite=True)      # an earlier report: replaced
    assert (out / "report.html").is_file() and (out / ".elmo-output.json").is_file()


def test_disk_full_leaves_nothing(tmp_path, monkeypatch):
    spec = make_spec(tmp_path)

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ElmoError, match=r"r: cannot write \(the disk is full\)"):
        write_report(tmp_path / "r", spec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_missing_figure_and_duplicate_tables(tmp_path):
    spec = make_spec(tmp_path)
    spec.figures.append(ReportFigure(tmp_path / "nope.png"))
    with pytest.raises(InputError, match="nope.png: the figure file is missing"):
        write_report(tmp_path / "r", spec)
    spec = make_spec(tmp_path)
    spec.tables.append(ReportTable("summary", "again", []))
    with pytest.raises(InputError, match="same name"):
        write_report(tmp_path / "r", spec)
    assert not (tmp_path / "r").exists()


def test_one_figure_in_several_formats_is_shown_once(tmp_path):
    spec = make_spec(tmp_path)
    svg = tmp_path / "src" / "heat map.svg"
    svg.write_text("<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>")
    spec.figures.insert(1, ReportFigure(svg, "Heat <map>"))
    write_report(tmp_path / "r", spec)
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    p = _Collector()
    p.feed(page)
    assert p.srcs == ["figures/heat map.png", "figures/bars.svg"]
    assert "figures/heat map.svg" in p.hrefs and page.count("<figure>") == 2
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "([PNG](figures/heat map.png), [SVG](figures/heat map.svg))" in md


def test_view_parameters_leave_documents_out_of_the_table():
    """Issue 39: report.md's parameter table held the whole layers JSON in one cell."""
    import json

    from elmo_engine.analysis.report import MAX_PARAMETER_CHARS, _view_parameters
    from elmo_engine.resources import HERE

    layers = json.loads((HERE / "layers_recorded.json").read_text(encoding="utf-8"))
    got = _view_parameters({
        "layers": {"result": layers, "sentences": 1000, "corpus": "x" * 400},
        "projection": {"colour_by": "sense", "umap": {"n_neighbors": 15, "min_dist": 0.1},
                       "nested": {"a": {"b": 1}}, "weights": [0.2, 0.3, 0.5]}})
    assert got == {"layers: sentences": 1000, "projection: colour by": "sense",
                   "projection: umap": "n_neighbors 15, min_dist 0.1",
                   "projection: weights": "0.2, 0.3, 0.5"}
    assert all(len(str(v)) <= MAX_PARAMETER_CHARS for v in got.values())
