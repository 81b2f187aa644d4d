"""Random-resized crops through Pillow: ``pil-reduced`` decodes the box at the DCT scale it needs; any
decoder without a crop of its own decodes the whole image and crops the same box after.

A crop function takes the bytes, ``draw`` (the image's displayed height and width → its `CropBox`) and
the output size, so the box is drawn from whatever header the decoder parses, and only once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from PIL import Image

from labkit.decode.crop_box import CropBox, crop_resize_flip, dct_scale
from labkit.decode.decoder_contract import MAX_PIXELS, DecodeError, Decoder, describe_failure
from labkit.decode.jpeg_orientation import rotates
from labkit.decode.pil_decoders import open_image, pil_chw, pil_orientation, to_rgb

Draw = Callable[[int, int], CropBox]
CropDecoder = Callable[[bytes, Draw, tuple[int, int], int], torch.Tensor]


def displayed_hw(header: Image.Image) -> tuple[int, int]:
    """(height, width) of an opened image as shown, its EXIF orientation applied (header only, no pixels)."""
    w, h = header.size
    return (w, h) if rotates(pil_orientation(header)) else (h, w)


def crop_pil_reduced(data: bytes, draw: Draw, output_hw: tuple[int, int], max_pixels: int = MAX_PIXELS) -> torch.Tensor:
    """The box decoded by Pillow at the largest DCT reduction that keeps it at least ``output_hw`` (a
    PNG at full size), resized (antialiased) and flipped."""
    img = open_image(data, max_pixels)  # parsed once: on small images the header costs as much as the pixels
    box = draw(*displayed_hw(img))
    s = dct_scale(box, output_hw) if img.format == "JPEG" else 1
    try:
        if s > 1:  # the reduction is one number: the same in the stored orientation as in the shown one
            stored_w, stored_h = img.size
            img.draft("RGB", (max(1, stored_w // s), max(1, stored_h // s)))
        img = to_rgb(img)
        if s == 1:  # full detail: the box is whole pixels, and torch's uint8 kernel is the faster resize
            return crop_resize_flip(pil_chw(img), box, output_hw)
        # Scaled: the box falls between pixels; PIL resizes exactly that region, its sub-pixel edges included.
        fy, fx = img.size[1] / box.image_hw[0], img.size[0] / box.image_hw[1]
        region = (box.left * fx, box.top * fy, (box.left + box.width) * fx, (box.top + box.height) * fy)
        out = img.resize((output_hw[1], output_hw[0]), Image.BILINEAR, box=region)
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {img.format or 'image'}")) from None
    if box.flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return pil_chw(out).contiguous()


def crop_after_decode(decoder: Decoder) -> CropDecoder:
    """A crop for a decoder that cannot crop: the whole image decoded, then the same box cut and resized."""

    def crop(data: bytes, draw: Draw, output_hw: tuple[int, int], max_pixels: int = MAX_PIXELS) -> torch.Tensor:
        full = decoder(data, None, max_pixels)
        return crop_resize_flip(full, draw(*full.shape[-2:]), output_hw)

    crop.__doc__ = f"A full decode by {decoder.__name__}, then the box cut, resized and flipped."
    return crop
