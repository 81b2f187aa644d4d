"""EpochTagged: the epoch travels with each index or batch into the workers, persistent ones included."""

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler

from labkit.core.epoch_index import EpochBatch, epoch_of
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.epoch_tagged import EpochTagged


class EchoEpochs(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, index):
        return torch.tensor([int(index), epoch_of(index, -1)])


def test_a_plain_sampler_is_tagged_with_its_pass_count():
    tagged = EpochTagged(SequentialSampler(range(3)))
    assert [(int(i), i.epoch) for i in tagged] == [(0, 0), (1, 0), (2, 0)]
    assert {i.epoch for i in tagged} == {1}
    tagged.set_epoch(7)
    assert {i.epoch for i in tagged} == {7} and len(tagged) == 3


def test_a_resumable_sampler_gives_its_own_epoch_and_state():
    inner = BlockShuffleSampler(10, block_size=2, seed=1)
    tagged = EpochTagged(inner)
    tagged.set_epoch(4)
    first = [(int(i), i.epoch) for i in tagged]
    assert {e for _, e in first} == {4} and [i for i, _ in first] == list(inner.order(4))
    assert tagged.state_dict() == inner.state_dict()  # the wrapped sampler's, so a resume is the same


def test_batch_samplers_are_tagged_batch_by_batch_with_plain_indices():
    inner = BlockShuffleSampler(5, block_size=2, seed=1)
    tagged = EpochTagged(BatchSampler(inner, 2, drop_last=False))
    inner.set_epoch(3)
    batches = list(tagged)
    assert batches == [inner.order(3)[k : k + 2] for k in (0, 2, 4)]
    assert all(isinstance(b, EpochBatch) and b.epoch == 3 and all(type(i) is int for i in b) for b in batches)


@pytest.mark.parametrize("persistent", [False, True])
def test_workers_receive_the_epoch_each_epoch(persistent):
    sampler = EpochTagged(SequentialSampler(range(6)))
    loader = DataLoader(EchoEpochs(), batch_size=2, sampler=sampler, num_workers=2, persistent_workers=persistent)
    for epoch in range(3):
        seen = torch.cat(list(loader))
        assert seen[:, 0].tolist() == list(range(6)) and set(seen[:, 1].tolist()) == {epoch}
