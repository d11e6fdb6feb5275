"""Picture the Units view's intervention panel on the bundled model: docs/images/units.png.

The sentence *The keys to the cabinet are on the table .*, cells 78 and 403 of the top layer's
forward LM (the two ``Number`` cells of docs/guide/units.md) zeroed at every position, re-measured
before → after (the LMs, the minimal pairs, a probe of the top layer and the similarity of *keys*
across its contexts); then the Unit tab with cell 78's top contexts (``OUT`` with ``-unit``
before the extension), the Pattern tab with *keys* (layer 1 forward cells, threshold 0.5, over
the demo POS sentences; ``-pattern``) and the Ranking tab, ranked for the demo POS task, its
layer 1 forward cells' row selected with its top-k curve (``-ranking``). Needs a display at
1280×800, e.g.::

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshot_units.py docs/images/units.png
"""
from __future__ import annotations

import sys
from pathlib import Path

from screenshot_window import started_window
from screenshot_window import wait as wait_until


def main(out: Path) -> int:
    from elmo_explorer.views.units.model import UnitChoice

    app, w = started_window(("units",))

    def wait(cond, seconds: float = 300) -> None:
        wait_until(app, cond, seconds)

    p = w.panels["units"]
    w.show_view("units")
    wait(lambda: w.workspace.embedder is not None and p.model.sentence is not None
         and p.is_ready())
    w.workspace.set_sentences(["The keys to the cabinet are on the table ."])
    wait(lambda: p.model.sentence is not None and p.model.sentence.tokens[1] == "keys"
         and p.is_ready())
    v = p.view
    iv = v.intervene_page
    iv.iv_layer.setValue(1)
    iv.iv_direction.setCurrentText("forward")
    iv.iv_units.setText("78 403")
    iv.iv_op.setCurrentText("zero")
    iv.iv_word.setText("keys")
    p.intervene()
    wait(lambda: p.model.remeasure is not None and p.is_ready())
    w.grab().save(str(out))
    v.unit_page.set_unit_choice(UnitChoice(1, "forward", "c", 78))
    p.contexts()
    wait(lambda: p.model.contexts is not None and p.is_ready())
    w.grab().save(str(out.with_name(out.stem + "-unit" + out.suffix)))
    pp = v.pattern_page
    pp.p_layer.setValue(1)
    pp.p_direction.setCurrentText("forward")
    pp.p_start.setValue(2)                                # "keys"
    pp.p_end.setValue(2)
    pp.p_threshold.setValue(0.5)
    p.pattern()
    wait(lambda: p.model.pattern is not None and p.is_ready())
    w.grab().save(str(out.with_name(out.stem + "-pattern" + out.suffix)))
    p.rank()
    wait(lambda: p.model.ranking is not None and p.is_ready(), 900)
    v.tabs.setCurrentWidget(v.ranking_page)
    v.ranking_page.table.selectRow(4)                     # layer 1 forward c
    wait(lambda: p.model.contexts is not None and p.is_ready())
    v.tabs.setCurrentWidget(v.ranking_page)
    wait(lambda: True)
    w.grab().save(str(out.with_name(out.stem + "-ranking" + out.suffix)))
    w.workspace.worker.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "units.png")))
