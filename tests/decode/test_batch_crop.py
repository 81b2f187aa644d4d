"""simplejpeg's loop over a share of a batch: the pixels of the per-sample crop for the same boxes, bit for bit,
for every kind of JPEG; what it does not decode handed back; what it cannot read reported, not raised."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from labkit.decode.batch_crop import crop_share_simplejpeg
from labkit.decode.center_crop import CenterCrop
from labkit.decode.crop_box import whole_images
from labkit.decode.pil_decoders import EXIF_ORIENTATION
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.simplejpeg_decoder import crop_simplejpeg, decode_simplejpeg
from labkit.harness.synthetic_data import PhotoSpec, encode_sample, plan_sample

pytest.importorskip("simplejpeg")


def _photo(width=400, height=300, index=0) -> bytes:
    spec = PhotoSpec(n=index + 1, width=width, height=height)
    return encode_sample(spec, plan_sample(spec, index))


def _resave(data: bytes, mode=None, fmt="JPEG", **kw) -> bytes:
    img = Image.open(io.BytesIO(data))
    img = img.convert(mode) if mode else img
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _rotated(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    return _resave(_photo(), exif=exif, quality=90)


JPEGS = [
    _photo(),
    _photo(160, 120, 1),
    _photo(641, 479, 2),
    _resave(_photo(), "L"),
    _resave(_photo(), progressive=True),
    _resave(_photo(), subsampling=0),
] + [_rotated(o) for o in range(2, 9)]
INDICES = np.arange(len(JPEGS)) * 5 + 2
EPOCHS = np.arange(len(JPEGS)) % 3


@pytest.mark.parametrize(
    "crop",
    [RandomResizedCrop(64, seed=4), RandomResizedCrop((48, 80), seed=1, flip=1.0), CenterCrop(64, resize=72), None],
    ids=["random", "flipped", "centre", "resize"],
)
def test_each_row_is_the_per_sample_crop_of_the_same_box(crop):
    out = torch.zeros(len(JPEGS), 3, *(crop.output_hw if crop else (56, 72)), dtype=torch.uint8)
    rows = list(range(len(JPEGS)))[::-1]

    def boxes_for(share, image_hw):
        return crop.draw_many(image_hw, INDICES[share], EPOCHS[share]) if crop else whole_images(image_hw)

    left = crop_share_simplejpeg(rows, JPEGS, boxes_for, out, 10**8)
    assert left.failed == [] and left.handed_back == []
    for k, data in enumerate(JPEGS):
        if crop is None:
            want = decode_simplejpeg(data, (56, 72))
        else:
            want = crop_simplejpeg(
                data, lambda h, w, k=k: crop.draw(h, w, int(INDICES[k]), int(EPOCHS[k])), crop.output_hw
            )
        assert torch.equal(out[k], want), k


def test_files_are_read_by_the_thread_and_what_it_cannot_do_is_left_to_the_caller(tmp_path):
    good = tmp_path / "good.jpg"
    good.write_bytes(_photo())
    sources = [
        str(good),
        str(tmp_path / "missing.jpg"),
        _resave(_photo(), fmt="PNG"),
        _resave(_photo(), "CMYK", quality=90),
        _photo()[:400],
        b"not an image at all",
        _photo(800, 600),
    ]
    crop = CenterCrop(32, resize=32)
    out = torch.zeros(len(sources), 3, 32, 32, dtype=torch.uint8)
    left = crop_share_simplejpeg(
        range(len(sources)), sources, lambda share, hw: crop.draw_many(hw), out, max_pixels=400 * 300
    )
    assert sorted(left.handed_back) == [2, 3, 5]  # a PNG, a CMYK JPEG, not an image: the per-sample path names it
    assert sorted(left.failed) == [1, 4, 6]  # missing, cut short, over max_pixels
    assert torch.equal(out[0], crop_simplejpeg(_photo(), lambda h, w: crop.draw(h, w), (32, 32)))
    assert not out[1:].any()
