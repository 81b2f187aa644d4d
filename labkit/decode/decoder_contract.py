"""The contract every decoder keeps, and the words it fails in: the output size (`Size`, `target_hw`, the article's
`OUTPUT_SIZE`), the largest image a decoder accepts (`MAX_PIXELS`, checked from the header before any pixel is
allocated: `refuse_oversized`), the errors (`DecodeError`, `DecompressionBombError`) and their text
(`describe_failure`: the same words for the same bytes on every run), and the decode function's type (`Decoder`).

Every decoder returns RGB whatever the file holds (grayscale, CMYK, palette, alpha — the alpha channel is dropped,
as ``ImageFolder`` does), applies the EXIF orientation, and refuses an image whose header claims more than
``max_pixels`` before allocating anything for it. `labkit.decode.registry` lists every decoder, one record each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import torch

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError

Size = int | tuple[int, int] | Sequence[int] | None


#: The output side the article's ablation decodes to (``Resize((256, 256))``), every decoder's default.
OUTPUT_SIZE = 256


#: Largest image (in pixels) a decoder accepts unless told otherwise: Pillow's own default.
MAX_PIXELS = 89_478_485


class DecodeError(LabkitError, ValueError):
    """The bytes are not an image this decoder can read (truncated, empty, not an image...)."""


class DecompressionBombError(DecodeError):
    """The image header claims more pixels than the decoder's ``max_pixels``."""


def output_hw_of(size: Size) -> tuple[int, int]:
    """`target_hw` of a crop's ``size``, which names an output (never None: refused when the crop is made)."""
    hw = target_hw(size)
    if hw is None:
        raise LabkitValueError("a crop needs an output size (an int or (height, width)), not None")
    return hw


def target_hw(size: Size) -> tuple[int, int] | None:
    """``256`` → ``(256, 256)``; ``(h, w)`` stays; ``None`` means keep the decoded size."""
    if size is None:
        return None
    whole = (int, np.integer)
    if isinstance(size, whole) and not isinstance(size, bool):
        hw = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(s, whole) for s in size):
        hw = (int(size[0]), int(size[1]))
    else:
        raise LabkitTypeError(
            f"size={size!r}: give whole pixels, an int (a square) or (height, width), e.g. size=224 or size=(224, 320)"
        )
    if min(hw) < 1:
        raise LabkitValueError(f"size must be positive, got {size!r}")
    return hw  # type: ignore[return-value]


_OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


_SOURCE_LOCATION = re.compile(r"^[\w:()<>~]*,\s*\S+\.(?:c|cc|cpp|cu|h|hpp):\d+,\s*")


_PLAIN_REASONS = {
    "cannot identify image file": "Pillow recognised no image format in it (not an image, or a damaged header)"
}


def _describe(data: bytes) -> str:
    if not data:
        return "0 bytes: an empty file"
    return f"{len(data)} bytes starting {bytes(data[:12])!r}"


def failure_reason(error: BaseException) -> str:
    """A library's error text without what changes from run to run or build to build: the repr of the
    in-memory file Pillow was handed (``<_io.BytesIO object at 0x7f...>``), a C++ source location."""
    text = _SOURCE_LOCATION.sub("", _OBJECT_REPR.sub("", str(error)).strip())
    return _PLAIN_REASONS.get(text, text)


def describe_failure(data: bytes, error: BaseException, what: str = "cannot decode image") -> str:
    """``what (size and first bytes): reason``: the same text for the same bytes on every run, so
    logs and reports can be compared."""
    return f"{what} ({_describe(data)}): {failure_reason(error)}"


def refuse_oversized(width: int, height: int, max_pixels: int) -> None:
    """Raise `DecompressionBombError` where a header claims more than ``max_pixels``: before any pixel is allocated."""
    if width * height > max_pixels:
        raise DecompressionBombError(
            f"header claims {width}x{height} = {width * height:,} pixels, over the limit of {max_pixels:,} "
            "(a decompression bomb, or a genuinely huge image: then pass a larger max_pixels)"
        )


Decoder = Callable[..., torch.Tensor]  #: (bytes, size, max_pixels, laps=None) -> uint8 (3, H, W)
