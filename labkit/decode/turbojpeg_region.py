"""The ``turbojpeg`` decoder: only the crop box's rows and columns decoded, by TurboJPEG 3 through ctypes.

A random-resized crop keeps 8-100 % of the image; on an 800×600 photo most boxes are too small for a DCT
reduction, so a DCT-scaled decoder still decodes every pixel. TurboJPEG 3 (libjpeg-turbo >= 3.0) can decode
a region (``tj3SetCroppingRegion``) at a DCT scale (``tj3SetScalingFactor``): the rows above the box are
skipped, those below never decoded, and only the columns of the box's iMCUs are produced. The region asked
for is the box widened by one iMCU on every side, snapped to whole iMCUs, so the box's edge pixels get the
same upsampling context as in a full decode: the tests hold the box's pixels equal to a full decode's.

The library is looked for at ``$LABKIT_TURBOJPEG``, then under its usual names. Where none with the
TurboJPEG 3 API loads (Debian 12 ships libjpeg-turbo 2.1.5), the decoder is not listed. Whole-image decodes
are simplejpeg's; EXIF-rotated, CMYK and YCCK JPEGs and other formats take simplejpeg's crop (or Pillow's).
ctypes releases the GIL for every call, so threads decode in parallel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable

import numpy as np
import torch

from labkit.decode.crop_box import CropBox, dct_scale
from labkit.decode.decoder_contract import MAX_PIXELS, DecodeError, describe_failure, refuse_oversized
from labkit.decode.jpeg_orientation import exif_orientation
from labkit.decode.simplejpeg_decoder import crop_region, crop_simplejpeg, is_jpeg

LIBRARY_ENV = "LABKIT_TURBOJPEG"
NAMES = ("libturbojpeg.so.0", "libturbojpeg.so", "libturbojpeg.0.dylib", "libturbojpeg.dylib", "turbojpeg.dll")
INSTALL = (
    f"libjpeg-turbo 3 (conda-forge's libjpeg-turbo, Homebrew's jpeg-turbo, or a build of 3.x), then "
    f"{LIBRARY_ENV}=/path/to/libturbojpeg.so.0 if it is not on the library path"
)

# turbojpeg.h (libjpeg-turbo 3.0)
_TJINIT_DECOMPRESS = 1
_TJPARAM_SUBSAMP, _TJPARAM_JPEGWIDTH, _TJPARAM_JPEGHEIGHT, _TJPARAM_COLORSPACE = 4, 5, 6, 8
_TJPF_RGB = 0
_TJCS_OWN = (0, 1, 2)  # RGB, YCbCr, grey; CMYK and YCCK go elsewhere
_MCU_WIDTH = (8, 16, 16, 8, 8, 32, 8)  # per TJSAMP: 444, 422, 420, GRAY, 440, 411, 441
_MCU_HEIGHT = (8, 8, 16, 8, 16, 8, 32)


class _ScalingFactor(ctypes.Structure):
    _fields_ = [("num", ctypes.c_int), ("denom", ctypes.c_int)]


class _Region(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("w", ctypes.c_int), ("h", ctypes.c_int)]


def load_library(path: str) -> ctypes.CDLL | None:
    """The TurboJPEG 3 library at ``path`` with the region decode this module needs; None where it does not load
    or has no ``tj3SetCroppingRegion`` (an older libturbojpeg)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    if not hasattr(lib, "tj3SetCroppingRegion"):
        return None  # libjpeg-turbo 2.x: no TurboJPEG 3 API
    lib.tj3Init.restype, lib.tj3Init.argtypes = ctypes.c_void_p, [ctypes.c_int]
    lib.tj3Get.restype, lib.tj3Get.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]
    lib.tj3DecompressHeader.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.tj3SetScalingFactor.argtypes = [ctypes.c_void_p, _ScalingFactor]
    lib.tj3SetCroppingRegion.argtypes = [ctypes.c_void_p, _Region]
    lib.tj3Decompress8.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    lib.tj3GetErrorStr.restype, lib.tj3GetErrorStr.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.tj3Destroy.argtypes = [ctypes.c_void_p]
    return lib


