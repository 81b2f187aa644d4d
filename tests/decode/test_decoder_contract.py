"""Every decoder keeps the contract: uint8 RGB C×H×W at the size asked, EXIF applied, bombs refused from the header,
errors that say what the bytes are and nothing that changes between runs."""

import numpy as np
import pytest
import torch
from conftest import RUN_TO_RUN_NOISE, encoded, jpeg_claiming, photo_jpeg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from labkit.decode.decoder_contract import (
    DecodeError,
    DecompressionBombError,
)
from labkit.decode.registry import DECODERS, decode_image, get_decoder
from labkit.decode.resize import psnr

ALL = list(DECODERS)


@pytest.mark.parametrize("decoder", ALL)
def test_uint8_chw_at_the_asked_size(decoder):
    data = photo_jpeg()
    assert decode_image(data, 64, decoder).shape == (3, 64, 64)
    out = decode_image(data, (48, 80), decoder)
    assert out.shape == (3, 48, 80) and out.dtype == torch.uint8 and out.is_contiguous()
    assert decode_image(data, None, decoder).shape == (3, 300, 400)


@pytest.mark.parametrize("decoder", ["pil-reduced", "torchvision"])
def test_faster_decoders_stay_close_to_pil(decoder):
    for index in range(3):
        data = photo_jpeg(800, 600, index)
        quality = psnr(decode_image(data, 256, "pil"), decode_image(data, 256, decoder))
        assert quality >= 30, f"{decoder} differs from pil by {quality:.1f} dB on image {index}"


def _modes():
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
    palette = rgb.convert("P", palette=Image.ADAPTIVE)
    palette.info["transparency"] = 0
    gray16 = Image.fromarray(np.full((24, 32), 40000, dtype=np.uint16))
    return {
        "grayscale jpeg": encoded(rgb.convert("L"), "JPEG"),
        "cmyk jpeg": encoded(rgb.convert("CMYK"), "JPEG"),
        "palette png with transparency": encoded(palette, "PNG"),
        "rgba png": encoded(rgb.convert("RGBA"), "PNG"),
        "la png": encoded(rgb.convert("LA"), "PNG"),
        "16-bit gray png": encoded(gray16, "PNG"),
        "bmp": encoded(rgb, "BMP"),
        "1-bit png": encoded(rgb.convert("1"), "PNG"),
    }


@pytest.mark.parametrize("decoder", ALL)
@pytest.mark.parametrize("kind", list(_modes()))
def test_every_mode_comes_out_rgb(decoder, kind):
    out = decode_image(_modes()[kind], None, decoder)
    assert out.shape == (3, 24, 32) and out.dtype == torch.uint8
    reference = decode_image(_modes()[kind], None, "pil")
    assert psnr(out, reference) >= 30, kind


@pytest.mark.parametrize("decoder", ALL)
def test_sixteen_bit_is_scaled_not_clipped(decoder):
    out = decode_image(_modes()["16-bit gray png"], None, decoder)
    assert abs(int(out.float().mean()) - 40000 // 256) <= 1


@pytest.mark.parametrize("decoder", ALL)
def test_exif_orientation_is_applied(decoder):
    img = Image.new("RGB", (40, 20), "red")
    img.paste((0, 0, 255), (0, 0, 20, 20))  # blue on the left
    exif = Image.Exif()
    exif[0x0112] = 6  # stored rotated: display needs a 90° clockwise turn
    out = decode_image(encoded(img, "JPEG", exif=exif, quality=95), None, decoder)
    assert out.shape == (3, 40, 20)
    assert out[2, :15].float().mean() > 200 and out[0, 25:].float().mean() > 200  # blue now on top


@pytest.mark.parametrize("decoder", ALL)
def test_decompression_bombs_are_refused_from_the_header(decoder):
    with pytest.raises(DecompressionBombError, match="900000000|30000x30000"):
        decode_image(jpeg_claiming(30000, 30000), 256, decoder)
    with pytest.raises(DecompressionBombError, match="12000x9000"):  # under Pillow's own limit, over ours
        decode_image(jpeg_claiming(12000, 9000), 256, decoder)
    with pytest.raises(DecompressionBombError, match="max_pixels"):
        decode_image(photo_jpeg(), 256, decoder, max_pixels=1000)


@pytest.mark.parametrize("decoder", ALL)
@pytest.mark.parametrize(
    "data",
    [b"", b"<!DOCTYPE html><html></html>", b"\xff\xd8\xff" + b"\0" * 50],
    ids=["empty", "html", "jpeg-magic-only"],
)
def test_garbage_raises_decode_error(decoder, data):
    with pytest.raises(DecodeError, match=f"{len(data)} bytes") as e:
        decode_image(data, 32, decoder)
    assert "object at 0x" not in str(e.value)


@pytest.mark.parametrize("decoder", ALL)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    head=st.sampled_from([b"", b"\xff\xd8\xff\xe0", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"RIFF\0\0\0\0WEBP", b"BM"]),
    cut=st.floats(0.0, 1.0),
    junk=st.binary(max_size=64),
)
def test_every_decode_error_says_what_the_bytes_are_and_nothing_that_changes_between_runs(decoder, head, cut, junk):
    """Real files cut short, or a format's magic number followed by junk: the message gives the size and
    the first bytes, and no object address or C++ source location (noise that differs run to run)."""
    photo = photo_jpeg(64, 48) if head == b"\xff\xd8\xff\xe0" else encoded(Image.new("RGB", (64, 48), "red"), "PNG")
    for data in (photo[: int(len(photo) * cut)], head + junk):
        try:
            decode_image(data, 16, decoder)
        except DecodeError as e:
            assert f"{len(data)} bytes" in str(e) and not RUN_TO_RUN_NOISE.search(str(e)), str(e)


@pytest.mark.parametrize("decoder", ALL)
def test_truncated_jpeg_raises_decode_error(decoder):
    data = photo_jpeg()
    with pytest.raises(DecodeError):
        decode_image(data[: len(data) // 3], 64, decoder)


def test_unknown_decoder_names_the_choices():
    with pytest.raises(ValueError, match="pil-reduced"):
        get_decoder("fast")
