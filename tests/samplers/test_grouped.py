import itertools

import numpy as np
import pytest

from labkit.samplers.grouped import GroupedBatchSampler


def test_grouped_batches_keep_groups_whole():
    groups = np.repeat(np.arange(20), np.arange(20) % 5 + 1)  # 20 videos of 1..5 frames
    batches = list(GroupedBatchSampler(groups, batch_size=8, seed=0))
    assert sorted(itertools.chain(*batches)) == list(range(len(groups)))
    assert all(len(b) <= 8 for b in batches)
    where = {}
    for k, b in enumerate(batches):
        for i in b:
            where.setdefault(groups[i], set()).add(k)
    assert all(len(v) == 1 for v in where.values())
    with pytest.raises(ValueError, match="group 4"):
        GroupedBatchSampler(groups, batch_size=4)