def find_library() -> ctypes.CDLL | None:
    """A loadable libturbojpeg with the TurboJPEG 3 API: ``$LABKIT_TURBOJPEG``, else the usual names; or None."""
    found = ctypes.util.find_library("turbojpeg")
    for path in (os.environ.get(LIBRARY_ENV), found, *NAMES):
        lib = load_library(path) if path else None
        if lib is not None:
            return lib
    return None


_LIB = find_library()
_HANDLES = threading.local()  # a TurboJPEG handle is not thread-safe: one per thread


def available() -> bool:
    """Whether a libturbojpeg 3 loaded here (else the decoder is not listed)."""
    return _LIB is not None


def _handle() -> int:
    handle = getattr(_HANDLES, "handle", None)
    if handle is None or getattr(_HANDLES, "pid", None) != os.getpid():
        handle = _LIB.tj3Init(_TJINIT_DECOMPRESS)  # type: ignore[union-attr]
        if not handle:
            raise DecodeError("TurboJPEG could not start a decompressor (out of memory?)")
        _HANDLES.handle, _HANDLES.pid = handle, os.getpid()
    return handle


def _fail(data: bytes, handle: int) -> DecodeError:
    reason = _LIB.tj3GetErrorStr(handle).decode(errors="replace")  # type: ignore[union-attr]
    return DecodeError(describe_failure(data, ValueError(reason), "cannot decode JPEG"))


def crop_turbojpeg(
    data: bytes, draw: Callable[[int, int], CropBox], output_hw: tuple[int, int], max_pixels: int = MAX_PIXELS
) -> torch.Tensor:
    """The box ``draw(height, width)`` gives, decoded alone (its iMCUs, one more on every side) at the DCT scale
    that keeps it at least ``output_hw``, then resized and flipped."""
    if not is_jpeg(data) or exif_orientation(data) != 1:
        return crop_simplejpeg(data, draw, output_hw, max_pixels)
    lib, handle, size = _LIB, _handle(), len(data)
    if lib.tj3DecompressHeader(handle, data, size) != 0:  # type: ignore[union-attr]
        raise _fail(data, handle)
    width, height = lib.tj3Get(handle, _TJPARAM_JPEGWIDTH), lib.tj3Get(handle, _TJPARAM_JPEGHEIGHT)  # type: ignore
    subsampling, colorspace = lib.tj3Get(handle, _TJPARAM_SUBSAMP), lib.tj3Get(handle, _TJPARAM_COLORSPACE)  # type: ignore
    if colorspace not in _TJCS_OWN or not 0 <= subsampling < len(_MCU_WIDTH):
        return crop_simplejpeg(data, draw, output_hw, max_pixels)
    refuse_oversized(width, height, max_pixels)
    box = draw(height, width)
    scale = dct_scale(box, output_hw)
    scaled_hw = (-(-height // scale), -(-width // scale))
    top, left, bottom, right = box.scaled(scaled_hw)
    mcu_w, mcu_h = max(1, _MCU_WIDTH[subsampling] // scale), max(1, _MCU_HEIGHT[subsampling] // scale)
    x0, y0 = max(0, (left // mcu_w - 1) * mcu_w), max(0, (top // mcu_h - 1) * mcu_h)
    x1, y1 = min(scaled_hw[1], (right // mcu_w + 2) * mcu_w), min(scaled_hw[0], (bottom // mcu_h + 2) * mcu_h)
    if (
        lib.tj3SetScalingFactor(handle, _ScalingFactor(1, scale)) != 0
        or lib.tj3SetCroppingRegion(handle, _Region(x0, y0, x1 - x0, y1 - y0)) != 0
    ):  # type: ignore[union-attr]
        raise _fail(data, handle)
    pixels = np.empty((y1 - y0, x1 - x0, 3), dtype=np.uint8)
    if lib.tj3Decompress8(handle, data, size, pixels.ctypes.data, 0, _TJPF_RGB) != 0:  # type: ignore[union-attr]
        raise _fail(data, handle)
    # The box, now relative to the decoded region, on the region's own grid of full-size pixels.
    shifted = CropBox(
        box.top - y0 * scale,
        box.left - x0 * scale,
        box.height,
        box.width,
        box.flip,
        ((y1 - y0) * scale, (x1 - x0) * scale),
    )
    return crop_region(pixels, shifted, output_hw)
