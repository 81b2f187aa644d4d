"""Any sampler, its items tagged with the epoch they were drawn for (`labkit.core.epoch_index`).

Per-sample random augmentation drawn in the workers (`labkit.decode.random_crop`) is seeded by
(seed, epoch, index); wrapping the sampler hands every worker the epoch with each batch, persistent
workers included: a batch sampler's lists become `EpochBatch` lists (plain ``int`` indices and the epoch),
a sampler's indices `EpochIndex` ints. The epoch is the wrapped sampler's own (``.epoch``, as labkit's resumable
samplers and ``DistributedSampler`` keep it; a ``BatchSampler``'s is its sampler's) when it has one, else the
count of passes so far; `set_epoch`, ``state_dict`` and ``load_state_dict`` are the wrapped sampler's, so a
resumed run tags as the first did.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import Sampler

from labkit.core.epoch_index import EpochBatch, EpochIndex
from labkit.core.pass_through import PassThrough


class EpochTagged(PassThrough, Sampler):
    """``sampler``'s items tagged with their epoch: a batch sampler's lists as `EpochBatch`, indices as `EpochIndex`."""

    wraps = "sampler"

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self._passes = 0

    def _order(self) -> Any:
        """The sampler that keeps the epoch: the wrapped one, or the sampler a ``BatchSampler`` batches."""
        inner = self.sampler
        while getattr(inner, "epoch", None) is None and getattr(inner, "sampler", None) is not None:
            inner = inner.sampler
        return inner

    @property
    def epoch(self) -> int:
        """The epoch the next pass is tagged with."""
        own: int | None = getattr(self._order(), "epoch", None)
        return self._passes if own is None else int(own)

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self._passes += 1
        for item in self.sampler:
            if isinstance(item, (list, tuple)):
                yield EpochBatch(item, epoch)
            else:
                yield EpochIndex(item, epoch)

    def set_epoch(self, epoch: int) -> None:
        """The wrapped sampler's ``set_epoch`` where it has one; the tag of the next pass either way."""
        if hasattr(self._order(), "set_epoch"):
            self._order().set_epoch(epoch)
        self._passes = int(epoch)
