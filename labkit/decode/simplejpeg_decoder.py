"""The ``simplejpeg`` decoder: libjpeg-turbo 3 straight into a numpy array, at a power-of-two DCT scale.

``simplejpeg`` (MIT; wheels for Linux, macOS and Windows with libjpeg-turbo built in) decodes a JPEG with
the GIL released, so threads decode in parallel, and without Pillow's own image object and its copies
(what that saves is measured in ``benchmarks/train_pipeline.py``'s one-core table).

It is asked for exact power-of-two sizes (1/2, 1/4, 1/8): left to itself it would pick the 3/8-7/8 scales
libjpeg-turbo also offers, which are slower than a full decode and blur more. The scaled pixels are
resized with torch's antialiased uint8 kernel, chosen by measurement: the fastest candidate at 50 dB or more against
Pillow's antialiased resize of the same box on downscales, and no new dependency for the upscales where OpenCV's
is a little faster (``benchmarks/resize_candidates.py``; its figures are in ``benchmarks/README.md``).

What it does not read itself goes to Pillow's ``pil-reduced`` path, the same output within the resize:
a file that is not a JPEG, and CMYK/YCCK JPEGs (Adobe's inverted CMYK needs Pillow's conversion). EXIF
orientation is read from the bytes (`labkit.decode.jpeg_orientation`) and applied to the decoded pixels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from labkit.decode.crop_box import CropBox, reduction_for
from labkit.decode.decoder_contract import (
    MAX_PIXELS,
    OUTPUT_SIZE,
    DecodeError,
    Size,
    describe_failure,
    refuse_oversized,
    target_hw,
)
from labkit.decode.jpeg_orientation import exif_orientation, orient, rotates
from labkit.decode.pil_crop import crop_pil_reduced
from labkit.decode.pil_decoders import decode_pil_reduced
from labkit.decode.resize import chw_view, resize_uint8
from labkit.decode.stage_laps import StageLaps, lap

#: The JPEG colour spaces simplejpeg turns into RGB as Pillow does; CMYK and YCCK go to Pillow.
OWN_COLORSPACES = ("YCbCr", "RGB", "Gray")


#: How a JPEG starts: the SOI marker, then the next marker's 0xff.
JPEG_START = b"\xff\xd8\xff"


def is_jpeg(data: bytes) -> bool:
    """Whether ``data`` starts as a JPEG does (SOI, then a marker)."""
    return data[:3] == JPEG_START


def jpeg_header(data: bytes, max_pixels: int = MAX_PIXELS) -> tuple[int, int, str]:
    """(height, width, colour space) of the JPEG ``data`` as stored; refuses decompression bombs."""
    import simplejpeg

    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError as e:
        raise DecodeError(describe_failure(data, e, "cannot decode JPEG")) from None
    if width * height > max_pixels:
        refuse_oversized(width, height, max_pixels)
    return height, width, colorspace


def simplejpeg_header(data: bytes, max_pixels: int = MAX_PIXELS) -> tuple[int, int, int] | None:
    """(height, width as stored, EXIF orientation) of a JPEG simplejpeg reads itself; None for a file it hands to
    Pillow (not a JPEG; CMYK or YCCK)."""
    if data[:3] != JPEG_START:
        return None
    height, width, colorspace = jpeg_header(data, max_pixels)
    return (height, width, exif_orientation(data)) if colorspace in OWN_COLORSPACES else None


def decode_displayed(data: bytes, height: int, width: int, orientation: int, hw: tuple[int, int] | None) -> np.ndarray:
    """The H×W×3 pixels as shown, decoded at the smallest power-of-two scale still no smaller than ``hw``
    (None: full size)."""
    scale = 1 if hw is None else reduction_for(height, width, (hw[1], hw[0]) if rotates(orientation) else hw)
    return as_displayed(decode_scaled(data, height, width, scale), orientation)


def decode_scaled(data: bytes, height: int, width: int, scale: int) -> np.ndarray:
    """The stored H×W×3 RGB pixels of ``data`` decoded at 1/``scale`` (1, 2, 4 or 8)."""
    import simplejpeg

    try:
        return simplejpeg.decode_jpeg(data, "RGB", min_height=-(-height // scale), min_width=-(-width // scale))
    except ValueError as e:
        raise DecodeError(describe_failure(data, e, "cannot decode JPEG")) from None


def as_displayed(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """Stored pixels → as shown (EXIF applied), C-contiguous so torch can view them."""
    return pixels if orientation == 1 else np.ascontiguousarray(orient(pixels, orientation))


def decode_simplejpeg(
    data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS, laps: StageLaps | None = None
) -> torch.Tensor:
    """A JPEG decoded at the smallest power-of-two DCT scale that is still no smaller than ``size``, then
    torch's antialiased uint8 resize; other files through Pillow (``pil-reduced``)."""
    header = simplejpeg_header(data, max_pixels)
    if header is None:
        return decode_pil_reduced(data, size, max_pixels, laps)
    hw = target_hw(size)
    pixels = decode_displayed(data, *header, hw)
    lap(laps, "decode")
    image = chw_view(pixels)
    lap(laps, "to-tensor")
    image = image.contiguous() if hw is None or tuple(image.shape[-2:]) == hw else resize_uint8(image, hw).contiguous()
    lap(laps, "resize")
    return image


def crop_simplejpeg(
    data: bytes, draw: Callable[[int, int], CropBox], output_hw: tuple[int, int], max_pixels: int = MAX_PIXELS
) -> torch.Tensor:
    """The box ``draw(height, width)`` gives for the displayed image, decoded at the smallest DCT scale that
    keeps it at least ``output_hw``, cut out (edges rounded to the scaled pixels), resized, flipped."""
    header = simplejpeg_header(data, max_pixels)
    if header is None:
        return crop_pil_reduced(data, draw, output_hw, max_pixels)
    height, width, orientation = header
    box = draw(*((width, height) if rotates(orientation) else (height, width)))
    pixels = decode_scaled(data, height, width, reduction_for(box.height, box.width, output_hw))
    return crop_region(pixels if orientation == 1 else as_displayed(pixels, orientation), box, output_hw)


def crop_region(pixels: np.ndarray, box: CropBox, output_hw: tuple[int, int]) -> torch.Tensor:
    """``box`` (drawn for the full-size image) cut from displayed H×W×3 ``pixels`` decoded at any scale,
    resized to ``output_hw`` and flipped if the box says so: a contiguous uint8 (3, H, W) tensor."""
    top, left, bottom, right = box.scaled(pixels.shape[:2])
    region = chw_view(np.ascontiguousarray(pixels[top:bottom, left:right]))
    out = resize_uint8(region, output_hw)
    return (out.flip(-1) if box.flip else out).contiguous()
