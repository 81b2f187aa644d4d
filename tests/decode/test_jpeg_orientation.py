"""The EXIF orientation read from a JPEG's bytes: the same as Pillow's reading on every file, any bytes read
without an exception, and each orientation applied as Pillow's ``exif_transpose`` applies it."""

import io
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from labkit.decode.jpeg_orientation import exif_orientation, orient, rotates
from labkit.decode.pil_decoders import EXIF_ORIENTATION

PIXELS = np.random.default_rng(0).integers(0, 256, (6, 10, 3), dtype=np.uint8)


def _jpeg(orientation=None, extra_tags=0) -> bytes:
    exif = Image.Exif()
    for k in range(extra_tags):
        exif[0x0100 + k] = 7 + k  # ImageWidth, ImageLength, BitsPerSample...: entries before the orientation
    if orientation is not None:
        exif[EXIF_ORIENTATION] = orientation
    buf = io.BytesIO()
    kw = {"exif": exif.tobytes()} if orientation is not None or extra_tags else {}
    Image.fromarray(PIXELS).save(buf, "JPEG", quality=95, **kw)
    return buf.getvalue()


def _big_endian(orientation: int) -> bytes:
    """A JPEG whose EXIF is Motorola order (``MM``), as many cameras write it."""
    tiff = (
        b"MM\x00*"
        + struct.pack(">I", 8)
        + struct.pack(">H", 1)
        + struct.pack(">HHIHH", EXIF_ORIENTATION, 3, 1, orientation, 0)
        + b"\0" * 4
    )
    app1 = b"Exif\x00\x00" + tiff
    plain = _jpeg()
    return plain[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + plain[2:]


def _pillows(data: bytes) -> int:
    return Image.open(io.BytesIO(data)).getexif().get(EXIF_ORIENTATION, 1)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(orientation=st.integers(1, 8), extra=st.integers(0, 4))
def test_the_orientation_is_pillows(orientation, extra):
    data = _jpeg(orientation, extra_tags=extra)
    assert exif_orientation(data) == _pillows(data) == orientation


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_motorola_byte_order_is_read(orientation):
    data = _big_endian(orientation)
    assert exif_orientation(data) == _pillows(data) == orientation


def test_a_jpeg_without_exif_is_upright():
    assert exif_orientation(_jpeg()) == 1


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_any_bytes_are_read_without_an_exception(data):
    assert 1 <= exif_orientation(data) <= 8
    assert 1 <= exif_orientation(b"\xff\xd8\xff\xe1" + data) <= 8


@settings(max_examples=200)
@given(cut=st.integers(0, 400))
def test_a_cut_short_header_is_upright_or_its_orientation(cut):
    data = _jpeg(6)
    assert exif_orientation(data[:cut]) in (1, 6)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orient_is_exif_transpose(orientation):
    data = _jpeg(orientation)
    stored = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    shown = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"))
    assert np.array_equal(orient(stored, orientation), shown)
    assert rotates(orientation) == (shown.shape[:2] != stored.shape[:2])
