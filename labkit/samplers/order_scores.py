"""Order scores: how random a read order is and how local its reads are, and the orders scored beside the samplers.

* the scores: `batch_class_entropy` (class mix per batch), `mean_displacement` (how far indices move),
  `pages_per_batch` (distinct file regions a batch reads), and all three at once as `OrderScores` via
  `score_order`;
* orders that are scored but are not samplers of the kit: `shuffle_buffer_order` (a streaming shuffle buffer,
  as tf.data or WebDataset) and `page_buffer_order` (FFCV's QUASI_RANDOM page buffer).

The block-size sweep over these scores, and its plot, are a measurement: `labkit.measure.block_size_sweep`. The
samplers themselves are in `labkit.samplers.resumable`, which imports nothing from here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# -- orders that are scored, not samplers --------------------------------------------------------------


def shuffle_buffer_order(sequence: Sequence[int], buffer_size: int, rng: np.random.Generator) -> np.ndarray:
    """The order a streaming shuffle buffer (tf.data, WebDataset, FFCV's page buffer) produces."""
    out: list[int] = []
    buffer: list[int] = []
    for item in sequence:
        if len(buffer) < buffer_size:
            buffer.append(int(item))
            continue
        k = int(rng.integers(buffer_size))
        out.append(buffer[k])
        buffer[k] = int(item)
    rng.shuffle(buffer)
    return np.asarray(out + buffer, dtype=np.int64)


def page_buffer_order(n: int, page_size: int, buffer_pages: int, seed: int = 0) -> np.ndarray:
    """FFCV QUASI_RANDOM-style order: pages in random order through a buffer of ``buffer_pages`` pages."""
    rng = np.random.default_rng(seed)
    pages = [np.arange(s, min(s + page_size, n)) for s in range(0, n, page_size)]
    sequence = np.concatenate([pages[p] for p in rng.permutation(len(pages))]) if pages else np.arange(0)
    return shuffle_buffer_order(sequence, max(1, buffer_pages * page_size), rng)


# -- the scores: how random an order is, how local its reads are ----------------------------------------


def batch_class_entropy(order: Sequence[int], labels: Sequence[int], batch_size: int) -> float:
    """Mean entropy of the class mix of each batch, as a fraction of the most it could be (1.0)."""
    order, labels = np.asarray(order), np.asarray(labels)
    n_classes = int(labels.max()) + 1
    best = math.log2(min(n_classes, batch_size))
    if best == 0:
        return 1.0
    values = []
    for s in range(0, len(order) - batch_size + 1, batch_size):
        p = np.bincount(labels[order[s : s + batch_size]], minlength=n_classes) / batch_size
        p = p[p > 0]
        values.append(float(-(p * np.log2(p)).sum()) / best)
    return float(np.mean(values)) if values else 0.0


def mean_displacement(order: Sequence[int]) -> float:
    """Mean distance of each index from where sequential order would put it, over n (random ≈ 1/3)."""
    order = np.asarray(order)
    return float(np.abs(order - np.arange(len(order))).mean() / max(1, len(order)))


def pages_per_batch(
    order: Sequence[int], offsets: Sequence[int], lengths: Sequence[int], batch_size: int, page_size: int = 1 << 20
) -> float:
    """Mean number of distinct ``page_size`` regions of the file each batch's reads touch.

    Sequential reads touch about ``batch bytes / page_size`` pages; a full shuffle touches
    one page per sample; a block shuffle with window w touches about w. Each page is a
    seek plus a read-ahead on disk, or a TLB and cache miss in the page cache.
    """
    order, offsets, lengths = np.asarray(order), np.asarray(offsets), np.asarray(lengths)
    counts = []
    for s in range(0, len(order), batch_size):
        batch = order[s : s + batch_size]
        first, last = offsets[batch] // page_size, (offsets[batch] + np.maximum(lengths[batch], 1) - 1) // page_size
        pages = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)]))
        counts.append(len(pages))
    return float(np.mean(counts)) if counts else 0.0


@dataclass(frozen=True)
class OrderScores:
    """How random an order is (class mix per batch, displacement) and how local its reads are (pages)."""

    class_entropy: float
    displacement: float
    pages_per_batch: float


def score_order(
    order: Sequence[int],
    labels: Sequence[int],
    offsets: Sequence[int],
    lengths: Sequence[int],
    batch_size: int,
    page_size: int = 1 << 20,
) -> OrderScores:
    """The three scores above for one order, so an order's randomness and locality are read side by side."""
    return OrderScores(
        batch_class_entropy(order, labels, batch_size),
        mean_displacement(order),
        pages_per_batch(order, offsets, lengths, batch_size, page_size),
    )
