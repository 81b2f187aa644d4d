"""A JPEG's EXIF orientation read from its bytes, and that orientation applied to decoded pixels.

A decoder that is not Pillow (simplejpeg, TurboJPEG) knows nothing of EXIF, so a phone photo taken upright
would come out on its side. Parsing the markers up to the first scan costs microseconds where opening
the file with Pillow costs as much as decoding a small image; the tests hold both readers equal.
"""

from __future__ import annotations

import struct

import numpy as np

_STANDALONE = {0x01, *range(0xD0, 0xD9)}  # TEM, RSTn, SOI: markers with no length field
_START_OF_SCAN = 0xDA
_APP1 = 0xE1
_ORIENTATION_TAG = 0x0112
_SHORT = 3


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation (1-8) of the JPEG ``data``: 1 where there is none, or it cannot be read.

    As Pillow does, only the first APP1 segment that starts ``Exif\\0\\0`` counts.
    """
    exif = _first_exif(data)
    return 1 if exif is None else _orientation_in_tiff(exif)


def _first_exif(data: bytes) -> bytes | None:
    if data[:2] != b"\xff\xd8":
        return None
    pos, end = 2, len(data)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None  # not a marker where one must be: a damaged header
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker == _START_OF_SCAN:
            return None
        length = (data[pos + 2] << 8) | data[pos + 3]
        if length < 2:
            return None
        if marker == _APP1 and data[pos + 4 : pos + 10] == b"Exif\x00\x00":
            return bytes(data[pos + 10 : pos + 2 + length])
        pos += 2 + length
    return None


def _orientation_in_tiff(tiff: bytes) -> int:
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 1
    (ifd,) = struct.unpack_from(order + "I", tiff, 4)
    if ifd + 2 > len(tiff):
        return 1
    (count,) = struct.unpack_from(order + "H", tiff, ifd)
    for k in range(count):
        entry = ifd + 2 + 12 * k
        if entry + 12 > len(tiff):
            return 1
        tag, kind = struct.unpack_from(order + "HH", tiff, entry)
        if tag == _ORIENTATION_TAG:
            (value,) = struct.unpack_from(order + "H", tiff, entry + 8)
            return value if kind == _SHORT and 1 <= value <= 8 else 1
    return 1


def rotates(orientation: int) -> bool:
    """Whether ``orientation`` swaps height and width (a quarter turn, or a transpose)."""
    return orientation in (5, 6, 7, 8)


def orient(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """H×W×C ``pixels`` as stored → as displayed: what Pillow's ``ImageOps.exif_transpose`` does, as a
    view (no copy)."""
    if orientation == 2:
        return pixels[:, ::-1]
    if orientation == 3:
        return pixels[::-1, ::-1]
    if orientation == 4:
        return pixels[::-1]
    if orientation == 5:
        return pixels.transpose(1, 0, 2)
    if orientation == 6:
        return pixels.transpose(1, 0, 2)[:, ::-1]
    if orientation == 7:
        return pixels.transpose(1, 0, 2)[::-1, ::-1]
    if orientation == 8:
        return pixels.transpose(1, 0, 2)[::-1]
    return pixels
