"""The analysis views by name, in tab order: the one list, without Qt.

:mod:`.views` maps each name to its panel class (a test checks that both name the same views);
the command line reads the names from here — ``--view``'s choices, ``elmo-explorer --help`` and
the no-display message (:data:`elmo_explorer.shell.startup.NO_DISPLAY_HINT`) — so that they list
every view and answer before Qt (or torch) is imported.
"""
from __future__ import annotations

from typing import Tuple

#: the analysis views shown as tabs, in order
VIEWS: Tuple[str, ...] = ("contexts", "projection", "probes", "layers", "language-model", "corpus",
                          "characters", "units")
#: what ``--view`` accepts: the analysis views and the sentences panel
VIEW_CHOICES: Tuple[str, ...] = VIEWS + ("sentences",)
