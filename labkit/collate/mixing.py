"""Mixing a batch: MixUp and CutMix, where the article puts augmentation (sections 2.3 and 5.4): in collate, with the
whole batch in view, or on the device after the copy (`MixUp`, which `labkit.device.transfer.DevicePrefetcher`
runs there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import get_worker_info

from labkit.collate.batching import Batch, stack_uint8
from labkit.core.errors import LabkitValueError
from labkit.core.host_buffers import HostBuffers


def one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(labels.long(), num_classes).to(torch.float32)


def draw_mix(batch_size: int, alpha: float, generator: torch.Generator) -> tuple[float, torch.Tensor]:
    """A mixing weight ``lam ~ Beta(alpha, alpha)`` and the partner permutation, as `mix_batch` draws them."""
    lam = float(np.random.default_rng(int(torch.randint(2**62, (1,), generator=generator))).beta(alpha, alpha))
    return lam, torch.randperm(batch_size, generator=generator)


def mixed_targets(labels: torch.Tensor, perm: torch.Tensor, lam: float, num_classes: int) -> torch.Tensor:
    """Soft labels of a mixed batch: ``lam·onehot(y) + (1−lam)·onehot(y[perm])``."""
    targets = one_hot(labels, num_classes)
    return targets * lam + targets[perm.to(targets.device)] * (1 - lam)


def mix_batch(
    images: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    mode: str = "mixup",
    alpha: float = 0.2,
    generator: torch.Generator | None = None,
    buffers: HostBuffers | None = None,
) -> Batch:
    """MixUp or CutMix a batch: images mixed with a shuffled copy, labels become mixed one-hots.

    Works on any device and keeps the image dtype: uint8 images are mixed in float and
    rounded back (at most half a grey level lost), so they can still cross processes as uint8.
    ``buffers``: where a float MixUp writes its result (reused CPU memory, `labkit.core.host_buffers`).
    The input is never modified.
    """
    if mode not in ("mixup", "cutmix"):
        raise LabkitValueError(f"mode must be 'mixup' or 'cutmix', got {mode!r}")
    if generator is None:
        generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,))))
    lam, perm = draw_mix(len(images), alpha, generator)
    perm = perm.to(images.device)
    if mode == "mixup":
        work = images.to(torch.float32) if not images.is_floating_point() else images
        partner = None if buffers is None else buffers.empty(work.shape, work.dtype, work.device)
        mixed = torch.index_select(work, 0, perm, out=partner).lerp_(work, lam)  # lam·x + (1−lam)·x[perm]
        if not images.is_floating_point():
            mixed = mixed.round_().clamp_(0, 255).to(images.dtype)
    else:
        h, w = images.shape[-2:]
        cut_h, cut_w = int(h * math.sqrt(1 - lam)), int(w * math.sqrt(1 - lam))
        cy, cx = (
            torch.randint(h, (1,), generator=generator).item(),
            torch.randint(w, (1,), generator=generator).item(),
        )
        y0, y1 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, h)
        x0, x1 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, w)
        mixed = images.clone()
        mixed[..., y0:y1, x0:x1] = images.index_select(0, perm)[..., y0:y1, x0:x1]
        lam = 1 - (y1 - y0) * (x1 - x0) / (h * w)
    return mixed, mixed_targets(labels.to(images.device), perm, lam, num_classes)


class MixUp:
    """MixUp of whole batches on the device: the ``mix`` to give `labkit.device.transfer.DevicePrefetcher`.

    Called as ``mixup(images, labels)`` it is `mix_batch` with its own seeded generator.
    The prefetcher recognises it and mixes uint8 batches while normalising them, in one
    pass (normalisation is affine, so mixing before or after it gives the same batch):
    on a 2-core CPU, 12–15 ms a 64×3×256×256 batch against 21–29 ms for normalising and then
    mixing into reused buffers. ``buffers``: where a float MixUp writes.
    """

    def __init__(self, num_classes: int, alpha: float = 0.2, seed: int = 0, buffers: HostBuffers | None = None) -> None:
        if alpha <= 0:
            raise LabkitValueError(f"MixUp alpha must be > 0, got {alpha}")
        self.num_classes, self.alpha, self.buffers = num_classes, alpha, buffers
        self.generator = torch.Generator().manual_seed(seed)

    def draw(self, batch_size: int) -> tuple[float, torch.Tensor]:
        """The next batch's weight and partner permutation."""
        return draw_mix(batch_size, self.alpha, self.generator)

    def targets(self, labels: torch.Tensor, perm: torch.Tensor, lam: float) -> torch.Tensor:
        return mixed_targets(labels, perm, lam, self.num_classes)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> Batch:
        return mix_batch(images, labels, self.num_classes, "mixup", self.alpha, self.generator, self.buffers)

    def state_dict(self) -> dict[str, Any]:
        """The generator's place, so that a resumed run mixes the batches it redoes as the first run did."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])


class MixCollate:
    """collate_fn that stacks the batch (`stack_uint8` unless told otherwise), then MixUps or CutMixes it.

    Seeded: batch k of worker w is mixed by a generator seeded with (seed, w, k), so a run
    with the same seed, workers and order mixes the same way.
    """

    def __init__(
        self,
        num_classes: int,
        mode: str = "mixup",
        alpha: float = 0.2,
        seed: int = 0,
        stack: Callable[[Sequence[tuple[torch.Tensor, int]]], Batch] = stack_uint8,
    ) -> None:
        if mode not in ("mixup", "cutmix"):
            raise LabkitValueError(f"mode must be 'mixup' or 'cutmix', got {mode!r}")
        self.num_classes, self.mode, self.alpha, self.seed, self.stack = num_classes, mode, alpha, seed, stack
        self._calls = 0

    def __call__(self, batch: Sequence[tuple[torch.Tensor, int]]) -> Batch:
        images, labels = self.stack(batch)
        info = get_worker_info()
        generator = torch.Generator().manual_seed(
            int(np.random.default_rng([self.seed, info.id if info else 0, self._calls]).integers(2**62))
        )
        self._calls += 1
        return mix_batch(images, labels, self.num_classes, self.mode, self.alpha, generator)


class MixUpCollate(MixCollate):
    """MixUp in collate (the article's version 4 passes ``stack=stack_samples`` for its float images)."""

    def __init__(
        self,
        num_classes: int,
        alpha: float = 0.2,
        seed: int = 0,
        stack: Callable[[Sequence[tuple[torch.Tensor, int]]], Batch] = stack_uint8,
    ) -> None:
        super().__init__(num_classes, "mixup", alpha, seed, stack)


class CutMixCollate(MixCollate):
    """CutMix in collate: a box of one image pasted into another, labels mixed by its area."""

    def __init__(self, num_classes: int, alpha: float = 1.0, seed: int = 0) -> None:
        super().__init__(num_classes, "cutmix", alpha, seed)
