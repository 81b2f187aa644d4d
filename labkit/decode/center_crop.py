"""The evaluation crop, taken inside the decode: torchvision's ``Resize(resize)`` + ``CenterCrop(size)``.

Validation and test images are resized so that their shorter side is ``resize`` (the aspect kept) and
the central ``size`` pixels are kept. `CenterCrop` finds that central box on the image as stored, from
the header's size alone, and hands it to the decoder like a training crop's box: a decoder that scales
its decode (``simplejpeg``, ``pil-reduced``) decodes at the smallest DCT scale that still has the detail,
then the box is resized to ``size`` (antialiased). The result is torchvision's within the rounding of the
box to whole pixels (a test holds it to 30 dB or more). It takes the same place as
`labkit.decode.random_crop.RandomResizedCrop` in every dataset (``crop=``), so that a training set and its
validation set differ only in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import torch

from labkit.core.errors import LabkitValueError
from labkit.decode.backends import MAX_PIXELS, Size, output_hw_of, target_hw
from labkit.decode.crop_box import CropBox
from labkit.decode.registry import decoder_info


@dataclass(frozen=True)
class CenterCrop:
    """``Resize(resize)`` (shorter side, aspect kept) then ``CenterCrop(size)``, as torchvision's evaluation
    transforms, as one box decoded at the detail it needs. ``size``: an int for a square or (height, width)."""

    size: Size = 224
    resize: int = 256

    def __post_init__(self) -> None:
        hw = target_hw(self.size)
        if hw is None:
            raise LabkitValueError("CenterCrop needs an output size (an int or (height, width)), not None")
        if not isinstance(self.resize, int) or self.resize < max(hw):
            raise LabkitValueError(f"resize={self.resize!r}: the shorter side after the resize, a whole number of "
                                   f"pixels at least as large as the crop {hw} (torchvision's evaluation: 256 for 224)")

    @property
    def output_hw(self) -> Tuple[int, int]:
        """(height, width) of the images it makes."""
        return output_hw_of(self.size)

    def draw(self, height: int, width: int, index: int = 0, epoch: int = 0) -> CropBox:
        """The central box of an image of height x width, the same for every sample and epoch."""
        f = min(height, width) / self.resize  # stored pixels per pixel of the resized image
        resized = (int(self.resize * height / min(height, width)), int(self.resize * width / min(height, width)))
        out_h, out_w = self.output_hw
        top, left = round((resized[0] - out_h) / 2), round((resized[1] - out_w) / 2)  # torchvision's CenterCrop
        box_h, box_w = min(height, max(1, round(out_h * f))), min(width, max(1, round(out_w * f)))
        return CropBox(min(height - box_h, round(top * f)), min(width - box_w, round(left * f)), box_h, box_w, False,
                       (height, width))

    def decode(self, data: bytes, index: int = 0, epoch: int = 0, decoder: str = "pil-reduced",
               max_pixels: int = MAX_PIXELS) -> torch.Tensor:
        """``data`` decoded to the uint8 (3, H, W) centre crop of `output_hw`."""
        return decoder_info(decoder).crop(data, lambda h, w: self.draw(h, w), self.output_hw, max_pixels)
