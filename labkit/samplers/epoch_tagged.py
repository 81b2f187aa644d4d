"""Any sampler, its indices tagged with the epoch they were drawn for (`labkit.core.epoch_index.EpochIndex`).

Per-sample random augmentation drawn in the workers (`labkit.decode.random_crop`) is seeded by
(seed, epoch, index); wrapping the sampler hands every worker the epoch with each index, persistent
workers included. The epoch is the wrapped sampler's own (``.epoch``, as labkit's resumable samplers and
``DistributedSampler`` keep it) when it has one, else the count of passes so far; `set_epoch`,
``state_dict`` and ``load_state_dict`` are the wrapped sampler's, so a resumed run tags as the first did.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from torch.utils.data import Sampler

from labkit.core.epoch_index import EpochIndex
from labkit.core.pass_through import PassThrough


class EpochTagged(PassThrough, Sampler):
    """``sampler``'s items with each index an `EpochIndex` (a batch sampler's lists, index by index)."""

    wraps = "sampler"

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self._passes = 0

    @property
    def epoch(self) -> int:
        """The epoch the next pass is tagged with."""
        own: Optional[int] = getattr(self.sampler, "epoch", None)
        return self._passes if own is None else int(own)

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self._passes += 1
        for item in self.sampler:
            if isinstance(item, (list, tuple)):
                yield [EpochIndex(i, epoch) for i in item]
            else:
                yield EpochIndex(item, epoch)

    def set_epoch(self, epoch: int) -> None:
        """The wrapped sampler's ``set_epoch`` where it has one; the tag of the next pass either way."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        self._passes = int(epoch)

