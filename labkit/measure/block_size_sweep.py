"""The block-size sweep: how random and how local `BlockShuffleSampler`'s order is at each block size, beside a
random and a sequential order, and the plot of that trade-off.

`sweep_block_sizes` scores epoch 0 of a `BlockShuffleSampler` over `block_sizes` with
`labkit.samplers.order_scores.score_order`, beside `RandomSampler` (most mixed, reads everywhere) and
`SequentialSampler` (reads in file order), as a `Tradeoff` that `plot_tradeoff` draws. Notebook 02's trade-off plot
and the README's picture of it both come from here, so the numbers a learner reads and the ones the README shows
are computed the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.plotting import pyplot
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.order_scores import OrderScores, score_order


@dataclass(frozen=True)
class Tradeoff:
    """The scores of each block size (at one shuffle ``window``), and of a random and a sequential order."""

    batch_size: int
    page_size: int
    blocks: dict[int, OrderScores]
    random: OrderScores
    sequential: OrderScores
    window: int = 1


def block_sizes(n: int) -> list:
    """1, 2, 4, … up to ``n`` (the whole set): the block sizes the sweep tries."""
    return sorted({min(2**k, n) for k in range(n.bit_length() + 1)})


def sweep_block_sizes(
    labels: Sequence[int],
    offsets: Sequence[int],
    lengths: Sequence[int],
    batch_size: int,
    page_size: int = 1 << 20,
    seed: int = 0,
    window: int = 1,
) -> Tradeoff:
    """`score_order` of epoch 0 of a `BlockShuffleSampler` (with ``window``) for every block size of
    `block_sizes`, and of a seeded `RandomSampler` order and the file order, on a data set stored as
    ``offsets``/``lengths`` (a pack's index) with classes ``labels``."""
    n = len(labels)
    if n == 0:
        raise LabkitValueError("no samples to order: the pack's index is empty")

    def scores(order: Sequence[int]) -> OrderScores:
        return score_order(order, labels, offsets, lengths, batch_size, page_size)

    blocks = {
        b: scores(BlockShuffleSampler(n, block_size=b, window=window, seed=seed).order(0)) for b in block_sizes(n)
    }
    shuffled = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()  # RandomSampler's order
    return Tradeoff(batch_size, page_size, blocks, scores(shuffled), scores(list(range(n))), window)


def _nearby_labels(points: dict[int, OrderScores], closeness: float = 0.03) -> dict[tuple[float, float], list[str]]:
    """Block sizes whose points lie within ``closeness`` of the axes' ranges of each other, as one label: both ends
    of the sweep (block size 1 and the whole set) are a full shuffle and would print on top of each other."""
    xs = [s.pages_per_batch for s in points.values()]
    ys = [s.class_entropy for s in points.values()]
    x_range, y_range = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    groups: dict[tuple[float, float], list[str]] = {}
    for b, s in points.items():
        near = next(
            (
                xy
                for xy in groups
                if abs(xy[0] - s.pages_per_batch) <= closeness * x_range
                and abs(xy[1] - s.class_entropy) <= closeness * y_range
            ),
            None,
        )
        groups.setdefault(near or (s.pages_per_batch, s.class_entropy), []).append(str(b))
    return groups


def plot_tradeoff(tradeoff: Tradeoff, ax: Any = None) -> Any:
    """Class entropy per batch against pages touched per batch: one point per block size (labelled),
    the random and sequential orders as markers. Returns the axes."""
    plt = pyplot()

    ax = ax or plt.subplots(figsize=(6.5, 3.6), dpi=80)[1]
    points = tradeoff.blocks
    ax.plot(
        [s.pages_per_batch for s in points.values()],
        [s.class_entropy for s in points.values()],
        "o-",
        color="C0",
        label=f"BlockShuffleSampler, window={tradeoff.window}",
    )
    for (x, y), sizes in _nearby_labels(points).items():
        ax.annotate(", ".join(sizes), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.plot(tradeoff.random.pages_per_batch, tradeoff.random.class_entropy, "s", color="C3", label="RandomSampler")
    ax.plot(
        tradeoff.sequential.pages_per_batch,
        tradeoff.sequential.class_entropy,
        "^",
        color="C2",
        label="SequentialSampler",
    )
    page = f"{tradeoff.page_size >> 20} MiB" if tradeoff.page_size >= 1 << 20 else f"{tradeoff.page_size} B"
    ax.set_xlabel(f"pages of {page} touched per batch of {tradeoff.batch_size}")
    ax.set_ylabel("class entropy per batch (0-1)")
    ax.set_title("Randomness against locality (labels: block_size)")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return ax
