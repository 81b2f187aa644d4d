"""Encoded image bytes → uint8 C×H×W tensor of a target size (seed section 2.1: the costliest step): the decode
backends on Pillow, torchvision, torchcodec and nvJPEG, and the contract every decoder keeps.

The decoders on Pillow, torchvision and torchcodec, with one contract, so a lab can swap them and measure
(`labkit.decode.registry` lists every decoder, ``simplejpeg`` included, one record each):

``pil``          full decode, then resize — the seed's baseline (``Image.open(...).convert('RGB')``
                 followed by ``Resize((256, 256))``).
``pil-reduced``  asks libjpeg for a DCT-scaled decode (``Image.draft``) at the smallest scale
                 that is still no smaller than the target, then resizes with torch's antialiased
                 uint8 kernel. An 800×600 JPEG for a 256×256 output decodes at 400×300: a quarter
                 of the pixels. (Measured on a 2-core VM: torch's vectorised resize takes ~1 ms
                 less per image than PIL's, for the same pixels to within 75 dB PSNR.)
``torchvision``  ``torchvision.io.decode_image`` (libjpeg-turbo, libpng) and an antialiased
                 resize on the uint8 tensor; formats it cannot read (BMP, TIFF, ...) go through PIL.
``torchcodec``   ``torchcodec.decoders.decode_image``, which supersedes torchvision's image decoders
                 (deprecated in torchvision 0.29), then the same resize. Listed only where the optional
                 ``torchcodec`` package imports (``pip install torch-labkit[torchcodec]``; its image decoders
                 need no system library: FFmpeg is for its video decoders only).

Every decoder returns RGB whatever the file holds (grayscale, CMYK, palette, alpha — the alpha
channel is dropped, as ``ImageFolder`` does), applies the EXIF orientation, and refuses an image
whose header claims more than ``max_pixels`` before allocating anything for it.
"""

from __future__ import annotations

import importlib.util
import io
import math
import platform
import re
import warnings
from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from PIL import Image, ImageOps

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.torch_internals import antialiased_bilinear
from labkit.decode.jpeg_orientation import rotates
from labkit.decode.stage_laps import StageLaps, lap

Size = Union[int, Tuple[int, int], Sequence[int], None]
#: The output side the seed's ablation decodes to (``Resize((256, 256))``), every decoder's default.
OUTPUT_SIZE = 256

#: Largest image (in pixels) a decoder accepts unless told otherwise: Pillow's own default.
MAX_PIXELS = 89_478_485
EXIF_ORIENTATION = 0x0112
TORCHVISION_FORMATS = {"JPEG", "PNG", "GIF", "WEBP"}
#: What torchcodec reads natively (AVIF and HEIC too, but Pillow cannot parse their headers here).
TORCHCODEC_FORMATS = {"JPEG", "PNG", "GIF", "WEBP"}


class DecodeError(LabkitError, ValueError):
    """The bytes are not an image this decoder can read (truncated, empty, not an image...)."""


class DecompressionBombError(DecodeError):
    """The image header claims more pixels than the decoder's ``max_pixels``."""


def output_hw_of(size: Size) -> Tuple[int, int]:
    """`target_hw` of a crop's ``size``, which names an output (never None: refused when the crop is made)."""
    hw = target_hw(size)
    if hw is None:
        raise LabkitValueError("a crop needs an output size (an int or (height, width)), not None")
    return hw


def target_hw(size: Size) -> Optional[Tuple[int, int]]:
    """``256`` → ``(256, 256)``; ``(h, w)`` stays; ``None`` means keep the decoded size."""
    if size is None:
        return None
    whole = (int, np.integer)
    if isinstance(size, whole) and not isinstance(size, bool):
        hw = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(s, whole) for s in size):
        hw = (int(size[0]), int(size[1]))
    else:
        raise LabkitTypeError(f"size={size!r}: give whole pixels, an int (a square) or (height, width), e.g. "
                              f"size=224 or size=(224, 320)")
    if min(hw) < 1:
        raise LabkitValueError(f"size must be positive, got {size!r}")
    return hw  # type: ignore[return-value]


_OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")
_SOURCE_LOCATION = re.compile(r"^[\w:()<>~]*,\s*\S+\.(?:c|cc|cpp|cu|h|hpp):\d+,\s*")
_PLAIN_REASONS = {"cannot identify image file": "Pillow recognised no image format in it (not an image, or a "
                                                "damaged header)"}


def _describe(data: bytes) -> str:
    if not data:
        return "0 bytes: an empty file"
    return f"{len(data)} bytes starting {bytes(data[:12])!r}"


def _reason(error: BaseException) -> str:
    """A library's error text without what changes from run to run or build to build: the repr of the
    in-memory file Pillow was handed (``<_io.BytesIO object at 0x7f...>``), a C++ source location."""
    text = _SOURCE_LOCATION.sub("", _OBJECT_REPR.sub("", str(error)).strip())
    return _PLAIN_REASONS.get(text, text)


