"""The decoders on Pillow: ``pil``, a full decode then Pillow's resize (the article's baseline,
``Image.open(...).convert('RGB')`` followed by ``Resize((256, 256))``), and ``pil-reduced``, a DCT-scaled decode
(``Image.draft``) at the smallest scale still no smaller than the target, then torch's uint8 resize (an 800×600 JPEG
for a 256×256 output decodes at 400×300: a quarter of the pixels). Also what every path through Pillow shares (the
header read and its bomb check, `open_image`; the EXIF rule, `pil_orientation`; RGB from any mode, `to_rgb`) and the
packing check (`check_decodable`).
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import torch
from PIL import Image, ImageOps

from labkit.decode.decoder_contract import (
    MAX_PIXELS,
    OUTPUT_SIZE,
    DecodeError,
    DecompressionBombError,
    Size,
    describe_failure,
    failure_reason,
    refuse_oversized,
    target_hw,
)
from labkit.decode.jpeg_orientation import rotates
from labkit.decode.resize import chw_view, resize_uint8
from labkit.decode.stage_laps import StageLaps, lap

EXIF_ORIENTATION = 0x0112


def open_image(data: bytes, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """Parse the header only (no pixels decoded) and refuse decompression bombs."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise DecompressionBombError(
            f"Pillow refused it from the header ({failure_reason(e)}). If the image is genuine, pass a "
            "larger max_pixels and raise PIL.Image.MAX_IMAGE_PIXELS"
        ) from None
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, "not a readable image")) from None
    refuse_oversized(*img.size, max_pixels)
    return img


def pil_orientation(img: Image.Image) -> int:
    """The EXIF orientation of an opened image (1, as stored, where it has none): read from the header alone."""
    return img.getexif().get(EXIF_ORIENTATION, 1)


def pil_chw(img: Image.Image) -> torch.Tensor:
    """An RGB Pillow image's pixels as a (3, H, W) uint8 tensor view of one copy of them."""
    return chw_view(np.array(img, dtype=np.uint8))


def to_rgb(img: Image.Image) -> Image.Image:
    if pil_orientation(img) != 1:
        img = ImageOps.exif_transpose(img)
    if img.mode == "RGB":
        return img
    if img.mode.startswith("I"):  # 16/32-bit grayscale: scale to 8 bits (PIL's convert would clip)
        arr = np.asarray(img, dtype=np.uint32) >> 8
        img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")
    elif img.mode == "F":
        img = Image.fromarray(np.clip(np.asarray(img), 0, 255).astype(np.uint8), "L")
    elif img.mode == "P":
        img = img.convert("RGBA")  # applies palette transparency properly before dropping it
    return img.convert("RGB")


def pil_to_tensor(img: Image.Image) -> torch.Tensor:
    return pil_chw(img).contiguous()


def _decode_with_pil(
    data: bytes, size: Size, max_pixels: int, reduced: bool, laps: StageLaps | None = None
) -> torch.Tensor:
    hw = target_hw(size)
    img = open_image(data, max_pixels)
    try:
        if reduced and hw is not None and img.format == "JPEG":
            img.draft("RGB", (hw[0], hw[1]) if rotates(pil_orientation(img)) else (hw[1], hw[0]))
        img = to_rgb(img)
        img.load()  # an RGB file's pixels are decoded here, not by whatever asks for them first
        lap(laps, "decode")
        resized = hw is None or img.size == (hw[1], hw[0])
        if reduced:  # resize the H×W×C pixels through a C×H×W view: no copy before the resize
            image = pil_chw(img)
            lap(laps, "to-tensor")
            image = image.contiguous() if resized else resize_uint8(image, hw).contiguous()
            lap(laps, "resize")
            return image
        if not resized:
            img = img.resize((hw[1], hw[0]), Image.BILINEAR)
        lap(laps, "resize")
        image = pil_to_tensor(img)
        lap(laps, "to-tensor")
        return image
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {img.format or 'image'}")) from None


def decode_pil(
    data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS, laps: StageLaps | None = None
) -> torch.Tensor:
    """Full PIL decode, then bilinear resize to ``size`` (the article's baseline)."""
    return _decode_with_pil(data, size, max_pixels, False, laps)


def decode_pil_reduced(
    data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS, laps: StageLaps | None = None
) -> torch.Tensor:
    """JPEG DCT-domain downscale (``Image.draft``) to no less than ``size``, then torch's uint8 resize."""
    return _decode_with_pil(data, size, max_pixels, True, laps)


def check_decodable(data: bytes, max_pixels: int = MAX_PIXELS) -> None:
    """Raise `DecodeError` (or `DecompressionBombError`) unless every byte of ``data`` decodes.

    What `labkit pack` runs on each file: a JPEG is decoded at 1/8 scale, which still walks
    its whole entropy-coded stream (a cut-short or corrupt file fails) but skips most of the
    inverse DCT, colour conversion and resize: a check, not a decode, so the cheapest pass that reads every byte.
    """
    img = open_image(data, max_pixels)
    try:
        img.getexif()  # parsed by every full decode, for the orientation
        if img.format == "JPEG":
            img.draft(img.mode, (1, 1))
        img.load()
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {img.format or 'image'}")) from None
