"""Orders that read every sample once an epoch: a fresh random permutation (``shuffle=True``), in order from a random
offset (sequences), and plain order (``shuffle=False``), each resumable mid-epoch."""

from __future__ import annotations

import numpy as np

from labkit.samplers.resumable import EverySampleOnce, SampleCount, epoch_rng


class RandomOffsetSequentialSampler(EverySampleOnce):
    """In order, from a random start that changes each epoch, wrapping around (article §2.2: sequences)."""

    def order(self, epoch: int) -> list[int]:
        start = int(epoch_rng(self.seed, epoch).integers(self.n)) if self.n else 0
        return np.roll(np.arange(self.n), -start).tolist()


class RandomPermutationSampler(EverySampleOnce):
    """A fresh random permutation each epoch (what ``shuffle=True`` gives), resumable: `make_loader`'s default."""

    def order(self, epoch: int) -> list[int]:
        return epoch_rng(self.seed, epoch).permutation(self.n).tolist()


class InOrderSampler(EverySampleOnce):
    """0, 1, ..., n-1 every epoch (what ``shuffle=False`` gives), resumable mid-epoch."""

    def __init__(self, n: SampleCount) -> None:
        super().__init__(n, seed=0)

    def order(self, epoch: int) -> list[int]:
        return list(range(self.n))
