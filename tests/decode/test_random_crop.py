"""Random-resized crops drawn before the decode: torchvision's distribution of boxes, seeded per sample,
and the pixels of "full decode, crop, resize" within a stated tolerance."""

import io

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import RandomResizedCrop as TorchvisionCrop

from labkit.core.errors import LabkitError
from labkit.decode.crop_box import CropBox, crop_resize_flip, dct_scale
from labkit.decode.pil_decoders import EXIF_ORIENTATION
from labkit.decode.random_crop import RandomResizedCrop, decode_box
from labkit.decode.registry import DECODERS, crops_in_decode, decode_image
from labkit.decode.resize import psnr
from labkit.harness.synthetic_data import PhotoSpec, encode_sample, plan_sample

DRAWS = 4000
PIXEL_TOLERANCE_DB = 30  # the DCT-scaled decode against a full decode: the same bound as the pil-reduced decoder's
# simplejpeg rounds a scaled box's edges to whole decoded pixels (at most half of one: see its module)
CROP_TOLERANCE_DB = {"simplejpeg": 27, "turbojpeg": 27}


def _photo(width=800, height=600, index=0) -> bytes:
    spec = PhotoSpec(n=index + 1, width=width, height=height)
    return encode_sample(spec, plan_sample(spec, index))


def _ours(height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    crop = RandomResizedCrop(224, scale=scale, ratio=ratio, seed=1)
    return [crop.draw(height, width, index) for index in range(DRAWS)]


def _torchvision(height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    torch.manual_seed(1)
    image = torch.empty(3, height, width)
    return [TorchvisionCrop.get_params(image, list(scale), list(ratio)) for _ in range(DRAWS)]


def _histogram_gap(a, b, bins) -> float:
    """Total variation distance between two samples' histograms on ``bins``: 0 the same, 1 disjoint."""
    ha, _ = np.histogram(a, bins)
    hb, _ = np.histogram(b, bins)
    return 0.5 * np.abs(ha / len(a) - hb / len(b)).sum()


@pytest.mark.parametrize("hw", [(600, 800), (300, 1200), (64, 48)])
def test_boxes_follow_torchvisions_area_and_ratio_distributions(hw):
    height, width = hw
    ours = _ours(height, width)
    theirs = _torchvision(height, width)
    area = lambda boxes: [h * w / (height * width) for h, w in boxes]  # noqa: E731
    log_ratio = lambda boxes: [np.log(w / h) for h, w in boxes]  # noqa: E731
    our_hw = [(b.height, b.width) for b in ours]
    their_hw = [(h, w) for _, _, h, w in theirs]
    # 4000 draws each: sampling noise alone gave distances of 0.03 or less on 10 bins; a scale range of
    # (0.2, 1) instead of (0.08, 1) gave 0.18, a ratio range of (1/2, 2) 0.51 (checked below).
    assert _histogram_gap(area(our_hw), area(their_hw), np.linspace(0, 1, 11)) < 0.06
    assert _histogram_gap(log_ratio(our_hw), log_ratio(their_hw), np.linspace(-1.5, 1.5, 11)) < 0.06
    tops = [b.top / max(1, height - b.height) for b in ours if b.height < height]
    assert 0.4 < np.mean(tops) < 0.6  # the box's position is uniform over where it fits
    assert all(0 <= b.top and b.top + b.height <= height and 0 <= b.left and b.left + b.width <= width for b in ours)


def test_the_distribution_check_tells_a_different_scale_or_ratio_range_apart():
    theirs = [(h, w) for _, _, h, w in _torchvision(600, 800)]
    wider_scale = [(b.height, b.width) for b in _ours(600, 800, scale=(0.2, 1.0))]
    wider_ratio = [(b.height, b.width) for b in _ours(600, 800, ratio=(1 / 2, 2))]
    area = lambda boxes: [h * w / (600 * 800) for h, w in boxes]  # noqa: E731
    log_ratio = lambda boxes: [np.log(w / h) for h, w in boxes]  # noqa: E731
    assert _histogram_gap(area(wider_scale), area(theirs), np.linspace(0, 1, 11)) > 0.06
    assert _histogram_gap(log_ratio(wider_ratio), log_ratio(theirs), np.linspace(-1.5, 1.5, 11)) > 0.06


def test_an_image_too_narrow_for_any_ratio_falls_back_to_torchvisions_central_crop():
    box = RandomResizedCrop(8, scale=(0.9, 1.0)).draw(1000, 10, 0)  # no box of 90 % of the area fits
    torch.manual_seed(0)
    assert (box.top, box.left, box.height, box.width) == TorchvisionCrop.get_params(
        torch.empty(3, 1000, 10), [0.9, 1.0], [3 / 4, 4 / 3]
    )


def test_each_sample_draws_from_its_own_seed_so_order_and_workers_do_not_matter():
    crop = RandomResizedCrop(224, seed=3)
    forward = [crop.draw(600, 800, i, epoch=2) for i in range(50)]
    backward = [crop.draw(600, 800, i, epoch=2) for i in reversed(range(50))][::-1]
    assert forward == backward  # a resumed run, or another worker, draws the same box for the same sample
    assert forward != [crop.draw(600, 800, i, epoch=3) for i in range(50)]
    assert forward != [RandomResizedCrop(224, seed=4).draw(600, 800, i, epoch=2) for i in range(50)]
    flips = [crop.draw(600, 800, i).flip for i in range(DRAWS)]
    assert 0.45 < np.mean(flips) < 0.55
    assert not any(RandomResizedCrop(224, flip=0.0).draw(600, 800, i).flip for i in range(100))


def test_the_dct_scale_keeps_the_box_at_least_the_output_size():
    box = lambda h, w: CropBox(0, 0, h, w, False, (600, 800))  # noqa: E731
    assert dct_scale(box(600, 800), (224, 224)) == 2
    assert dct_scale(box(600, 800), (64, 64)) == 8
    assert dct_scale(box(447, 800), (224, 224)) == 1  # 447 / 2 would be under 224
    assert dct_scale(box(100, 100), (224, 224)) == 1  # a box smaller than the output is upscaled from full detail
    for h, w in [(600, 800), (448, 500), (230, 900)]:
        s = dct_scale(box(h, w), (224, 224))
        assert h / s >= 224 and w / s >= 224


CROPPERS = [d for d in DECODERS if crops_in_decode(d)]


def test_the_decoders_that_scale_their_decode_crop_in_it():
    assert {"pil-reduced", "simplejpeg"} <= set(CROPPERS)
    assert not {"pil", "torchvision"} & set(CROPPERS)


@pytest.mark.parametrize("decoder", CROPPERS)
@pytest.mark.parametrize("index", range(6))
def test_crop_in_decode_matches_full_decode_crop_resize(index, decoder):
    data = _photo(800, 600, index)
    crop = RandomResizedCrop(224, seed=0)
    box = crop.draw(600, 800, index)
    reference = crop_resize_flip(decode_image(data, None, "pil"), box, (224, 224))
    ours = crop.decode(data, index, decoder=decoder)
    assert ours.shape == (3, 224, 224) and ours.dtype == torch.uint8
    tolerance = CROP_TOLERANCE_DB.get(decoder, PIXEL_TOLERANCE_DB)
    assert psnr(ours, reference) >= tolerance, (box, psnr(ours, reference))
    if dct_scale(box, (224, 224)) == 1:  # at full detail there is nothing to round: the same bytes
        assert torch.equal(ours, reference)


@pytest.mark.parametrize("decoder", [d for d in DECODERS if d not in CROPPERS])
def test_a_decoder_that_cannot_crop_in_the_decode_crops_the_same_box_after_it(decoder):
    data = _photo(400, 300)
    crop = RandomResizedCrop(96)
    box = crop.draw(300, 400, 0)
    expected = crop_resize_flip(decode_image(data, None, decoder), box, (96, 96))
    assert torch.equal(decode_box(data, box, (96, 96), decoder), expected)
    assert torch.equal(crop.decode(data, 0, decoder=decoder), expected)


@pytest.mark.parametrize("decoder", CROPPERS)
def test_rotated_photos_are_cropped_as_shown(decoder):
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = 6  # stored 800x600, shown 600 wide and 800 high
    Image.open(io.BytesIO(_photo(800, 600))).save(buf, "JPEG", quality=90, exif=exif)
    data = buf.getvalue()
    crop = RandomResizedCrop((112, 96), seed=5)
    for index in range(4):
        box = crop.draw(800, 600, index)
        assert box.image_hw == (800, 600)
        reference = crop_resize_flip(decode_image(data, None, "pil"), box, (112, 96))
        assert psnr(crop.decode(data, index, decoder=decoder), reference) >= CROP_TOLERANCE_DB.get(
            decoder, PIXEL_TOLERANCE_DB
        )


@pytest.mark.parametrize("decoder", CROPPERS)
def test_a_png_goes_through_the_same_box_without_scaling(decoder):
    buf = io.BytesIO()
    Image.open(io.BytesIO(_photo(200, 150))).save(buf, "PNG")
    box = RandomResizedCrop(64).draw(150, 200, 1)
    ours = decode_box(buf.getvalue(), box, (64, 64), decoder)
    assert psnr(ours, crop_resize_flip(decode_image(buf.getvalue(), None, "pil"), box, (64, 64))) >= 40


@pytest.mark.parametrize(
    "bad", [dict(size=None), dict(scale=(0.5, 0.1)), dict(scale=(0, 1)), dict(ratio=(2, 1)), dict(flip=1.5)]
)
def test_bad_settings_are_refused_with_what_is_allowed(bad):
    with pytest.raises(LabkitError):
        RandomResizedCrop(**bad)


def test_a_box_for_another_image_size_is_refused():
    with pytest.raises(LabkitError, match="drawn for"):
        crop_resize_flip(torch.zeros(3, 10, 10, dtype=torch.uint8), CropBox(0, 0, 5, 5, False, (20, 20)), (4, 4))
