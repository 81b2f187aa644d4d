"""EpochIndex and EpochTagged: the epoch travels with each index into the workers, persistent ones included."""

import pickle

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler

from labkit.core.epoch_index import EpochIndex, epoch_of
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.epoch_tagged import EpochTagged


class EchoEpochs(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, index):
        return torch.tensor([int(index), epoch_of(index, -1)])


def test_an_epoch_index_is_the_int_it_says_and_pickles_with_its_epoch():
    i = EpochIndex(5, 3)
    assert i == 5 and [10, 11, 12, 13, 14, 15][i] == 15 and hash(i) == hash(5)
    j = pickle.loads(pickle.dumps(i))
    assert type(j) is EpochIndex and (int(j), j.epoch) == (5, 3) and repr(j) == "EpochIndex(5, epoch=3)"
    assert epoch_of(7, default=2) == 2 and epoch_of(i, default=2) == 3


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


def test_batch_samplers_are_tagged_index_by_index():
    tagged = EpochTagged(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False))
    batches = list(tagged)
    assert [[int(i) for i in b] for b in batches] == [[0, 1], [2, 3], [4]]
    assert all(isinstance(i, EpochIndex) and i.epoch == 0 for b in batches for i in b)


@pytest.mark.parametrize("persistent", [False, True])
def test_workers_receive_the_epoch_each_epoch(persistent):
    sampler = EpochTagged(SequentialSampler(range(6)))
    loader = DataLoader(EchoEpochs(), batch_size=2, sampler=sampler, num_workers=2, persistent_workers=persistent)
    for epoch in range(3):
        seen = torch.cat(list(loader))
        assert seen[:, 0].tolist() == list(range(6)) and set(seen[:, 1].tolist()) == {epoch}
