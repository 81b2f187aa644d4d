"""The simplejpeg decoder against Pillow's: every kind of JPEG, the power-of-two scale it decodes at, what it
hands to Pillow, and the errors it gives."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from labkit.decode import simplejpeg_decoder
from labkit.decode.crop_box import CropBox, crop_resize_flip
from labkit.decode.decoder_contract import DecodeError, DecompressionBombError
from labkit.decode.pil_crop import crop_pil_reduced
from labkit.decode.pil_decoders import EXIF_ORIENTATION
from labkit.decode.registry import decode_image
from labkit.decode.resize import psnr
from labkit.decode.simplejpeg_decoder import crop_region, crop_simplejpeg, decode_simplejpeg
from labkit.harness.synthetic_data import PhotoSpec, encode_sample, plan_sample

#: simplejpeg's resized output against pil-reduced's (the same DCT scale, torch's resize on both): the stated bound.
RESIZED_DB = 40


def _photo(width=400, height=300, index=0) -> bytes:
    spec = PhotoSpec(n=index + 1, width=width, height=height)
    return encode_sample(spec, plan_sample(spec, index))


def _resave(data: bytes, mode=None, **kw) -> bytes:
    img = Image.open(io.BytesIO(data))
    img = img.convert(mode) if mode else img
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90, **kw)
    return buf.getvalue()


def _rotated(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    return _resave(_photo(), exif=exif)


KINDS = {
    "rgb 4:2:0": _photo(),
    "rgb 4:4:4": _resave(_photo(), subsampling=0),
    "grey": _resave(_photo(), "L"),
    "progressive": _resave(_photo(), progressive=True),
    **{f"exif {o}": _rotated(o) for o in range(2, 9)},
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_full_size_decode_gives_pillows_pixels(kind):
    data = KINDS[kind]
    assert torch.equal(decode_simplejpeg(data, None), decode_image(data, None, "pil"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_resized_decode_matches_pil_reduced_within_the_stated_psnr(kind):
    data = KINDS[kind]
    ours = decode_simplejpeg(data, (128, 96))
    assert ours.shape == (3, 128, 96) and ours.is_contiguous()
    assert psnr(ours, decode_image(data, (128, 96), "pil-reduced")) >= RESIZED_DB


def test_it_decodes_at_the_power_of_two_scale_the_output_allows(monkeypatch):
    scales = []
    real = simplejpeg_decoder.decode_scaled
    monkeypatch.setattr(
        simplejpeg_decoder, "decode_scaled", lambda data, h, w, s: scales.append(s) or real(data, h, w, s)
    )
    data = _photo(800, 600)
    for size in [(256, 256), (150, 200), (75, 100), (74, 99), (600, 800), (700, 900)]:
        decode_simplejpeg(data, size)
    assert scales == [2, 4, 8, 8, 1, 1]
    assert real(data, 600, 800, 2).shape == (300, 400, 3)
    assert real(data, 600, 800, 8).shape == (75, 100, 3)  # not the 3/8-7/8 scales simplejpeg picks by itself


def test_a_rotated_photo_is_scaled_by_its_displayed_size(monkeypatch):
    scales = []
    real = simplejpeg_decoder.decode_scaled
    monkeypatch.setattr(
        simplejpeg_decoder, "decode_scaled", lambda data, h, w, s: scales.append(s) or real(data, h, w, s)
    )
    data = _rotated(6)  # stored 400x300, shown 300 wide and 400 high
    assert decode_simplejpeg(data, (200, 150)).shape == (3, 200, 150)
    assert scales == [2]


@pytest.mark.parametrize("kind", ["cmyk", "png"])
def test_what_simplejpeg_does_not_read_goes_to_pillow(kind, monkeypatch):
    monkeypatch.setattr(simplejpeg_decoder, "decode_scaled", lambda *a: pytest.fail("simplejpeg was asked"))
    if kind == "cmyk":
        data = _resave(_photo(), "CMYK")
    else:
        buf = io.BytesIO()
        Image.open(io.BytesIO(_photo())).save(buf, "PNG")
        data = buf.getvalue()
    assert torch.equal(decode_simplejpeg(data, (64, 64)), decode_image(data, (64, 64), "pil-reduced"))
    box = CropBox(10, 20, 200, 250, True, (300, 400))
    assert torch.equal(
        crop_simplejpeg(data, lambda h, w: box, (64, 64)), crop_pil_reduced(data, lambda h, w: box, (64, 64))
    )


def test_a_cut_short_jpeg_is_a_decode_error_naming_its_bytes():
    data = _photo()
    with pytest.raises(DecodeError, match=rf"cannot decode JPEG \({len(data) // 2} bytes starting"):
        decode_simplejpeg(data[: len(data) // 2], 64)


def test_a_header_over_max_pixels_is_refused_before_decoding():
    with pytest.raises(DecompressionBombError, match="400x300 = 120,000 pixels, over the limit of 1,000"):
        decode_simplejpeg(_photo(), 64, max_pixels=1000)


def test_the_crop_is_drawn_for_the_displayed_size_and_flipped():
    data = _rotated(8)
    seen = []
    box = CropBox(40, 30, 300, 200, True, (400, 300))
    out = crop_simplejpeg(data, lambda h, w: seen.append((h, w)) or box, (100, 80))
    assert seen == [(400, 300)] and out.shape == (3, 100, 80)
    assert psnr(out, crop_resize_flip(decode_image(data, None, "pil"), box, (100, 80))) >= 27


def test_a_scaled_box_is_cut_on_whole_decoded_pixels():
    pixels = np.arange(50 * 60 * 3, dtype=np.uint8).reshape(50, 60, 3)  # a decode at 1/2 of a 100x120 image
    box = CropBox(10, 21, 40, 60, False, (100, 120))
    out = crop_region(pixels, box, (20, 30))
    region = torch.from_numpy(pixels[5:25, 10:40].copy()).permute(2, 0, 1)  # 21 / 2 = 10.5 rounds to 10
    assert torch.equal(out, region.contiguous())
