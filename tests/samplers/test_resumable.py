import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader, Dataset

from labkit.samplers.order_scores import batch_class_entropy, mean_displacement, page_buffer_order, pages_per_batch
from labkit.samplers.resumable import (BlockShuffleSampler, ClassBalancedSampler, DistributedBlockSampler,
                                       GroupedBatchSampler, RandomOffsetSequentialSampler, block_shuffle_order)


class Indices(Dataset):
    """Returns its index: what a loader delivers is then exactly the order it read."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def _samplers(n=50):
    labels = np.arange(n) % 5
    return {
        "block": lambda: BlockShuffleSampler(n, block_size=8, window=2, seed=3),
        "distributed": lambda: DistributedBlockSampler(n, num_replicas=2, rank=1, seed=3, block_size=8),
        "balanced": lambda: ClassBalancedSampler(labels, seed=3),
        "offset": lambda: RandomOffsetSequentialSampler(n, seed=3),
    }


@pytest.mark.parametrize("name", list(_samplers()))
def test_order_changes_each_epoch_without_set_epoch_and_repeats_with_it(name):
    s = _samplers()[name]()
    first, second = list(s), list(s)
    assert first != second and len(first) == len(s)
    s.set_epoch(0)
    assert list(s) == first


def test_block_shuffle_is_a_permutation_with_windowed_locality():
    s = BlockShuffleSampler(1000, block_size=50, window=2, seed=0)
    order = list(s)
    assert sorted(order) == list(range(1000))
    for start in range(0, 1000, 100):  # each run of 100 comes from 2 blocks of 50
        assert len({i // 50 for i in order[start : start + 100]}) == 2


def test_locality_against_randomness_metrics_rank_the_orders():
    n, batch = 4096, 64
    labels = np.arange(n) // (n // 8)  # sorted by class, as a packed ImageFolder is
    offsets, lengths = np.arange(n) * 1000, np.full(n, 1000)
    rng = np.random.default_rng(0)
    orders = {"sequential": np.arange(n), "random": rng.permutation(n),
              "block": block_shuffle_order(n, 64, 8, rng), "page": page_buffer_order(n, 64, 8, seed=0)}
    pages = {k: pages_per_batch(o, offsets, lengths, batch, page_size=64_000) for k, o in orders.items()}
    entropy = {k: batch_class_entropy(o, labels, batch) for k, o in orders.items()}
    assert pages["sequential"] <= 2 and 8 <= pages["block"] <= 16 < 30 < pages["random"] <= 64
    assert entropy["sequential"] < 0.1 < entropy["random"] and entropy["block"] < entropy["random"]
    assert mean_displacement(orders["sequential"]) == 0 and 0.3 < mean_displacement(orders["random"]) < 0.37
    assert sorted(orders["page"].tolist()) == list(range(n))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), replicas=st.integers(1, 6), epochs=st.integers(1, 3), drop_last=st.booleans(),
       block=st.integers(1, 40), window=st.integers(1, 5))
def test_distributed_ranks_cover_the_epoch_exactly_once(n, replicas, epochs, drop_last, block, window):
    samplers = [DistributedBlockSampler(n, replicas, r, seed=1, drop_last=drop_last, block_size=block,
                                        window=window) for r in range(replicas)]
    for _ in range(epochs):
        parts = [list(s) for s in samplers]
        assert len({len(p) for p in parts}) == 1  # equal share per rank
        seen = list(itertools.chain(*parts))
        if drop_last:
            assert len(seen) == len(set(seen)) == n - n % replicas
        else:
            assert set(seen) == set(range(n)) and len(seen) == -(-n // replicas) * replicas
            assert len(seen) - len(set(seen)) == len(seen) - n  # only the padding repeats


def test_class_balanced_draws_rare_classes_as_often():
    labels = np.array([0] * 950 + [1] * 50)
    drawn = labels[list(ClassBalancedSampler(labels, num_samples=4000, seed=0))]
    assert 0.45 < drawn.mean() < 0.55


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


def test_random_offset_is_sequential_from_a_random_start():
    order = list(RandomOffsetSequentialSampler(10, seed=5))
    assert order == [(order[0] + k) % 10 for k in range(10)]


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
        return StatefulDataLoader(Indices(50), batch_size=4, num_workers=workers,
                                  sampler=BlockShuffleSampler(50, block_size=8, window=2, seed=9))

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


def test_block_layout_for_batches_reads_each_batch_from_a_few_blocks():
    from labkit.samplers.resumable import BlockShuffleSampler

    sampler = BlockShuffleSampler.for_batches(2000, 64, seed=1)
    assert (sampler.block_size, sampler.window) == (125, 4)
    assert BlockShuffleSampler.for_batches(100, 64).block_size == 64  # never a block smaller than a batch
    order = list(sampler)
    assert sorted(order) == list(range(2000))
    blocks = [len({i // 125 for i in order[k:k + 64]}) for k in range(0, 2000, 64)]
    assert max(blocks) <= 8 and sorted(blocks)[len(blocks) // 2] <= 4  # a window of 4, or two at its edge


def test_score_order_reads_randomness_and_locality_side_by_side():
    from labkit.samplers.order_scores import score_order

    n, batch = 256, 16
    labels, offsets, lengths = np.arange(n) // 32, np.arange(n) * 1000, np.full(n, 1000)
    sequential = score_order(np.arange(n), labels, offsets, lengths, batch, page_size=16_000)
    shuffled = score_order(np.random.default_rng(0).permutation(n), labels, offsets, lengths, batch,
                           page_size=16_000)
    assert sequential.displacement == 0 and sequential.class_entropy == 0
    assert sequential.pages_per_batch == pytest.approx(1, abs=0.1)
    assert shuffled.class_entropy > 0.5 and shuffled.pages_per_batch > 8 * sequential.pages_per_batch
