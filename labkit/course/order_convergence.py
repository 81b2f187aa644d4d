"""Does the order samples are read in change how a model learns? A small training run per order, measured.

The article says the sampler "directly affects the training's convergence" (section 2.2). Notebook 02 trains the same
tiny model on the same images in several orders — sequential by class (how a pack of an ImageFolder is stored),
random, block shuffles of a few sizes — and reads loss and held-out accuracy after each epoch. The images are the
course's photo-like set, downscaled once to ``side``×``side`` and kept in memory, so a run takes well under a
second on one core: the order is the only thing that differs between runs of one seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.functional import cross_entropy, interpolate
from torch.utils.data import BatchSampler, Sampler

from labkit.core.errors import LabkitValueError
from labkit.device.transfer import normalize_uint8
from labkit.storage.pack_format import PackReader

#: An order: (number of training samples, seed) -> the sampler that reads them, epoch after epoch.
OrderMaker = Callable[[int, int], Sampler]


@dataclass
class SmallImages:
    """A data set downscaled once, split into a training part (kept in stored order) and a held-out part."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: int


def small_images(decoded_pack: str, side: int = 16, test_share: float = 0.2, seed: int = 0) -> SmallImages:
    """The images of a decoded pack at ``side``×``side``, normalised; every class split ``test_share`` held out,
    the training part left in the pack's order (class by class, as an ImageFolder is packed)."""
    if not 0 < test_share < 1:
        raise LabkitValueError(f"test_share={test_share}: a share of the images, between 0 and 1")
    if side < 4:
        raise LabkitValueError(f"side={side}: at least 4 pixels, what the model pools to")
    reader = PackReader(decoded_pack, check_crc=False)
    images = torch.from_numpy(reader.read_decoded(range(len(reader))))
    small = interpolate(normalize_uint8(images), size=(side, side), mode="area")
    labels = torch.as_tensor(reader.labels)
    held = np.zeros(len(labels), dtype=bool)
    rng = np.random.default_rng(seed)
    for c in np.unique(reader.labels):
        members = np.flatnonzero(reader.labels == c)
        held[rng.choice(members, size=max(1, round(test_share * len(members))), replace=False)] = True
    train = torch.from_numpy(np.flatnonzero(~held))
    test = torch.from_numpy(np.flatnonzero(held))
    return SmallImages(small[train], labels[train], small[test], labels[test], int(labels.max()) + 1)


@dataclass
class OrderRun:
    """One training run: the order's name, the seed, and after each epoch the mean training loss and the
    held-out accuracy."""

    order: str
    seed: int
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


def _model(data: SmallImages, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(data.train_x.shape[1], 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(16 * 16, data.classes),
    )


def train_in_order(
    data: SmallImages,
    name: str,
    make_order: OrderMaker,
    seed: int,
    epochs: int = 4,
    batch_size: int = 32,
    lr: float = 0.02,
) -> OrderRun:
    """Train a tiny CNN (the same initial weights for every order of one ``seed``) for ``epochs`` epochs, its batches
    drawn by the sampler ``make_order(n, seed)`` makes; SGD with momentum, one thread."""
    if epochs < 1 or batch_size < 1:
        raise LabkitValueError(f"epochs={epochs}, batch_size={batch_size}: each at least 1")
    model = _model(data, seed)
    optimiser = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    batches = BatchSampler(make_order(len(data.train_y), seed), batch_size, drop_last=False)
    run = OrderRun(name, seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(epochs):
            model.train()
            losses = []
            for indices in batches:
                loss = cross_entropy(model(data.train_x[indices]), data.train_y[indices])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                losses.append(loss.item())
            model.eval()
            with torch.no_grad():
                predicted = model(data.test_x).argmax(1)
            run.loss.append(float(np.mean(losses)))
            run.accuracy.append(float((predicted == data.test_y).float().mean()))
    finally:
        torch.set_num_threads(threads)
    return run


def compare_orders(
    data: SmallImages,
    orders: dict[str, OrderMaker],
    seeds: Sequence[int] = (0, 1, 2),
    epochs: int = 4,
    batch_size: int = 32,
) -> dict[str, list[OrderRun]]:
    """Every order trained once per seed; the same seed gives every order the same initial weights."""
    if len(seeds) < 1:
        raise LabkitValueError("compare_orders needs at least one seed")
    return {
        name: [train_in_order(data, name, make, seed, epochs, batch_size) for seed in seeds]
        for name, make in orders.items()
    }


def final(runs: Sequence[OrderRun], what: str = "accuracy") -> list[float]:
    """Each run's last-epoch ``what`` ("accuracy" or "loss"): one value per seed, the passes a verdict weighs."""
    if what not in ("accuracy", "loss"):
        raise LabkitValueError(f"what={what!r}: 'accuracy' or 'loss'")
    return [getattr(r, what)[-1] for r in runs]


def plot_orders(results: dict[str, list[OrderRun]], axes: tuple[Any, Any]) -> None:
    """Loss (left) and held-out accuracy (right) per epoch: the median over seeds as a line, their range shaded,
    one colour per order (in the legend)."""
    loss_ax, acc_ax = axes
    epochs = np.arange(1, 1 + max(len(runs[0].loss) for runs in results.values()))
    for k, (name, runs) in enumerate(results.items()):
        for ax, what in ((loss_ax, "loss"), (acc_ax, "accuracy")):
            values = np.array([getattr(r, what) for r in runs])
            ax.plot(epochs[: values.shape[1]], np.median(values, axis=0), "o-", color=f"C{k}", label=name)
            ax.fill_between(
                epochs[: values.shape[1]], values.min(axis=0), values.max(axis=0), color=f"C{k}", alpha=0.15
            )
    loss_ax.set_ylabel("training loss (mean over the epoch)")
    acc_ax.set_ylabel("held-out accuracy")
    acc_ax.set_ylim(0, 1)
    for ax in (loss_ax, acc_ax):
        ax.set_xlabel("epoch")
        ax.set_xticks(epochs)
        ax.set_ylim(bottom=0)
    acc_ax.legend(fontsize="small")
