"""labkit.decode.pil_decoders: the packing check fails exactly when a full decode fails, and refuses bombs."""

import io

import pytest
from conftest import encoded, jpeg_claiming, photo_jpeg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from labkit.decode.decoder_contract import (
    DecodeError,
    DecompressionBombError,
)
from labkit.decode.pil_decoders import check_decodable
from labkit.decode.registry import decode_image


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
        photo_jpeg(96, 64)
        if kind == "JPEG"
        else encoded(
            Image.open(io.BytesIO(photo_jpeg(96, 64))).convert("L")
            if kind == "grey JPEG"
            else Image.new("RGB", (96, 64)),
            "JPEG" if kind == "grey JPEG" else "PNG",
        )
    )
    data = bytearray(photo[: max(1, int(len(photo) * cut))])
    for where, xor in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= xor
    assert _fails(lambda: check_decodable(bytes(data))) == _fails(lambda: decode_image(bytes(data), None, "pil"))


def test_the_packing_check_refuses_bombs_from_the_header():
    with pytest.raises(DecompressionBombError, match="900000000|30000x30000"):
        check_decodable(jpeg_claiming(30000, 30000))
    check_decodable(photo_jpeg())
