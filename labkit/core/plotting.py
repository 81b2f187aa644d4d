"""matplotlib, imported where a plot is asked for: the library runs without it (it comes with the course's
``lab`` extra), and a plot asked for without it is one clear error that says what to install."""

from __future__ import annotations

from typing import Any

from labkit.core.errors import LabkitError

INSTALL = "pip install 'torch-labkit[lab]'"


class PlottingUnavailableError(LabkitError, ImportError):
    """A plot was asked for where matplotlib is not installed."""


def pyplot(headless: bool = False) -> Any:
    """``matplotlib.pyplot`` (on the ``Agg`` backend when ``headless``), or `PlottingUnavailableError`."""
    try:
        import matplotlib
    except ImportError:
        raise PlottingUnavailableError(
            f"plots need matplotlib, which is not installed here: {INSTALL} "
            "(or pip install matplotlib), or leave the plot out"
        ) from None
    if headless:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
