"""The decoders on torchvision and torchcodec, and nvJPEG's batch decode on a GPU.

``torchvision``  ``torchvision.io.decode_image`` (libjpeg-turbo, libpng) and an antialiased resize on the uint8
                 tensor; formats it cannot read (BMP, TIFF, ...) go through Pillow.
``torchcodec``   ``torchcodec.decoders.decode_image``, which supersedes torchvision's image decoders (deprecated in
                 torchvision 0.29), then the same resize. Listed only where the optional ``torchcodec`` package
                 imports (``pip install torch-labkit[torchcodec]``; its image decoders need no system library).
`decode_jpeg_batch`: a batch of JPEG files decoded on the device (``decode_jpeg(device="cuda")``), the registry's
``nvjpeg`` device decoder.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import torch

from labkit.core.errors import LabkitError
from labkit.decode.decoder_contract import (
    MAX_PIXELS,
    OUTPUT_SIZE,
    DecodeError,
    Size,
    describe_failure,
    failure_reason,
    target_hw,
)
from labkit.decode.pil_decoders import decode_pil, open_image
from labkit.decode.resize import resize_uint8
from labkit.decode.stage_laps import StageLaps, lap

TORCHVISION_FORMATS = {"JPEG", "PNG", "GIF", "WEBP"}


#: What torchcodec reads natively (AVIF and HEIC too, but Pillow cannot parse their headers here).
TORCHCODEC_FORMATS = {"JPEG", "PNG", "GIF", "WEBP"}


def torchvision_io():
    """``torchvision.io``, imported on first use: a worker that starts fresh (spawn, forkserver) and
    decodes with Pillow never pays its import, a second on a laptop. `get_decoder` imports it in the
    parent for the decoders that need it, so a forked worker inherits it instead of paying on its first image."""
    import torchvision.io

    return torchvision.io


def _finish(img: torch.Tensor, size: Size, laps: StageLaps | None) -> torch.Tensor:
    """A decoded C×H×W tensor → contiguous uint8 at ``size``: 16-bit PNGs scaled to 8 bits, then resized."""
    lap(laps, "decode")
    if img.dtype != torch.uint8:
        img = (img.to(torch.int32) >> 8).to(torch.uint8)
    lap(laps, "to-tensor")  # the library decodes straight into a tensor: only a 16-bit image has work here
    hw = target_hw(size)
    if hw is not None and tuple(img.shape[-2:]) != hw:
        img = resize_uint8(img, hw)
    img = img.contiguous()
    lap(laps, "resize")
    return img


def decode_torchvision(
    data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS, laps: StageLaps | None = None
) -> torch.Tensor:
    """libjpeg-turbo / libpng through ``torchvision.io``, antialiased bilinear resize on uint8."""
    header = open_image(data, max_pixels)
    if header.format not in TORCHVISION_FORMATS or header.mode == "CMYK":
        return decode_pil(data, size, max_pixels, laps)
    try:
        tvio = torchvision_io()
        img = tvio.decode_image(
            torch.frombuffer(bytearray(data), dtype=torch.uint8),
            mode=tvio.ImageReadMode.RGB,
            apply_exif_orientation=True,
        )
    except RuntimeError as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {header.format}")) from None
    return _finish(img, size, laps)


def torchcodec_available() -> bool:
    """Whether the optional ``torchcodec`` package is installed (the ``torchcodec`` decoder needs it)."""
    return importlib.util.find_spec("torchcodec") is not None


def _require_torchcodec() -> None:
    if not torchcodec_available():
        raise LabkitError(
            "the torchcodec decoder needs the torchcodec package: pip install 'torch-labkit[torchcodec]' "
            "(or choose another decoder)"
        )


def decode_torchcodec(
    data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS, laps: StageLaps | None = None
) -> torch.Tensor:
    """``torchcodec.decoders.decode_image`` (torchvision's successor; it applies the EXIF orientation),
    antialiased bilinear resize on uint8."""
    _require_torchcodec()
    from torchcodec.decoders import decode_image as torchcodec_decode_image

    header = open_image(data, max_pixels)
    if header.format not in TORCHCODEC_FORMATS or header.mode == "CMYK":
        return decode_pil(data, size, max_pixels, laps)
    try:
        img = torchcodec_decode_image(
            torch.frombuffer(bytearray(data), dtype=torch.uint8), mode="RGB", output_dtype="auto"
        )
    except (RuntimeError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {header.format}")) from None
    if img.dim() == 4:  # an animated GIF or WebP: the first frame, as Pillow and torchvision give
        img = img[0]
    return _finish(img, size, laps)


def decode_jpeg_batch(
    blobs: Sequence[torch.Tensor], size: Size = OUTPUT_SIZE, device: str | torch.device = "cuda"
) -> torch.Tensor:
    """A batch of JPEG files (uint8 byte tensors) → uint8 N×3×H×W decoded and resized on ``device``.

    On CUDA this is nvJPEG through ``torchvision.io.decode_jpeg(..., device="cuda")``, one call
    for the whole batch: decoding leaves the CPU entirely. Only JPEG; check with
    ``labkit verify`` and a decode on the CPU first for anything else.
    """
    tvio = torchvision_io()
    try:
        images = tvio.decode_jpeg(list(blobs), mode=tvio.ImageReadMode.RGB, device=device)
    except RuntimeError as e:
        raise _first_undecodable(blobs, device) or DecodeError(f"batch of {len(blobs)}: {failure_reason(e)}") from None
    hw = target_hw(size)
    if hw is not None:
        images = [resize_uint8(img, hw) for img in images]
    return torch.stack(images)


def _first_undecodable(blobs: Sequence[torch.Tensor], device: str | torch.device) -> DecodeError | None:
    """The batch's first file that fails alone, named by its position, or None if each decodes alone."""
    tvio = torchvision_io()
    for k, blob in enumerate(blobs):
        try:
            tvio.decode_jpeg(blob, mode=tvio.ImageReadMode.RGB, device=device)
        except RuntimeError as e:
            return DecodeError(f"batch item {k}: {describe_failure(bytes(blob.cpu().numpy()), e)}")
    return None
