"""torch's DataLoader contract, held by make_loader: the same cases through ``torch.utils.data.DataLoader`` and
``make_loader`` give the same batches, lengths and attributes, with 0 and 2 workers, under fork and spawn."""

import multiprocessing

import numpy as np
import pytest
import torch
from contract_cases import Batched, Named, SelfSplitting, Tuples, names_collate
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler
from torch.utils.data.distributed import DistributedSampler

from labkit.workers.loader_factory import make_loader

START_METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]
# Spawned workers take seconds to start: every case runs with fork, and the cases a spawn could break with spawn.
SETUPS = [(0, None)] + [(2, m) for m in START_METHODS]


def _loaders(dataset, workers, method, **kwargs):
    """The same arguments, once to torch's DataLoader and once to make_loader."""
    if workers:
        kwargs.update(multiprocessing_context=method, persistent_workers=False)
    kwargs.setdefault("shuffle", False)
    return DataLoader(dataset, num_workers=workers, **kwargs), make_loader(dataset, num_workers=workers, **kwargs)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _assert_same(torch_loader, labkit_loader):
    ours, theirs = list(labkit_loader), list(torch_loader)
    assert len(labkit_loader) == len(torch_loader) == len(theirs)
    assert _same(ours, theirs), f"make_loader gave {ours[:1]}, DataLoader {theirs[:1]}"


@pytest.mark.parametrize("workers, method", SETUPS)
@pytest.mark.parametrize("drop_last", [False, True])
def test_dicts_built_from_the_index_in_order(workers, method, drop_last):
    theirs, ours = _loaders(Named(), workers, method, batch_size=4, drop_last=drop_last)
    _assert_same(theirs, ours)
    assert next(iter(ours))["name"] == ["s0", "s1", "s2", "s3"] and next(iter(ours))["type"] == ["int"] * 4


@pytest.mark.parametrize("workers, method", SETUPS)
def test_tuples_of_tensors_numpy_arrays_and_strings(workers, method):
    _assert_same(*_loaders(Tuples(), workers, method, batch_size=4))


@pytest.mark.parametrize("workers, method", SETUPS)
def test_a_dataset_s_own_getitems_gets_a_plain_list(workers, method):
    _assert_same(*_loaders(Batched(), workers, method, batch_size=3))


@pytest.mark.parametrize("workers, method", SETUPS)
def test_a_batch_sampler_and_a_custom_collate_fn(workers, method):
    batches = BatchSampler(SequentialSampler(range(10)), 3, drop_last=False)
    theirs, ours = _loaders(Named(), workers, method, batch_sampler=batches, collate_fn=names_collate)
    _assert_same(theirs, ours)
    assert next(iter(ours)) == ["s0|file-000|0|int", "s1|file-001|1|int", "s2|file-002|2|int"]


@pytest.mark.parametrize("workers, method", SETUPS)
def test_no_batching(workers, method):
    _assert_same(*_loaders(Named(4), workers, method, batch_size=None))


@pytest.mark.parametrize("workers, method", SETUPS)
def test_an_iterable_dataset_that_splits_itself_by_worker(workers, method):
    theirs, ours = _loaders(SelfSplitting(), workers, method, batch_size=2, shuffle=None)
    assert sorted(torch.cat(list(ours)).tolist()) == list(range(12))
    assert _same(list(ours), list(theirs))


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_samplers_given_in_with_set_epoch(workers):
    dataset = Named(12)
    for make in (
        lambda: RandomSampler(dataset, generator=torch.Generator().manual_seed(4)),
        lambda: DistributedSampler(dataset, num_replicas=2, rank=1, seed=3),
    ):
        theirs_sampler, ours_sampler = make(), make()
        theirs = DataLoader(dataset, batch_size=4, sampler=theirs_sampler, num_workers=workers)
        ours = make_loader(dataset, batch_size=4, sampler=ours_sampler, num_workers=workers)
        for epoch in range(2):
            for sampler in (theirs_sampler, ours_sampler):
                if hasattr(sampler, "set_epoch"):
                    sampler.set_epoch(epoch)
            _assert_same(theirs, ours)


