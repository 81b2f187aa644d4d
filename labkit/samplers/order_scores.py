"""Order scores: how random a read order is and how local its reads are, and the orders scored beside the samplers.

* the scores: `batch_class_entropy` (class mix per batch), `mean_displacement` (how far indices move),
  `pages_per_batch` (distinct file regions a batch reads), and all three at once as `OrderScores` via
  `score_order`;
* orders that are scored but are not samplers of the kit: `shuffle_buffer_order` (a streaming shuffle buffer,
  as tf.data or WebDataset) and `page_buffer_order` (FFCV's QUASI_RANDOM page buffer);
* the block-size sweep: `sweep_block_sizes` scores `BlockShuffleSampler` orders over `block_sizes`, beside
  `RandomSampler` (most mixed, reads everywhere) and `SequentialSampler` (reads in file order), as a
  `Tradeoff` that `plot_tradeoff` draws.

Notebook 02's trade-off plot and the README's picture of it both come from here, so the numbers a
learner reads and the ones the README shows are computed the same way. The samplers themselves are in
`labkit.samplers.resumable`, which imports nothing from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import torch

from labkit.core.errors import LabkitValueError
from labkit.core.plotting import pyplot
from labkit.samplers.block_shuffle import BlockShuffleSampler


# -- orders that are scored, not samplers --------------------------------------------------------------

def shuffle_buffer_order(sequence: Sequence[int], buffer_size: int, rng: np.random.Generator) -> np.ndarray:
    """The order a streaming shuffle buffer (tf.data, WebDataset, FFCV's page buffer) produces."""
    out: List[int] = []
    buffer: List[int] = []
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


def pages_per_batch(order: Sequence[int], offsets: Sequence[int], lengths: Sequence[int], batch_size: int,
                    page_size: int = 1 << 20) -> float:
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


def score_order(order: Sequence[int], labels: Sequence[int], offsets: Sequence[int], lengths: Sequence[int],
                batch_size: int, page_size: int = 1 << 20) -> OrderScores:
    """The three scores above for one order, so an order's randomness and locality are read side by side."""
    return OrderScores(batch_class_entropy(order, labels, batch_size), mean_displacement(order),
                       pages_per_batch(order, offsets, lengths, batch_size, page_size))


# -- the block-size sweep ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tradeoff:
    """The scores of each block size (at one shuffle ``window``), and of a random and a sequential order."""

    batch_size: int
    page_size: int
    blocks: Dict[int, OrderScores]
    random: OrderScores
    sequential: OrderScores
    window: int = 1


def block_sizes(n: int) -> list:
    """1, 2, 4, … up to ``n`` (the whole set): the block sizes the sweep tries."""
    return sorted({min(2**k, n) for k in range(n.bit_length() + 1)})


def sweep_block_sizes(labels: Sequence[int], offsets: Sequence[int], lengths: Sequence[int], batch_size: int,
                      page_size: int = 1 << 20, seed: int = 0, window: int = 1) -> Tradeoff:
    """`score_order` of epoch 0 of a `BlockShuffleSampler` (with ``window``) for every block size of
    `block_sizes`, and of a seeded `RandomSampler` order and the file order, on a data set stored as
    ``offsets``/``lengths`` (a pack's index) with classes ``labels``."""
    n = len(labels)
    if n == 0:
        raise LabkitValueError("no samples to order: the pack's index is empty")

    def scores(order: Sequence[int]) -> OrderScores:
        return score_order(order, labels, offsets, lengths, batch_size, page_size)

    blocks = {b: scores(BlockShuffleSampler(n, block_size=b, window=window, seed=seed).order(0))
              for b in block_sizes(n)}
    shuffled = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()  # RandomSampler's order
    return Tradeoff(batch_size, page_size, blocks, scores(shuffled), scores(list(range(n))), window)


def _nearby_labels(points: Dict[int, OrderScores], closeness: float = 0.03) -> Dict[Tuple[float, float], List[str]]:
    """Block sizes whose points lie within ``closeness`` of the axes' ranges of each other, as one label: both ends
    of the sweep (block size 1 and the whole set) are a full shuffle and would print on top of each other."""
    xs = [s.pages_per_batch for s in points.values()]
    ys = [s.class_entropy for s in points.values()]
    x_range, y_range = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    groups: Dict[Tuple[float, float], List[str]] = {}
    for b, s in points.items():
        near = next((xy for xy in groups if abs(xy[0] - s.pages_per_batch) <= closeness * x_range
                     and abs(xy[1] - s.class_entropy) <= closeness * y_range), None)
        groups.setdefault(near or (s.pages_per_batch, s.class_entropy), []).append(str(b))
    return groups


def plot_tradeoff(tradeoff: Tradeoff, ax: Any = None) -> Any:
    """Class entropy per batch against pages touched per batch: one point per block size (labelled),
    the random and sequential orders as markers. Returns the axes."""
    plt = pyplot()

    ax = ax or plt.subplots(figsize=(6.5, 3.6), dpi=80)[1]
    points = tradeoff.blocks
    ax.plot([s.pages_per_batch for s in points.values()], [s.class_entropy for s in points.values()], "o-",
            color="C0", label=f"BlockShuffleSampler, window={tradeoff.window}")
    for (x, y), sizes in _nearby_labels(points).items():
        ax.annotate(", ".join(sizes), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.plot(tradeoff.random.pages_per_batch, tradeoff.random.class_entropy, "s", color="C3", label="RandomSampler")
    ax.plot(tradeoff.sequential.pages_per_batch, tradeoff.sequential.class_entropy, "^", color="C2",
            label="SequentialSampler")
    page = f"{tradeoff.page_size >> 20} MiB" if tradeoff.page_size >= 1 << 20 else f"{tradeoff.page_size} B"
    ax.set_xlabel(f"pages of {page} touched per batch of {tradeoff.batch_size}")
    ax.set_ylabel("class entropy per batch (0-1)")
    ax.set_title("Randomness against locality (labels: block_size)")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return ax