def describe_failure(data: bytes, error: BaseException, what: str = "cannot decode image") -> str:
    """``what (size and first bytes): reason``: the same text for the same bytes on every run, so
    logs and reports can be compared."""
    return f"{what} ({_describe(data)}): {_reason(error)}"


def open_image(data: bytes, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """Parse the header only (no pixels decoded) and refuse decompression bombs."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise DecompressionBombError(f"Pillow refused it from the header ({_reason(e)}). If the image is genuine, pass a "
                                     "larger max_pixels and raise PIL.Image.MAX_IMAGE_PIXELS") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, "not a readable image")) from None
    refuse_oversized(*img.size, max_pixels)
    return img


def refuse_oversized(width: int, height: int, max_pixels: int) -> None:
    """Raise `DecompressionBombError` where a header claims more than ``max_pixels``: before any pixel is allocated."""
    if width * height > max_pixels:
        raise DecompressionBombError(
            f"header claims {width}x{height} = {width * height:,} pixels, over the limit of {max_pixels:,} "
            "(a decompression bomb, or a genuinely huge image: then pass a larger max_pixels)")


def pil_orientation(img: Image.Image) -> int:
    """The EXIF orientation of an opened image (1, as stored, where it has none): read from the header alone."""
    return img.getexif().get(EXIF_ORIENTATION, 1)


def chw(pixels: np.ndarray) -> torch.Tensor:
    """An H×W×3 uint8 array as a (3, H, W) tensor view: channels-last memory, which torch's resize keeps."""
    return torch.from_numpy(pixels).permute(2, 0, 1)


def pil_chw(img: Image.Image) -> torch.Tensor:
    """An RGB Pillow image's pixels as a (3, H, W) uint8 tensor view of one copy of them."""
    return chw(np.array(img, dtype=np.uint8))


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


def torchvision_io():
    """``torchvision.io``, imported on first use: a worker that starts fresh (spawn, forkserver) and
    decodes with Pillow never pays its import, a second on a laptop. `get_decoder` imports it in the
    parent for the decoders that need it, so a forked worker inherits it instead of paying on its first image."""
    import torchvision.io

    return torchvision.io


#: Whether torch's CPU kernel resizes uint8 bytes as they are (vectorised on AVX2, AVX-512 and ARM).
NATIVE_UINT8_RESIZE = (torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
                 or platform.machine() in ("aarch64", "arm64"))


def resize_uint8(image: torch.Tensor, hw: Tuple[int, int]) -> torch.Tensor:
    """Antialiased bilinear resize of a uint8 (..., C, H, W) tensor: what torchvision's
    ``F.resize(image, hw, antialias=True)`` gives, bit for bit, from torch alone (see `torchvision_io`).

    On a CPU with torch's vectorised uint8 kernel (AVX2, AVX-512, ARM) the bytes are resized as they
    are, keeping a channels-last input channels-last (a pixel view of a Pillow image needs no copy);
    elsewhere (other CPUs, CUDA) through float32 and rounded back, as torchvision does.
    """
    channels, height, width = image.shape[-3:]
    if (height, width) == tuple(hw):
        return image
    batch = image.reshape(-1, channels, height, width)
    strides = batch.stride()
    if batch.is_contiguous(memory_format=torch.channels_last) and batch.shape[0] == 1 and image.numel() != strides[0]:
        # torch allocates a 1×C×H×W channels-last input's output as contiguous unless the batch stride says otherwise
        batch = batch.as_strided(batch.shape, (image.numel(),) + strides[1:])
    # torch's uint8 kernel fails an internal assert on a 1×1 output from a channels-first input (torch 2.14)
    if NATIVE_UINT8_RESIZE and image.device.type == "cpu" and tuple(hw) != (1, 1):
        out = antialiased_bilinear(batch, hw)
    else:
        out = antialiased_bilinear(batch.float(), hw).round_().to(torch.uint8)
    return out.reshape(image.shape[:-3] + (channels, *hw))


def _decode_with_pil(data: bytes, size: Size, max_pixels: int, reduced: bool,
                     laps: Optional[StageLaps] = None) -> torch.Tensor:
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


def decode_pil(data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS,
               laps: Optional[StageLaps] = None) -> torch.Tensor:
    """Full PIL decode, then bilinear resize to ``size`` (the seed's baseline)."""
    return _decode_with_pil(data, size, max_pixels, False, laps)


def decode_pil_reduced(data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS,
                       laps: Optional[StageLaps] = None) -> torch.Tensor:
    """JPEG DCT-domain downscale (``Image.draft``) to no less than ``size``, then torch's uint8 resize."""
    return _decode_with_pil(data, size, max_pixels, True, laps)


def check_decodable(data: bytes, max_pixels: int = MAX_PIXELS) -> None:
    """Raise `DecodeError` (or `DecompressionBombError`) unless every byte of ``data`` decodes.

    What `labkit pack` runs on each file: a JPEG is decoded at 1/8 scale, which still walks
    its whole entropy-coded stream (a cut-short or corrupt file fails) but skips most of the
    inverse DCT, colour conversion and resize: 2x faster than a reduced decode on small images.
    """
    img = open_image(data, max_pixels)
    try:
        img.getexif()  # parsed by every full decode, for the orientation
        if img.format == "JPEG":
            img.draft(img.mode, (1, 1))
        img.load()
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {img.format or 'image'}")) from None


def _finish(img: torch.Tensor, size: Size, laps: Optional[StageLaps]) -> torch.Tensor:
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


def decode_torchvision(data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS,
                       laps: Optional[StageLaps] = None) -> torch.Tensor:
    """libjpeg-turbo / libpng through ``torchvision.io``, antialiased bilinear resize on uint8."""
    header = open_image(data, max_pixels)
    if header.format not in TORCHVISION_FORMATS or header.mode == "CMYK":
        return _decode_with_pil(data, size, max_pixels, False, laps)
    try:
        tvio = torchvision_io()
        img = tvio.decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                mode=tvio.ImageReadMode.RGB, apply_exif_orientation=True)
    except RuntimeError as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {header.format}")) from None
    return _finish(img, size, laps)