def test_a_generator_or_torch_manual_seed_makes_the_shuffle_repeatable():
    def order(**kwargs):
        return [b["y"].tolist() for b in make_loader(Named(12), batch_size=4, num_workers=0, **kwargs)]

    assert order(generator=torch.Generator().manual_seed(7)) == order(generator=torch.Generator().manual_seed(7))
    torch.manual_seed(5)
    first = order()
    torch.manual_seed(5)
    assert order() == first and sorted(sum(first, [])) == list(range(12))
    assert order(generator=torch.Generator().manual_seed(8)) != order(generator=torch.Generator().manual_seed(9))


ATTRIBUTES = (
    "batch_size",
    "drop_last",
    "num_workers",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "timeout",
    "multiprocessing_context",
    "generator",
    "worker_init_fn",
)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(batch_size=4, num_workers=0),
        dict(
            batch_size=5,
            drop_last=True,
            num_workers=2,
            prefetch_factor=3,
            persistent_workers=True,
            timeout=30,
            multiprocessing_context="spawn",
            generator=torch.Generator(),
        ),
        dict(batch_size=None, num_workers=0),
    ],
)
def test_the_attributes_trainers_read_are_a_dataloader_s(kwargs):
    dataset, sampler = Named(), SequentialSampler(range(10))
    theirs = DataLoader(dataset, sampler=sampler, **kwargs)
    ours = make_loader(dataset, sampler=sampler, pin_memory=False, **kwargs)
    for name in ATTRIBUTES:
        a, b = getattr(ours, name), getattr(theirs, name)
        if name == "multiprocessing_context" and a is not None:
            a, b = a.get_start_method(), b.get_start_method()
        assert a == b, f"{name}: make_loader {a!r}, DataLoader {b!r}"
    assert ours.dataset is dataset and ours.sampler is sampler and ours.collate_fn is theirs.collate_fn
    if kwargs["batch_size"] is None:
        assert ours.batch_sampler is theirs.batch_sampler is None
    else:
        assert type(ours.batch_sampler) is BatchSampler and ours.batch_sampler.sampler is sampler
        assert list(ours.batch_sampler) == list(theirs.batch_sampler)


def test_an_iterable_dataset_s_attributes_are_a_dataloader_s():
    ours, theirs = make_loader(SelfSplitting(), batch_size=5, num_workers=0), DataLoader(SelfSplitting(), batch_size=5)
    assert (ours.batch_size, ours.drop_last, type(ours.sampler)) == (5, False, type(theirs.sampler))
    assert type(ours.batch_sampler) is type(theirs.batch_sampler) and ours.batch_sampler.batch_size == 5


def test_a_batch_sampler_s_attributes_are_a_dataloader_s():
    batches = BatchSampler(SequentialSampler(range(10)), 3, drop_last=False)
    ours, theirs = (
        make_loader(Named(), batch_sampler=batches, num_workers=0),
        DataLoader(Named(), batch_sampler=batches),
    )
    assert ours.batch_sampler is batches and (ours.batch_size, ours.drop_last) == (theirs.batch_size, theirs.drop_last)


def test_a_loader_rebuilt_from_its_attributes_reads_the_same(tmp_path):
    """What Lightning's and accelerate's re-creation do to insert a distributed sampler: a DataLoader built from
    the loader's attributes, with another sampler."""
    ours = make_loader(Named(12), batch_size=4, shuffle=False, num_workers=0)
    split = DistributedSampler(ours.dataset, num_replicas=2, rank=0, shuffle=False)
    rebuilt = DataLoader(
        ours.dataset,
        batch_size=ours.batch_size,
        sampler=split,
        num_workers=ours.num_workers,
        collate_fn=ours.collate_fn,
        drop_last=ours.drop_last,
        pin_memory=ours.pin_memory,
    )
    assert [b["y"].tolist() for b in rebuilt] == [[0, 2, 4, 6], [8, 10]]
