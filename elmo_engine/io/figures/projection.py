"""The Projection view's figure: a projection's 2-D maps, one panel per layer and the mix, with
equal axes, drawn with :func:`elmo_engine.io.figures.scatter_panels` (the one figure module)."""
from __future__ import annotations

from elmo_engine.io import figures as F


def projection_grid(panels, legend=None, title: str = "", user_label: str = "your sentences"):
    """A projection's maps: ``panels`` as :func:`elmo_engine.io.figures.scatter_panels` takes
    them, two per row, equal axes; the highlighted points named ``user_label``."""
    return F.scatter_panels(panels, ncols=2, legend=legend, title=title, user_label=user_label)


__all__ = ["projection_grid"]
