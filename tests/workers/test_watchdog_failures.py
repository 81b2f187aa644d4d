"""The deliberately broken pieces fail the way they say, and the watchdog names them."""

import multiprocessing

import pytest
import torch

from labkit.collate.batching import stack_uint8
from labkit.course.pitfalls import (
    HoardingCollate,
    IndexedDataset,
    KilledAt,
    LockedDataset,
    SlowAt,
    SplitInInit,
    StuckAt,
    hold_lock,
)
from labkit.diagnose.bottleneck import find_slow_samples
from labkit.workers.watchdog import LoaderHangError, LoaderWorkerError, watched_loader


class Numbers:
    def __init__(self, n=12):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((2,), i, dtype=torch.uint8), i % 3

    def sample_path(self, i):
        return f"numbers/{i}.bin"


def test_wrappers_pass_samples_and_attributes_through():
    for wrapped in (
        StuckAt(Numbers(), [99]),
        KilledAt(Numbers(), [99]),
        SlowAt(Numbers(), {99: 1}),
        LockedDataset(Numbers()),
    ):
        assert len(wrapped) == 12 and wrapped[5][1] == 2 and wrapped.sample_path(3) == "numbers/3.bin"
        assert not hasattr(wrapped, "__getitems__")  # the loader must call our __getitem__
    index, image, label = IndexedDataset(Numbers())[7]
    assert index == 7 and image.tolist() == [7, 7] and label == 1


@pytest.mark.timeout(60)
def test_stuck_sample_becomes_a_hang_error_naming_it(no_leaks):
    loader = watched_loader(StuckAt(Numbers(), [5]), timeout=2, batch_size=1, num_workers=2)
    with pytest.raises(LoaderHangError) as err:
        for _ in loader:
            pass
    assert "fetching samples [5]" in str(err.value) and "numbers/5.bin" in str(err.value)
    assert "wait_for_dead_mount" in str(err.value)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(60)
def test_killed_worker_becomes_a_worker_error(no_leaks):
    loader = watched_loader(KilledAt(Numbers(), [6]), timeout=20, batch_size=2, num_workers=2)
    with pytest.raises(LoaderWorkerError, match=r"exit code -9, killed by SIGKILL\), fetching samples \[6, 7\]"):
        for _ in loader:
            pass


def test_killed_at_refuses_to_kill_the_main_process():
    with pytest.raises(RuntimeError, match="num_workers >= 1"):
        KilledAt(Numbers(), [1])[1]


def test_slow_samples_are_the_slowest_found():
    report = find_slow_samples(SlowAt(Numbers(), {3: 0.15, 8: 0.1}), progress=False)
    assert [index for index, _, _ in report.slowest(2)] == [3, 8]
    assert report.slowest(1)[0][2] == "numbers/3.bin"


def test_hoarding_collate_keeps_every_batch():
    collate = HoardingCollate(stack_uint8)
    ds = Numbers()
    for start in range(0, 12, 4):
        images, labels = collate([ds[i] for i in range(start, start + 4)])
        assert images.shape == (4, 2) and labels.tolist() == [i % 3 for i in range(start, start + 4)]
    assert len(collate.kept) == 3


@pytest.mark.timeout(60)
def test_a_lock_held_at_fork_hangs_the_worker_and_forkserver_does_not():
    # (no no_leaks here: the forkserver keeps its own pipes open for the rest of the process, by design)
    holder = hold_lock(60)
    loader = watched_loader(
        LockedDataset(Numbers()), timeout=2, batch_size=4, num_workers=1, multiprocessing_context="fork"
    )
    with pytest.raises(LoaderHangError, match="acquire|__getitem__"):
        for _ in loader:
            pass
    loader = watched_loader(
        LockedDataset(Numbers()), timeout=20, batch_size=4, num_workers=1, multiprocessing_context="forkserver"
    )
    assert sum(len(labels) for _, labels in loader) == 12  # a fresh interpreter has its own, free lock
    assert holder.holding  # ...while this process's lock was still held
    holder.release()
    assert not holder.holding and LockedDataset(Numbers())[0][1] == 0
    assert multiprocessing.active_children() == []


def _one_epoch(dataset):
    return [int(x) for x in torch.utils.data.DataLoader(dataset, batch_size=None, shuffle=True)]


def test_a_split_seeded_globally_in_init_repeats_the_order_of_a_loader_rebuilt_each_epoch():
    rebuilt = [_one_epoch(SplitInInit(range(40), keep=24, seed=3)) for _ in range(2)]
    assert rebuilt[0] == rebuilt[1]
    assert sorted(rebuilt[0]) == SplitInInit(range(40), keep=24, seed=3).kept  # every kept sample, once
    local = [_one_epoch(SplitInInit(range(40), keep=24, seed=3, global_seed=False)) for _ in range(2)]
    assert local[0] != local[1] and sorted(local[0]) == sorted(local[1]) == sorted(rebuilt[0])
    once = SplitInInit(range(40), keep=24, seed=3)
    assert _one_epoch(once) != _one_epoch(once)  # built once, the global generator moves on between epochs


def test_a_split_refuses_to_keep_more_than_there_is():
    with pytest.raises(ValueError, match="between 1 and the dataset's 5"):
        SplitInInit(range(5), keep=6)
