"""The TurboJPEG 3 region decoder: the same bytes as simplejpeg's crop at every DCT scale and JPEG kind, what it
hands on, and its errors. It needs a libturbojpeg 3, which Debian 12 does not ship (it has libjpeg-turbo 2.1.5)
and no properly licensed PyPI wheel bundles: there these tests skip, saying so, and only the listing is tested."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from labkit.decode import registry, turbojpeg_region
from labkit.decode.crop_box import CropBox
from labkit.decode.decoder_contract import DecodeError, DecompressionBombError
from labkit.decode.pil_decoders import EXIF_ORIENTATION
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.simplejpeg_decoder import crop_simplejpeg
from labkit.harness.synthetic_data import PhotoSpec, encode_sample, plan_sample

needs_library = pytest.mark.skipif(
    not turbojpeg_region.available(),
    reason=f"no libturbojpeg with the TurboJPEG 3 API here (Debian 12 ships libjpeg-turbo 2.1.5; no properly licensed "
    f"wheel on PyPI bundles 3.x): set {turbojpeg_region.LIBRARY_ENV}=/path/to/libturbojpeg.so.0 to run these",
)


def _photo(width=800, height=600, index=0, **save) -> bytes:
    spec = PhotoSpec(n=index + 1, width=width, height=height)
    data = encode_sample(spec, plan_sample(spec, index))
    if not save:
        return data
    mode = save.pop("mode", None)
    img = Image.open(io.BytesIO(data))
    buf = io.BytesIO()
    (img.convert(mode) if mode else img).save(buf, "JPEG", quality=90, **save)
    return buf.getvalue()


def test_it_is_listed_exactly_where_its_library_loads():
    assert ("turbojpeg" in registry.DECODERS) == turbojpeg_region.available()
    if not turbojpeg_region.available():
        assert "libjpeg-turbo 3" in registry.MISSING["turbojpeg"]


def test_a_library_without_the_turbojpeg_3_api_is_not_taken(tmp_path):
    assert turbojpeg_region.load_library(str(tmp_path / "no-such-library.so")) is None
    libc = __import__("ctypes").util.find_library("c")
    assert libc is None or turbojpeg_region.load_library(libc) is None  # loads, but has no tj3SetCroppingRegion


@needs_library
@pytest.mark.parametrize("kind", [{}, {"subsampling": 0}, {"mode": "L"}, {"progressive": True}])
def test_the_region_gives_simplejpegs_bytes_for_every_box(kind):
    data = _photo(**kind)
    crop = RandomResizedCrop(224, seed=4)
    for index in range(12):

        def draw(h, w, index=index):
            return crop.draw(h, w, index)

        assert torch.equal(
            turbojpeg_region.crop_turbojpeg(data, draw, (224, 224)), crop_simplejpeg(data, draw, (224, 224))
        ), index


@needs_library
@pytest.mark.parametrize(
    "box",
    [
        CropBox(0, 0, 600, 800, False, (600, 800)),
        CropBox(592, 790, 8, 10, True, (600, 800)),
        CropBox(300, 3, 250, 37, False, (600, 800)),
        CropBox(17, 401, 580, 399, True, (600, 800)),
    ],
)
def test_boxes_at_the_edges_and_every_scale(box):
    data = _photo()
    for out in [(224, 224), (64, 64), (8, 8)]:
        assert torch.equal(
            turbojpeg_region.crop_turbojpeg(data, lambda h, w: box, out), crop_simplejpeg(data, lambda h, w: box, out)
        )


@needs_library
def test_rotated_cmyk_and_png_files_take_simplejpegs_crop(monkeypatch):
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = 6
    rotated, cmyk = _photo(exif=exif), _photo(mode="CMYK")
    buf = io.BytesIO()
    Image.open(io.BytesIO(_photo(200, 150))).save(buf, "PNG")
    handed = []
    monkeypatch.setattr(turbojpeg_region, "crop_simplejpeg", lambda data, *a: handed.append(data) or torch.zeros(1))
    box = CropBox(0, 0, 100, 100, False, (150, 200))
    for data in (rotated, cmyk, buf.getvalue()):
        turbojpeg_region.crop_turbojpeg(data, lambda h, w: box, (32, 32))
    assert handed == [rotated, cmyk, buf.getvalue()]


@needs_library
def test_a_cut_short_jpeg_and_a_bomb_are_refused():
    data = _photo()
    box = CropBox(0, 0, 500, 500, False, (600, 800))
    with pytest.raises(DecodeError, match="cannot decode JPEG"):
        turbojpeg_region.crop_turbojpeg(data[: len(data) // 2], lambda h, w: box, (224, 224))
    with pytest.raises(DecompressionBombError, match="over the limit of 1,000"):
        turbojpeg_region.crop_turbojpeg(data, lambda h, w: box, (224, 224), max_pixels=1000)


@needs_library
def test_threads_decode_with_a_handle_each():
    from concurrent.futures import ThreadPoolExecutor

    data = _photo()
    crop = RandomResizedCrop(96, seed=1)
    with ThreadPoolExecutor(4) as pool:
        ours = list(
            pool.map(
                lambda i: turbojpeg_region.crop_turbojpeg(data, lambda h, w: crop.draw(h, w, i), (96, 96)), range(16)
            )
        )
    assert all(
        torch.equal(o, crop_simplejpeg(data, lambda h, w, i=i: crop.draw(h, w, i), (96, 96)))
        for i, o in enumerate(ours)
    )
    assert np.mean([o.float().mean() for o in ours]) > 0
