"""Batches that never split a group (article §2.2: the frames of one video in one batch), resumably."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labkit.core.errors import LabkitValueError
from labkit.samplers.resumable import ResumableSampler, epoch_rng


class GroupedBatchSampler(ResumableSampler):
    """A batch sampler that never splits a group (article §2.2: frames of one video in one batch).

    Groups are shuffled each epoch and packed whole into batches of at most ``batch_size``;
    a batch closes early when the next group does not fit. Pass it as ``batch_sampler=``;
    its position counts batches, not samples.
    """

    def __init__(self, groups: Sequence[Any], batch_size: int, seed: int = 0, shuffle: bool = True) -> None:
        super().__init__(seed)
        groups = np.asarray(groups)
        keys, inverse = np.unique(groups, return_inverse=True)
        self.members = [np.flatnonzero(inverse == g).tolist() for g in range(len(keys))]
        too_big = [(keys.tolist()[g], len(m)) for g, m in enumerate(self.members) if len(m) > batch_size]
        if too_big:
            raise LabkitValueError(
                f"group {too_big[0][0]!r} has {too_big[0][1]} samples, more than batch_size="
                f"{batch_size}; raise batch_size or split the group"
            )
        self.batch_size, self.shuffle = int(batch_size), shuffle

    def order(self, epoch: int) -> list[list[int]]:
        sequence = (
            epoch_rng(self.seed, epoch).permutation(len(self.members)) if self.shuffle else range(len(self.members))
        )
        batches: list[list[int]] = []
        current: list[int] = []
        for g in sequence:
            if len(current) + len(self.members[g]) > self.batch_size:
                batches.append(current)
                current = []
            current.extend(self.members[g])
        if current:
            batches.append(current)
        return batches