def torchcodec_available() -> bool:
    """Whether the optional ``torchcodec`` package is installed (the ``torchcodec`` decoder needs it)."""
    return importlib.util.find_spec("torchcodec") is not None


def _require_torchcodec() -> None:
    if not torchcodec_available():
        raise LabkitError("the torchcodec decoder needs the torchcodec package: pip install 'torch-labkit[torchcodec]' "
                          "(or choose another decoder)")


def decode_torchcodec(data: bytes, size: Size = OUTPUT_SIZE, max_pixels: int = MAX_PIXELS,
                      laps: Optional[StageLaps] = None) -> torch.Tensor:
    """``torchcodec.decoders.decode_image`` (torchvision's successor; it applies the EXIF orientation),
    antialiased bilinear resize on uint8."""
    _require_torchcodec()
    from torchcodec.decoders import decode_image as torchcodec_decode_image

    header = open_image(data, max_pixels)
    if header.format not in TORCHCODEC_FORMATS or header.mode == "CMYK":
        return _decode_with_pil(data, size, max_pixels, False, laps)
    try:
        img = torchcodec_decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode="RGB",
                                      output_dtype="auto")
    except (RuntimeError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {header.format}")) from None
    if img.dim() == 4:  # an animated GIF or WebP: the first frame, as Pillow and torchvision give
        img = img[0]
    return _finish(img, size, laps)


def decode_jpeg_batch(blobs: Sequence[torch.Tensor], size: Size = OUTPUT_SIZE,
                      device: Union[str, torch.device] = "cuda") -> torch.Tensor:
    """A batch of JPEG files (uint8 byte tensors) → uint8 N×3×H×W decoded and resized on ``device``.

    On CUDA this is nvJPEG through ``torchvision.io.decode_jpeg(..., device="cuda")``, one call
    for the whole batch: decoding leaves the CPU entirely. Only JPEG; check with
    ``labkit verify`` and a decode on the CPU first for anything else.
    """
    tvio = torchvision_io()
    try:
        images = tvio.decode_jpeg(list(blobs), mode=tvio.ImageReadMode.RGB, device=device)
    except RuntimeError as e:
        raise _first_undecodable(blobs, device) or DecodeError(f"batch of {len(blobs)}: {_reason(e)}") from None
    hw = target_hw(size)
    if hw is not None:
        images = [resize_uint8(img, hw) for img in images]
    return torch.stack(images)


def _first_undecodable(blobs: Sequence[torch.Tensor], device: Union[str, torch.device]) -> Optional[DecodeError]:
    """The batch's first file that fails alone, named by its position, or None if each decodes alone."""
    tvio = torchvision_io()
    for k, blob in enumerate(blobs):
        try:
            tvio.decode_jpeg(blob, mode=tvio.ImageReadMode.RGB, device=device)
        except RuntimeError as e:
            return DecodeError(f"batch item {k}: {describe_failure(bytes(blob.cpu().numpy()), e)}")
    return None


Decoder = Callable[..., torch.Tensor]  #: (bytes, size, max_pixels, laps=None) -> uint8 (3, H, W)


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """Peak signal-to-noise ratio in dB between two uint8 images of one shape (inf when equal)."""
    if a.shape != b.shape:
        raise LabkitValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    mse = torch.mean((a.to(torch.float64) - b.to(torch.float64)) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)
