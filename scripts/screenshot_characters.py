"""Picture the Characters view's four tabs: ``OUT.png`` (the Word lab) and ``OUT-atlas.png``,
``OUT-perturb.png``, ``OUT-context.png`` (the Filter atlas, Perturbations and In context tabs).

Runs ``elmo-explorer --screenshot --view characters`` and, once the view is ready (its word lab,
atlas, sweep and nonce word computed), grabs the window on each tab. The view opens with a nonce
word and a typo ("blorft recieve …"; "He sat on the blorft of the river ."); the In context tab
lists the nonce word's nearest occurrences when the Corpus view's index of the model is in the
settings folder (build it in the Corpus view, or with ``elmo-explorer index`` into
``DATA/corpus-index/reference-<checksum[:12]>``, see docs/guide/characters.md). With a display
of at least 1280×800::

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshot_characters.py \\
        --settings-dir shot-settings shot.png [--vocabulary model]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

TABS = ("", "-atlas", "-perturb", "-context")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--settings-dir", required=True)
    p.add_argument("--size", default="1280x800")
    p.add_argument("--vocabulary", choices=("reference", "model"), default="reference",
                   help="the word lab's known words (default: the reference corpus's)")
    args = p.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    from elmo_explorer.shell import screenshot
    from elmo_explorer.views.characters.model import VocabSource

    shoot = screenshot.Screenshot._shoot
    step = {"n": 0}

    def staged(self, jobs_seen=None):
        panel = self.panel
        if self._done or step["n"] == 2 or not self._ready():
            return                      # (processEvents below may call this again: once only)
        if step["n"] == 0 and args.vocabulary == "model":
            step["n"] = 1
            panel.set_vocabulary(VocabSource.MODEL)        # its end checks again
            return
        step["n"] = 2
        for k in range(len(TABS) - 1, -1, -1):            # the Word lab last: OUT.png
            panel.view.tabs.setCurrentIndex(k)
            QApplication.processEvents()
            if k:
                image = self.window.grab().toImage()
                image.save(str(args.out.with_name(args.out.stem + TABS[k] + ".png")), "PNG")
        shoot(self, None)

    screenshot.Screenshot._shoot = staged
    from elmo_explorer.shell.main import main as app_main

    return app_main(["--settings-dir", args.settings_dir, "--screenshot", str(args.out),
                     "--view", "characters", "--size", args.size])


if __name__ == "__main__":
    sys.exit(main())
