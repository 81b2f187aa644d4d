"""The sampler trade-off: block sizes between the two ends, scored the way notebook 02 shows them."""

from __future__ import annotations

import dataclasses

import matplotlib
import numpy as np
import pytest
import torch
from torch.utils.data import RandomSampler

from labkit.measure.block_size_sweep import (
    block_sizes,
    plot_tradeoff,
    sweep_block_sizes,
)
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.order_scores import score_order

matplotlib.use("Agg")


def _class_by_class(n=64, classes=4, size=300_000):
    """A pack stored class by class, as the course's packs are: sequential reads are one class at a time."""
    labels = np.repeat(np.arange(classes), n // classes)
    lengths = np.full(n, size)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return labels, offsets, lengths


def test_block_sizes_run_from_one_to_the_whole_set():
    assert block_sizes(10) == [1, 2, 4, 8, 10]
    assert block_sizes(8) == [1, 2, 4, 8]


def test_the_ends_are_the_random_and_the_sequential_orders():
    labels, offsets, lengths = _class_by_class()
    t = sweep_block_sizes(labels, offsets, lengths, batch_size=8)
    random = list(RandomSampler(range(64), generator=torch.Generator().manual_seed(0)))
    assert t.random == score_order(random, labels, offsets, lengths, 8)
    assert t.sequential == score_order(list(range(64)), labels, offsets, lengths, 8)
    assert t.sequential.class_entropy == 0.0  # every batch of 8 lies inside one class of 16
    assert t.random.class_entropy > 0.5 and t.random.pages_per_batch > t.sequential.pages_per_batch


def test_a_block_of_one_class_reads_less_and_mixes_less_than_random():
    labels, offsets, lengths = _class_by_class()
    t = sweep_block_sizes(labels, offsets, lengths, batch_size=8)
    assert set(t.blocks) == set(block_sizes(64))
    eight = t.blocks[8]  # a batch is one block of one class
    assert eight.class_entropy == 0.0
    assert eight.pages_per_batch < t.random.pages_per_batch


def test_a_wider_window_scores_the_orders_that_window_gives():
    labels, offsets, lengths = _class_by_class()
    t = sweep_block_sizes(labels, offsets, lengths, batch_size=8, window=4)
    assert t.window == 4
    for b, scores in t.blocks.items():
        assert scores == score_order(
            BlockShuffleSampler(64, block_size=b, window=4, seed=0).order(0), labels, offsets, lengths, 8
        )
    assert t.blocks[8].class_entropy > sweep_block_sizes(labels, offsets, lengths, batch_size=8).blocks[8].class_entropy


def test_plot_has_a_point_per_block_size_and_both_ends():
    labels, offsets, lengths = _class_by_class()
    t = sweep_block_sizes(labels, offsets, lengths, batch_size=8)
    ax = plot_tradeoff(t)
    sweep_line, random_marker, sequential_marker = ax.get_lines()
    assert list(sweep_line.get_xdata()) == [s.pages_per_batch for s in t.blocks.values()]
    assert random_marker.get_label() == "RandomSampler" and sequential_marker.get_label() == "SequentialSampler"
    assert "batch of 8" in ax.get_xlabel()
    # Every block size is named once; the two ends (1 and the whole set, both a full shuffle) share a label when
    # their points coincide, instead of printing on top of each other.
    labels_shown = [text.get_text() for text in ax.texts]
    named = [size for text in labels_shown for size in text.split(", ")]
    assert sorted(map(int, named)) == sorted(t.blocks) and len(labels_shown) == len({tuple(a.xy) for a in ax.texts})
    both_ends_alike = dataclasses.replace(t, blocks={**t.blocks, 64: t.blocks[1]})
    shown = [text.get_text() for text in plot_tradeoff(both_ends_alike).texts]
    assert "1, 64" in shown and len(shown) == len(t.blocks) - 1


def test_an_empty_index_is_refused():
    with pytest.raises(ValueError, match="empty"):
        sweep_block_sizes([], [], [], batch_size=8)
