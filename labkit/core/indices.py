"""A batch of sample indices checked and wrapped at once: Python's negative indexing, an out-of-range index named.

The pack reader and the datasets take a batch's indices in one call (no Python call per sample); both accept
what a list does (``-1`` is the last sample) and refuse the first index outside ``[-n, n)`` with their own error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def wrap_indices(indices: Sequence[int], n: int, refuse: Callable[[int], Any]) -> np.ndarray:
    """``indices`` as int64 in ``[0, n)``; ``refuse(index)`` is called with the first one outside ``[-n, n)``
    and must raise, naming it."""
    asked = np.asarray(indices, dtype=np.int64).reshape(-1)
    outside = np.flatnonzero((asked < -n) | (asked >= n))
    if len(outside):
        refuse(int(asked[outside[0]]))
    return asked % max(n, 1)
