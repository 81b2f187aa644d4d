"""A sample index that carries the epoch it was drawn for, through a DataLoader's index queues.

A per-sample random draw (a crop box, a flip) that a resumed run must repeat is seeded by
(seed, epoch, index). The index reaches the worker; the epoch does not: persistent workers keep the
dataset object they started with, so an epoch set on the dataset in the main process never arrives.
`EpochIndex` is an ``int`` (every dataset indexes with it unchanged) that also says its epoch, and
pickles as such into any worker under any start method. `labkit.samplers.epoch_tagged.EpochTagged`
makes a sampler yield them.
"""

from __future__ import annotations

from typing import Any, Tuple


class EpochIndex(int):
    """``int(index)``, with ``.epoch`` the epoch it was drawn for."""

    epoch: int

    def __new__(cls, index: int, epoch: int) -> "EpochIndex":
        obj = super().__new__(cls, index)
        obj.epoch = int(epoch)
        return obj

    def __reduce__(self) -> Tuple[Any, Tuple[int, int]]:
        return (EpochIndex, (int(self), self.epoch))

    def __repr__(self) -> str:
        return f"EpochIndex({int(self)}, epoch={self.epoch})"


def epoch_of(index: Any, default: int) -> int:
    """The epoch an index was drawn for, or ``default`` for a plain one."""
    return index.epoch if isinstance(index, EpochIndex) else default
