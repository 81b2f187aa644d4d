"""Drawing classes equally often, whatever their frequencies (article §2.2: class imbalance), resumably."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import WeightedRandomSampler

from labkit.core.errors import LabkitValueError
from labkit.samplers.resumable import ResumableSampler, epoch_rng


class ClassBalancedSampler(ResumableSampler):
    """Draws classes equally often, whatever their frequencies (article §2.2: class imbalance).

    Each sample is weighted by 1 / (size of its class) and drawn with replacement through
    ``torch.utils.data.WeightedRandomSampler``, seeded per epoch so the draw is resumable.
    """

    def __init__(self, labels: Sequence[int], num_samples: int | None = None, seed: int = 0) -> None:
        super().__init__(seed)
        labels = np.asarray(labels, dtype=np.int64)
        if labels.ndim != 1 or len(labels) == 0 or labels.min() < 0:
            raise LabkitValueError("labels must be a non-empty 1-D sequence of non-negative class indices")
        counts = np.bincount(labels)
        self.weights = torch.from_numpy(1.0 / counts[labels])
        self.num_samples = int(num_samples or len(labels))

    def __len__(self) -> int:
        return self.num_samples

    def order(self, epoch: int) -> list[int]:
        generator = torch.Generator().manual_seed(int(epoch_rng(self.seed, epoch).integers(2**62)))
        return list(WeightedRandomSampler(self.weights, self.num_samples, replacement=True, generator=generator))
