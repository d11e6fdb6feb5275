"""The category colours of the map views (Projection, Corpus): one palette, so that a colour means
the same kind of thing in both."""
from __future__ import annotations

from elmo_engine.io.figures import CATEGORY_PALETTE

# 20 distinguishable colours (Tableau 20, reordered so neighbours differ): the figures' own
PALETTE = list(CATEGORY_PALETTE)
#: the colour of the categories beyond the palette ("others")
OTHER_COLOUR = "#c8c8c8"
#: the selected points (a box selection): a black ring this much larger than a point, this wide
SELECTED_PEN = ("#000000", 1.5)
SELECTED_EXTRA_PX = 5
#: the token selected in the workspace (the Projection view's search hits, the Corpus view's
#: query occurrence): a yellow star this much larger than a point
FOUND_COLOUR = "#ffd400"
FOUND_EXTRA_PX = 9
