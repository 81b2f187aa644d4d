"""The epoch a sample is fetched for, carried from the sampler to the dataset without changing the index it sees.

A per-sample random draw (a crop box, a flip) that a resumed run must repeat is seeded by (seed, epoch,
index). The index reaches the worker; the epoch does not: persistent workers keep the dataset object they
started with, so an epoch set on the dataset in the main process never arrives.

The epoch therefore travels beside the indices, not inside them: `labkit.samplers.epoch_tagged.EpochTagged`
yields each batch as an `EpochBatch` (a ``list`` of plain ``int`` indices with an ``.epoch``; a single index as
an `EpochIndex`), and `labkit.datasets.epoch_scoped.EpochScoped`, the dataset `make_loader` hands to torch, opens
an `epoch_scope` around the fetch in whichever process makes it and passes the dataset the plain ints. A user's
dataset sees exactly what torch's DataLoader would give it (``str(i)``, ``f"{i}.jpg"``, a dict key, ``pickle``
all as for the ``int``); labkit's datasets, and a labkit dataset inside a ``Subset``, ``ConcatDataset`` or a
wrapper of the user's, read the epoch from the scope (`epoch_of`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

_SCOPE: ContextVar[int | None] = ContextVar("labkit_epoch", default=None)


class EpochIndex(int):
    """``int(index)``, with ``.epoch`` the epoch it was drawn for: one index on its way to `EpochScoped`
    (a loader with ``batch_size=None``). It prints, formats and hashes as the ``int``; only pickling keeps
    the epoch, so that it crosses into a worker."""

    epoch: int

    def __new__(cls, index: int, epoch: int) -> EpochIndex:
        obj = super().__new__(cls, index)
        obj.epoch = int(epoch)
        return obj

    def __reduce__(self) -> tuple[Any, tuple[int, int]]:
        return (EpochIndex, (int(self), self.epoch))

    __repr__ = int.__repr__
    __str__ = int.__repr__
    __format__ = int.__format__


class EpochBatch(list):
    """A batch's indices as plain ``int``s, with ``.epoch`` the epoch they were drawn for (pickles with it)."""

    def __init__(self, indices: Iterable[Any], epoch: int) -> None:
        super().__init__(int(i) for i in indices)
        self.epoch = int(epoch)

    def __reduce__(self) -> tuple[Any, tuple[list, int]]:
        return (EpochBatch, (list(self), self.epoch))


@contextlib.contextmanager
def epoch_scope(epoch: int | None) -> Iterator[None]:
    """Within the block (this thread or task), a plain index is one of ``epoch`` (`None`: the dataset's own)."""
    token = _SCOPE.set(None if epoch is None else int(epoch))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _scoped(default: int) -> int:
    scoped = _SCOPE.get()
    return default if scoped is None else scoped


def epochs_of(indices: Sequence[Any], default: int) -> list[int]:
    """`epoch_of` each index of a batch, the scope looked up once for the batch (no Python call per sample)."""
    shared = _scoped(default)
    return [i.epoch if isinstance(i, EpochIndex) else shared for i in indices]


def epoch_of(index: Any, default: int) -> int:
    """The epoch an index was drawn for: its own (`EpochIndex`), else the `epoch_scope` it is fetched in, else
    ``default`` (the dataset's `set_epoch`)."""
    return index.epoch if isinstance(index, EpochIndex) else _scoped(default)
