"""Per-sample random augmentation of a batch already on the device, in one pass.

torchvision's v2 transforms applied to a batch tensor draw one set of random parameters for the whole
batch: every image gets the same crop and the same flip. `BatchRandomResizedCrop` gives each sample its
own random-resized crop (the same boxes as `labkit.decode.random_crop.RandomResizedCrop` with the same
seed, for images of the batch's size), its own flip and, optionally, its own brightness and contrast.
The crops are one ``torchvision.ops.roi_align`` call over the whole batch: every output pixel averages
the input pixels of its cell (``sampling_ratio`` adaptive), which is the antialiasing a downscaling
resize needs, and per-sample boxes cost no more than one. Flip, brightness, contrast and the
normalisation are elementwise passes over the output, which is smaller than the input.

Boxes and factors are drawn on the CPU from (seed, epoch, key), a batch in one vectorised call, and moved
to the device with the batch: the same draws on a CPU and on CUDA, resumable, and independent of how the
batch was assembled. ``keys`` identify the samples (their dataset indices); without them, ``start`` (the
batch's first position in the epoch: step × batch size) numbers them. The epoch has no default, so that
no run gets the same crops every epoch by forgetting it.

The crop normalises its output (``mean``/``std``), so it takes the batch before anything else has:
uint8, or float in 0..255 with ``mean=None``. A float batch with normalisation on is refused, since it is
most likely normalised already (`DevicePrefetcher` does so by default: give it ``normalize=None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from labkit.core.errors import LabkitValueError
from labkit.decode.crop_box import CROP_DRAWS, DEFAULT_RATIO, DEFAULT_SCALE, counter_uniforms, draw_boxes
from labkit.decode.decoder_contract import Size, target_hw
from labkit.device.transfer import IMAGENET_MEAN, IMAGENET_STD, normalize_affine

Keys = Sequence[int] | torch.Tensor


@dataclass(frozen=True)
class BatchRandomResizedCrop:
    """Each sample of an N×C×H×W batch (uint8 or float, any device) cropped, resized to ``size``, flipped
    with probability ``flip`` and, with ``brightness``/``contrast`` b > 0, scaled by a factor drawn
    uniformly from [1 - b, 1 + b]; out comes float32, normalised with ``mean``/``std`` (``None``: 0..255)."""

    size: Size = 224
    scale: tuple[float, float] = DEFAULT_SCALE
    ratio: tuple[float, float] = DEFAULT_RATIO
    flip: float = 0.5
    brightness: float = 0.0
    contrast: float = 0.0
    seed: int = 0
    mean: Sequence[float] | None = IMAGENET_MEAN
    std: Sequence[float] | None = IMAGENET_STD

    def __post_init__(self) -> None:
        if target_hw(self.size) is None:
            raise LabkitValueError("BatchRandomResizedCrop needs an output size (an int or (height, width))")
        for name in ("brightness", "contrast"):
            if not 0 <= getattr(self, name) < 1:
                raise LabkitValueError(f"{name}={getattr(self, name)}: a factor's spread, 0 <= b < 1")
        if (self.mean is None) != (self.std is None):
            raise LabkitValueError("give both mean and std to normalise, or neither for 0..255 floats")

    def parameters(self, height: int, width: int, keys: Keys, epoch: int) -> np.ndarray:
        """Per sample: top, left, height, width of its box, flip (0/1), brightness and contrast factors."""
        keys = np.asarray(keys.tolist() if isinstance(keys, torch.Tensor) else list(keys), dtype=np.int64)
        u = counter_uniforms(self.seed, epoch, keys, CROP_DRAWS + 2)
        boxes = draw_boxes(np.broadcast_to((height, width), (len(keys), 2)), u, self.scale, self.ratio, self.flip)
        bright = 1 + self.brightness * (2 * u[:, CROP_DRAWS] - 1)
        contrast = 1 + self.contrast * (2 * u[:, CROP_DRAWS + 1] - 1)
        return (
            np.stack([boxes.top, boxes.left, boxes.height, boxes.width, boxes.flip, bright, contrast], 1)
            .astype(np.float64)
            .reshape(-1, 7)
        )

    def __call__(
        self, images: torch.Tensor, keys: Keys | None = None, *, epoch: int, start: int | None = None
    ) -> torch.Tensor:
        """The batch's crops in ``epoch``: sample k's drawn from ``keys[k]`` (its dataset index), or from
        ``start + k`` (its position in the epoch); float32 out, normalised unless ``mean`` is None."""
        from torchvision.ops import roi_align

        if images.ndim != 4:
            raise LabkitValueError(f"images of shape {tuple(images.shape)}: pass a batch, N x C x H x W")
        n, _, height, width = images.shape
        if (keys is None) == (start is None):
            raise LabkitValueError(
                "pass keys= (the samples' dataset indices) or start= (the batch's first position "
                "in the epoch, step x batch size), one of them"
            )
        if images.is_floating_point() and self.mean is not None:
            raise LabkitValueError(
                "a float batch, and this crop normalises: it is probably normalised already "
                "(DevicePrefetcher does by default). Crop the uint8 batch (DevicePrefetcher("
                "loader, normalize=None)), or give mean=None, std=None for floats in 0..255"
            )
        if keys is None:
            keys = range(int(start), int(start) + n)  # type: ignore[arg-type]
        if len(keys) != n:
            raise LabkitValueError(f"{len(keys)} keys for {n} images: one key (e.g. its dataset index) per sample")
        params = torch.as_tensor(self.parameters(height, width, keys, epoch), dtype=torch.float32)
        top, left, h, w, flip, bright, contrast = params.unbind(1)
        boxes = torch.stack([torch.arange(n, dtype=torch.float32), left, top, left + w, top + h], 1)
        out_h, out_w = target_hw(self.size)  # type: ignore[misc]
        x = images if images.is_floating_point() else images.to(torch.float32)
        out = roi_align(x, boxes.to(images.device), (out_h, out_w), spatial_scale=1.0, sampling_ratio=-1, aligned=True)
        flip = flip.to(images.device).bool()
        if flip.any():
            out[flip] = out[flip].flip(-1)
        if self.contrast:  # around each image's own mean grey, as torchvision's adjust_contrast
            grey = out.mean(dim=(1, 2, 3), keepdim=True)
            out.sub_(grey).mul_(contrast.to(images.device).view(-1, 1, 1, 1)).add_(grey)
        if self.brightness:
            out.mul_(bright.to(images.device).view(-1, 1, 1, 1))
        if self.brightness or self.contrast:
            out.clamp_(0, 255)
        if self.mean is not None:
            scale, shift = normalize_affine(self.mean, self.std, images.device)  # type: ignore[arg-type]
            out.mul_(scale).add_(shift)
        return out
