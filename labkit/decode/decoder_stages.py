"""Each decoder's work split into the stages the seed names (decode → resize → to tensor), for timing apart.

A stage is a function of the previous stage's output; the first takes the encoded bytes, the last gives
the decoder's own uint8 (3, H, W) output (the tests hold the two equal), so the stages add up to what
the decoder costs, not to a model of it. The order is the decoder's own:

``pil``          full decode, PIL resize, then the H×W×C array becomes a C×H×W tensor.
``pil-reduced``  a DCT-scaled decode (``Image.draft``), the array becomes a tensor, torch resizes it.
``torchvision``, ``torchcodec``  libjpeg-turbo decodes straight into a tensor (nothing left for
                 to-tensor), torch resizes.
``simplejpeg``   a power-of-two DCT-scaled decode into a numpy array, viewed as a tensor, torch resizes.

Only the files each decoder reads itself can be timed so: a PNG timed as ``simplejpeg`` is refused.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

import numpy as np
import torch
from PIL import Image

from labkit.core.errors import LabkitValueError
from labkit.decode.backends import (MAX_PIXELS, TORCHCODEC_FORMATS, TORCHVISION_FORMATS, chw, open_image, pil_chw,
                                    pil_orientation, pil_to_tensor, resize_uint8, to_rgb)
from labkit.decode.jpeg_orientation import rotates

Stage = Tuple[str, Callable[[Any], Any]]
StageChain = Callable[[Tuple[int, int]], List[Stage]]


def _decode_full(data: bytes) -> Image.Image:
    img = to_rgb(open_image(data, MAX_PIXELS))
    img.load()  # an RGB file is not decoded until its pixels are asked for
    return img


def _decode_draft(hw: Tuple[int, int]) -> Callable[[bytes], Image.Image]:
    def decode(data: bytes) -> Image.Image:
        img = open_image(data, MAX_PIXELS)
        if img.format == "JPEG":
            img.draft("RGB", (hw[0], hw[1]) if rotates(pil_orientation(img)) else (hw[1], hw[0]))
        img = to_rgb(img)
        img.load()
        return img
    return decode


def _native_only(data: bytes, decoder: str, formats: frozenset) -> None:
    header = open_image(data, MAX_PIXELS)
    if header.format not in formats or header.mode == "CMYK":
        raise LabkitValueError(f"{decoder}'s stages are timed on {', '.join(sorted(formats))} files in RGB or grey, "
                               f"not {header.format} in {header.mode}: time that file with decoder='pil'")


def _eight_bits(img: torch.Tensor) -> torch.Tensor:
    return img if img.dtype == torch.uint8 else (img.to(torch.int32) >> 8).to(torch.uint8)


def _decode_torchvision(data: bytes) -> torch.Tensor:
    from torchvision.io import ImageReadMode, decode_image

    _native_only(data, "torchvision", frozenset(TORCHVISION_FORMATS))
    return _eight_bits(decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=ImageReadMode.RGB,
                                    apply_exif_orientation=True))


def _decode_torchcodec(data: bytes) -> torch.Tensor:
    from torchcodec.decoders import decode_image

    _native_only(data, "torchcodec", frozenset(TORCHCODEC_FORMATS))
    img = decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode="RGB", output_dtype="auto")
    return _eight_bits(img[0] if img.dim() == 4 else img)


def _decode_simplejpeg(hw: Tuple[int, int]) -> Callable[[bytes], np.ndarray]:
    from labkit.decode.simplejpeg_decoder import decode_displayed, own_jpeg

    def decode(data: bytes) -> np.ndarray:
        header = own_jpeg(data, MAX_PIXELS)
        if header is None:
            raise LabkitValueError("simplejpeg's stages are timed on JPEG files in RGB or grey: time that file with "
                                   "decoder='pil'")
        return decode_displayed(data, *header, hw)
    return decode


def _resize_pil(hw: Tuple[int, int]) -> Callable[[Image.Image], Image.Image]:
    return lambda img: img if img.size == (hw[1], hw[0]) else img.resize((hw[1], hw[0]), Image.BILINEAR)


def _resize_tensor(hw: Tuple[int, int]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda img: img.contiguous() if tuple(img.shape[-2:]) == hw else resize_uint8(img, hw).contiguous()


def _unchanged(img: torch.Tensor) -> torch.Tensor:
    return img


def pil_stages(hw: Tuple[int, int]) -> List[Stage]:
    return [("decode", _decode_full), ("resize", _resize_pil(hw)), ("to-tensor", pil_to_tensor)]


def pil_reduced_stages(hw: Tuple[int, int]) -> List[Stage]:
    return [("decode", _decode_draft(hw)), ("to-tensor", pil_chw), ("resize", _resize_tensor(hw))]


def torchvision_stages(hw: Tuple[int, int]) -> List[Stage]:
    return [("decode", _decode_torchvision), ("to-tensor", _unchanged), ("resize", _resize_tensor(hw))]


def torchcodec_stages(hw: Tuple[int, int]) -> List[Stage]:
    return [("decode", _decode_torchcodec), ("to-tensor", _unchanged), ("resize", _resize_tensor(hw))]


def simplejpeg_stages(hw: Tuple[int, int]) -> List[Stage]:
    return [("decode", _decode_simplejpeg(hw)), ("to-tensor", chw), ("resize", _resize_tensor(hw))]
