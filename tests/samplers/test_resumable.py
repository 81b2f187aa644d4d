import importlib
import pkgutil

import numpy as np
import pytest
from torch.utils.data import DataLoader, Dataset

import labkit.samplers
from labkit.samplers.block_shuffle import BlockShuffleSampler, DistributedBlockSampler
from labkit.samplers.class_balanced import ClassBalancedSampler
from labkit.samplers.every_sample import InOrderSampler, RandomOffsetSequentialSampler, RandomPermutationSampler
from labkit.samplers.grouped import GroupedBatchSampler
from labkit.samplers.resumable import EverySampleOnce, ResumableSampler


class Indices(Dataset):
    """Returns its index: what a loader delivers is then exactly the order it read."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def _samplers(n=50):
    """A case for every sampler of indices: the conformance tests run over each (see the next test)."""
    labels = np.arange(n) % 5
    return {
        "block": lambda: BlockShuffleSampler(n, block_size=8, window=2, seed=3),
        "distributed": lambda: DistributedBlockSampler(n, num_replicas=2, rank=1, seed=3, block_size=8),
        "balanced": lambda: ClassBalancedSampler(labels, seed=3),
        "offset": lambda: RandomOffsetSequentialSampler(n, seed=3),
        "permutation": lambda: RandomPermutationSampler(n, seed=3),  # make_loader's default with shuffle
        "in order": lambda: InOrderSampler(n),  # make_loader's default with shuffle=False
    }


#: Samplers of batches, whose resume counts batches (tested below on their own).
BATCH_SAMPLERS = {GroupedBatchSampler}
#: Samplers whose order is the same every epoch by design.
FIXED_ORDER = {"in order"}


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_resumable_sampler_in_labkit_has_a_conformance_case():
    for info in pkgutil.iter_modules(labkit.samplers.__path__, "labkit.samplers."):
        importlib.import_module(info.name)
    found = {c for c in _subclasses(ResumableSampler) if c.__module__.startswith("labkit.")} - {EverySampleOnce}
    covered = {type(make()) for make in _samplers().values()} | BATCH_SAMPLERS
    assert found == covered, f"ResumableSamplers without a case in _samplers(): {found - covered}"


@pytest.mark.parametrize("name", [n for n in _samplers() if n not in FIXED_ORDER])
def test_order_changes_each_epoch_without_set_epoch_and_repeats_with_it(name):
    s = _samplers()[name]()
    first, second = list(s), list(s)
    assert first != second and len(first) == len(s)
    s.set_epoch(0)
    assert list(s) == first


def _epoch_through_loader(sampler, workers, stop_after=None, batch_size=4):
    loader = DataLoader(Indices(50), batch_size=batch_size, sampler=sampler, num_workers=workers)
    seen, steps = [], 0
    for batch in loader:
        seen += batch.tolist()
        steps += 1
        if stop_after is not None and steps == stop_after:
            return seen, sampler.state_dict(consumed=steps * batch_size)
    return seen, None


@pytest.mark.parametrize("name", list(_samplers()))
@pytest.mark.parametrize("workers_before,workers_after", [(0, 0), (2, 0), (0, 2), (2, 1)])
def test_resume_mid_epoch_yields_exactly_the_rest(name, workers_before, workers_after):
    reference = _samplers()[name]()
    reference.set_epoch(1)
    full = list(reference)
    sampler = _samplers()[name]()
    sampler.set_epoch(1)
    head, state = _epoch_through_loader(sampler, workers_before, stop_after=3)
    resumed = _samplers()[name]()
    resumed.load_state_dict(state)
    resumed.set_epoch(1)  # a training loop's usual call must not undo the resume
    tail, _ = _epoch_through_loader(resumed, workers_after)
    assert head + tail == full
    next_epoch = _samplers()[name]()
    next_epoch.set_epoch(2)
    assert list(resumed) == list(next_epoch)  # and the following epoch starts from its beginning


def test_resume_of_a_batch_sampler_counts_batches():
    groups = np.arange(30) // 3
    sampler = GroupedBatchSampler(groups, batch_size=6, seed=2)
    full = list(GroupedBatchSampler(groups, batch_size=6, seed=2))
    it = iter(sampler)
    head = [next(it), next(it)]
    resumed = GroupedBatchSampler(groups, batch_size=6, seed=2)
    resumed.load_state_dict(sampler.state_dict())
    assert head + list(resumed) == full


def test_state_from_another_sampler_is_refused():
    state = BlockShuffleSampler(10, seed=1).state_dict()
    with pytest.raises(ValueError, match="seed"):
        BlockShuffleSampler(10, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="RandomOffsetSequentialSampler"):
        RandomOffsetSequentialSampler(10, seed=1).load_state_dict(state)


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_inside_torchdata_stateful_dataloader(workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        return StatefulDataLoader(
            Indices(50),
            batch_size=4,
            num_workers=workers,
            sampler=BlockShuffleSampler(50, block_size=8, window=2, seed=9),
        )

    full = [i for b in loader() for i in b.tolist()]
    first = loader()
    head = []
    for step, batch in enumerate(first):
        head += batch.tolist()
        if step == 4:
            state = first.state_dict()
            break
    second = loader()
    second.load_state_dict(state)
    tail = [i for b in second for i in b.tolist()]
    assert head + tail == full
