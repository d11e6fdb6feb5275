"""The category colours of the map views (Projection, Corpus): one palette, so that a colour means
the same kind of thing in both."""
from __future__ import annotations

# 20 distinguishable colours (Tableau 20, reordered so neighbours differ)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
           "#c5b0d5", "#c49c94", "#f7b6d2", "#9edae5", "#dbdb8d", "#393b79"]
#: the colour of the categories beyond the palette ("others")
OTHER_COLOUR = "#c8c8c8"
#: the selected points (a box selection): a black ring this much larger than a point, this wide
SELECTED_PEN = ("#000000", 1.5)
SELECTED_EXTRA_PX = 5
#: the token selected in the workspace (the Projection view's search hits, the Corpus view's
#: query occurrence): a yellow star this much larger than a point
FOUND_COLOUR = "#ffd400"
FOUND_EXTRA_PX = 9
