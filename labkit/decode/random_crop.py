"""Random-resized crops taken inside the decode: the training pipeline at the evaluation pipeline's speed.

``RandomResizedCrop(224)`` after a full decode pays for every pixel of the file and then throws most
of them away (the crop keeps 8-100 % of the area, 54 % on average). Here the crop box is drawn
*before* decoding, from the header's size alone, with torchvision's `RandomResizedCrop` algorithm
(same scale and ratio ranges, same ten tries and central fallback; `labkit.decode.crop_box`), so the
JPEG decoder can be told how much detail the box needs: ``simplejpeg`` and ``pil-reduced`` decode at
the smallest DCT scale (1/2, 1/4, 1/8) at which the box is still at least the output size, and resize
only the box's pixels (antialiased). A decoder that cannot scale its decode (``pil``, ``torchvision``,
a PNG) decodes the whole image and crops the same box: the same pixels, within the DCT scaling's
difference, at the full decode's cost (each decoder's record says which it does,
`labkit.decode.registry`).

Every draw is a counter-based hash of (seed, epoch, index) (`labkit.decode.crop_box.counter_uniforms`), made
for a whole batch in one vectorised call, never from which worker fetched the sample, in which batch or in what
order: a resumed run, or a run with another ``num_workers`` or batch size, draws the same boxes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from labkit.core.errors import LabkitValueError
from labkit.decode.crop_box import (
    CROP_DRAWS,
    DEFAULT_RATIO,
    DEFAULT_SCALE,
    CropBox,
    CropBoxes,
    box_from_draws,
    counter_uniforms,
    draw_boxes,
)
from labkit.decode.decoder_contract import MAX_PIXELS, DecodeError, Size, output_hw_of, target_hw
from labkit.decode.registry import decoder_info


@dataclass(frozen=True)
class RandomResizedCrop:
    """torchvision's ``RandomResizedCrop(size, scale, ratio)`` + ``RandomHorizontalFlip(flip)``, drawn per sample.

    ``size`` is the output (height, width) or one int for a square. `draw` gives the box for sample
    ``index`` in ``epoch``; `decode` decodes bytes straight to the cropped, resized, flipped uint8 image.
    """

    size: Size = 224
    scale: tuple[float, float] = DEFAULT_SCALE
    ratio: tuple[float, float] = DEFAULT_RATIO
    flip: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if target_hw(self.size) is None:
            raise LabkitValueError("RandomResizedCrop needs an output size (an int or (height, width)), not None")
        low, high = self.scale
        if not 0 < low <= high <= 1:
            raise LabkitValueError(
                f"scale={self.scale}: the box's share of the image area must be 0 < low <= high <= 1"
            )
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise LabkitValueError(f"ratio={self.ratio}: aspect ratios (width / height) must be 0 < low <= high")
        if not 0 <= self.flip <= 1:
            raise LabkitValueError(f"flip={self.flip}: a probability, between 0 and 1")

    @property
    def output_hw(self) -> tuple[int, int]:
        """(height, width) of the images it makes."""
        return output_hw_of(self.size)

    def draw_many(self, image_hw: Any, indices: Any, epochs: Any = 0) -> CropBoxes:
        """The boxes (torchvision's algorithm) and flips of samples ``indices`` in ``epochs`` (one, or one each),
        for images of ``image_hw`` ((height, width) each), drawn for the whole batch at once."""
        uniforms = counter_uniforms(self.seed, epochs, indices, CROP_DRAWS)
        return draw_boxes(image_hw, uniforms, self.scale, self.ratio, self.flip)

    def draw(self, height: int, width: int, index: int, epoch: int = 0) -> CropBox:
        """Sample ``index``'s box and flip in ``epoch``, for an image of height x width: its row of `draw_many`,
        the same whatever batch it is drawn in (drawn alone by `box_from_draws`, the same algorithm as a loop)."""
        u = counter_uniforms(self.seed, epoch, [index], CROP_DRAWS)[0].tolist()
        return box_from_draws(height, width, u, self.scale, self.ratio, self.flip)

    def decode(
        self, data: bytes, index: int, epoch: int = 0, decoder: str = "pil-reduced", max_pixels: int = MAX_PIXELS
    ) -> torch.Tensor:
        """``data`` decoded to a uint8 (3, H, W) tensor of `output_hw`: sample ``index``'s crop in ``epoch``."""
        return decoder_info(decoder).crop(data, lambda h, w: self.draw(h, w, index, epoch), self.output_hw, max_pixels)


def decode_box(
    data: bytes, box: CropBox, output_hw: tuple[int, int], decoder: str = "pil-reduced", max_pixels: int = MAX_PIXELS
) -> torch.Tensor:
    """``data`` decoded, cropped to ``box``, resized to ``output_hw`` (antialiased bilinear) and flipped
    if the box says so: a uint8 (3, H, W) tensor."""

    def the_given_box(height: int, width: int) -> CropBox:
        if (height, width) != box.image_hw:
            raise DecodeError(f"the image is {height}x{width} but the box was drawn for {box.image_hw}")
        return box

    return decoder_info(decoder).crop(data, the_given_box, output_hw, max_pixels)
