"""Picture the Corpus view with a box selection on its map (every token of the index, density
image), then its Selection tab: ``OUT.png`` and ``OUT-list.png``; with ``--figure FIG.png``
also the exported map figure of that state (the box, its points and the query's ring).

Runs ``elmo-explorer --screenshot`` with two steps added before the grab: the map scope is set to
every token, then a box over the left third of the layer-2 map is selected (as a Shift+drag
does). Build the reference index into the settings folder first (see
docs/guide/corpus-index.md, "The Corpus view"), then, with a display of at least 1280×800::

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshot_corpus_selection.py \\
        --settings-dir shot-settings shot.png
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--settings-dir", required=True)
    p.add_argument("--size", default="1280x800")
    p.add_argument("--figure", type=Path, help="also export the map figure here (PNG/SVG/PDF)")
    p.add_argument("--figure-dpi", type=int, default=110)
    args = p.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    from elmo_explorer.shell import screenshot
    from elmo_explorer.shell.main import main as app_main
    from elmo_explorer.views.corpus.model import MapScope

    shoot = screenshot.Screenshot._shoot
    step = {"n": 0}

    def staged(self, jobs_seen=None):
        panel = self.panel
        if self._done or not self._ready():
            return
        if step["n"] == 0:                                 # every token on the map
            step["n"] = 1
            panel.view.map_scope.setCurrentIndex(panel.view.map_scope.findData(MapScope.ALL))
            return
        if step["n"] == 1 and panel.map is not None and panel.map.title == "all tokens":
            step["n"] = 2
            plot = panel.view.maps[2]
            (x0, x1), (y0, y1) = plot.view.viewRange()
            plot.select_in_rect((x0, y0, x0 + (x1 - x0) / 3, y1))
            return
        if step["n"] == 2 and panel.model.selection is not None and panel.model.selection.lines:
            step["n"] = 3
            QApplication.processEvents()
            shoot(self, None)
            panel.view.tabs.setCurrentIndex(2)
            QApplication.processEvents()
            image = self.window.grab().toImage()
            image.save(str(args.out.with_name(args.out.stem + "-list.png")), "PNG")
            if args.figure is not None:
                from elmo_explorer.common.figure_export import FigureOptions

                panel.export_figure("map", args.figure,
                                    FigureOptions(dpi=args.figure_dpi, formats=("png",)))

    screenshot.Screenshot._shoot = staged
    return app_main(["--settings-dir", args.settings_dir, "--screenshot", str(args.out),
                     "--view", "corpus", "--size", args.size])


if __name__ == "__main__":
    sys.exit(main())
