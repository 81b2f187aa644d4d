"""labkit.decode.pil_decoders: the packing check fails exactly when a full decode fails, and refuses bombs."""

import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from labkit.bench.synthetic_data import PhotoSpec, encode_sample, plan_sample
from labkit.decode.decoder_contract import (
    DecodeError,
    DecompressionBombError,
)
from labkit.decode.pil_decoders import check_decodable
from labkit.decode.registry import DECODERS, decode_image

ALL = list(DECODERS)


def _photo(width=400, height=300, index=0) -> bytes:
    spec = PhotoSpec(n=index + 1, width=width, height=height)
    return encode_sample(spec, plan_sample(spec, index))


def _encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _jpeg_claiming(width: int, height: int) -> bytes:
    data = bytearray(_encode(Image.new("RGB", (16, 16)), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


_RUN_TO_RUN_NOISE = re.compile(r"0x[0-9a-fA-F]{6,}|\.(cpp|cu|h):\d+")


def _fails(call) -> bool:
    try:
        call()
    except DecodeError:
        return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["JPEG", "grey JPEG", "PNG"]),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), max_size=4),
)
def test_the_packing_check_fails_exactly_when_a_full_decode_fails(kind, cut, flips):
    """`check_decodable` decodes a JPEG at 1/8 scale to save time: a file cut short or with bytes
    changed must fail it exactly when it fails the full decode."""
    photo = (
        _photo(96, 64)
        if kind == "JPEG"
        else _encode(
            Image.open(io.BytesIO(_photo(96, 64))).convert("L") if kind == "grey JPEG" else Image.new("RGB", (96, 64)),
            "JPEG" if kind == "grey JPEG" else "PNG",
        )
    )
    data = bytearray(photo[: max(1, int(len(photo) * cut))])
    for where, xor in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= xor
    assert _fails(lambda: check_decodable(bytes(data))) == _fails(lambda: decode_image(bytes(data), None, "pil"))


def test_the_packing_check_refuses_bombs_from_the_header():
    with pytest.raises(DecompressionBombError, match="900000000|30000x30000"):
        check_decodable(_jpeg_claiming(30000, 30000))
    check_decodable(_photo())
