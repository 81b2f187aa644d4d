import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.samplers.block_shuffle import BlockShuffleSampler, DistributedBlockSampler, block_shuffle_order
from labkit.samplers.order_scores import batch_class_entropy, mean_displacement, page_buffer_order, pages_per_batch


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
    orders = {
        "sequential": np.arange(n),
        "random": rng.permutation(n),
        "block": block_shuffle_order(n, 64, 8, rng),
        "page": page_buffer_order(n, 64, 8, seed=0),
    }
    pages = {k: pages_per_batch(o, offsets, lengths, batch, page_size=64_000) for k, o in orders.items()}
    entropy = {k: batch_class_entropy(o, labels, batch) for k, o in orders.items()}
    assert pages["sequential"] <= 2 and 8 <= pages["block"] <= 16 < 30 < pages["random"] <= 64
    assert entropy["sequential"] < 0.1 < entropy["random"] and entropy["block"] < entropy["random"]
    assert mean_displacement(orders["sequential"]) == 0 and 0.3 < mean_displacement(orders["random"]) < 0.37
    assert sorted(orders["page"].tolist()) == list(range(n))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 300),
    replicas=st.integers(1, 6),
    epochs=st.integers(1, 3),
    drop_last=st.booleans(),
    block=st.integers(1, 40),
    window=st.integers(1, 5),
)
def test_distributed_ranks_cover_the_epoch_exactly_once(n, replicas, epochs, drop_last, block, window):
    samplers = [
        DistributedBlockSampler(n, replicas, r, seed=1, drop_last=drop_last, block_size=block, window=window)
        for r in range(replicas)
    ]
    for _ in range(epochs):
        parts = [list(s) for s in samplers]
        assert len({len(p) for p in parts}) == 1  # equal share per rank
        seen = list(itertools.chain(*parts))
        if drop_last:
            assert len(seen) == len(set(seen)) == n - n % replicas
        else:
            assert set(seen) == set(range(n)) and len(seen) == -(-n // replicas) * replicas
            assert len(seen) - len(set(seen)) == len(seen) - n  # only the padding repeats


def test_block_layout_for_batches_reads_each_batch_from_a_few_blocks():
    from labkit.samplers.block_shuffle import BlockShuffleSampler

    sampler = BlockShuffleSampler.for_batches(2000, 64, seed=1)
    assert (sampler.block_size, sampler.window) == (125, 4)
    assert BlockShuffleSampler.for_batches(100, 64).block_size == 64  # never a block smaller than a batch
    order = list(sampler)
    assert sorted(order) == list(range(2000))
    blocks = [len({i // 125 for i in order[k : k + 64]}) for k in range(0, 2000, 64)]
    assert max(blocks) <= 8 and sorted(blocks)[len(blocks) // 2] <= 4  # a window of 4, or two at its edge
