"""Picture the Probes view's "Usefulness beside identity" page: docs/images/probes-usefulness.png.

Shows the results of ``elmo-explorer probe --cumulative`` runs (their results JSON files, e.g.
the demo POS and word-sense tasks of docs/guide/probes.md) in the Probes view at 1280×800, on
the usefulness page, the last run plotted. Needs a display, e.g.::

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshot_usefulness.py \\
        docs/images/probes-usefulness.png demo_pos.json demo_wsd.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from screenshot_window import started_window
from screenshot_window import wait as wait_until


def main(out: Path, results: list) -> int:
    app, w = started_window(("probes",))

    def wait(cond, seconds: float = 300) -> None:
        wait_until(app, cond, seconds)

    p = w.panels["probes"]
    w.show_view("probes")
    ws = w.workspace
    wait(lambda: ws.embedder is not None and ws.all_embedded() and p.is_ready()
         and not ws.worker.is_busy())
    p.restore_probe_runs([json.loads(Path(f).read_text("utf-8")) for f in results])
    p.view.pages.setCurrentWidget(p.view.usefulness)
    wait(lambda: p.is_ready() and not ws.worker.is_busy())
    w.grab().save(str(out))
    w.workspace.worker.shutdown()
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit("usage: screenshot_usefulness.py OUT.png RESULTS.json …")
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
