"""BatchRandomResizedCrop: every sample of a batch its own crop, flip and colour factors, in one pass on the
device, drawn as the crop-in-decode draws them and close to cropping each sample alone."""

import numpy as np
import pytest
import torch

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.decode.crop_box import crop_resize_flip
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.registry import decode_image
from labkit.decode.resize import psnr
from labkit.device.batch_augment import BatchRandomResizedCrop
from labkit.device.transfer import normalize_uint8
from labkit.harness.synthetic_data import PhotoSpec, encode_sample, plan_sample

PIXEL_TOLERANCE_DB = 30  # roi_align's cell averages against torchvision's antialiased bilinear resize


def _batch(n=6, height=192, width=256):
    spec = PhotoSpec(n=n, width=width, height=height)
    return torch.stack([decode_image(encode_sample(spec, plan_sample(spec, i)), None, "pil") for i in range(n)])


def test_each_sample_gets_the_box_the_decode_crop_draws_for_it():
    augment = BatchRandomResizedCrop(64, seed=9)
    params = augment.parameters(192, 256, keys=[3, 4, 5], epoch=2)
    crop = RandomResizedCrop(64, seed=9)
    for (top, left, h, w, flip, _, _), key in zip(params, [3, 4, 5]):
        box = crop.draw(192, 256, key, epoch=2)
        assert (top, left, h, w, bool(flip)) == (box.top, box.left, box.height, box.width, box.flip)
    assert len({tuple(p[:4]) for p in params}) == 3  # per sample, not one draw for the batch


def test_the_output_matches_cropping_each_sample_alone():
    images = _batch()
    augment = BatchRandomResizedCrop(64, seed=1, mean=None, std=None)
    out = augment(images, keys=range(6), epoch=0)
    assert out.shape == (6, 3, 64, 64) and out.dtype == torch.float32
    crop = RandomResizedCrop(64, seed=1)
    for i in range(6):
        alone = crop_resize_flip(images[i], crop.draw(192, 256, i), (64, 64))
        quality = psnr(out[i].round().clamp(0, 255).to(torch.uint8), alone)
        assert quality >= PIXEL_TOLERANCE_DB, (i, quality)


def test_draws_are_seeded_by_key_and_epoch_not_by_the_batch():
    images = _batch(4)
    augment = BatchRandomResizedCrop(48, seed=2)
    whole = augment(images, keys=[10, 11, 12, 13], epoch=1)
    split = torch.cat([augment(images[:2], keys=[10, 11], epoch=1), augment(images[2:], keys=[12, 13], epoch=1)])
    assert torch.equal(whole, split)
    assert not torch.equal(whole, augment(images, keys=[10, 11, 12, 13], epoch=2))
    flips = BatchRandomResizedCrop(48, seed=2).parameters(100, 100, keys=range(2000), epoch=0)[:, 4]
    assert 0.45 < flips.mean() < 0.55


def test_normalisation_and_uint8_or_float_input_give_the_same_batch():
    images = _batch(3)
    raw = BatchRandomResizedCrop(32, seed=4, mean=None, std=None)(images, keys=range(3), epoch=0)
    normalised = BatchRandomResizedCrop(32, seed=4)(images, keys=range(3), epoch=0)
    floats = BatchRandomResizedCrop(32, seed=4, mean=None, std=None)(images.float(), keys=range(3), epoch=0)
    assert torch.allclose(floats, raw, atol=1e-4)
    assert torch.allclose(normalised, normalize_uint8(raw), atol=1e-5)


def test_a_float_batch_is_not_normalised_twice_and_the_epoch_and_keys_must_be_said():
    images = _batch(3)
    augment = BatchRandomResizedCrop(32, seed=4)
    with pytest.raises(LabkitValueError, match="probably normalised already"):
        augment(normalize_uint8(images), keys=range(3), epoch=0)
    with pytest.raises(TypeError, match="epoch"):
        augment(images, keys=range(3))
    with pytest.raises(LabkitValueError, match="one of them"):
        augment(images, epoch=0)
    assert torch.equal(augment(images, start=6, epoch=1), augment(images, keys=[6, 7, 8], epoch=1))


def test_brightness_and_contrast_factors_stay_in_their_range_and_zero_changes_nothing():
    augment = BatchRandomResizedCrop(32, brightness=0.4, contrast=0.2, seed=5)
    params = augment.parameters(64, 64, keys=range(500), epoch=0)
    assert 0.6 <= params[:, 5].min() < 0.7 and 1.3 < params[:, 5].max() <= 1.4
    assert 0.8 <= params[:, 6].min() and params[:, 6].max() <= 1.2
    images = torch.full((2, 3, 64, 64), 100, dtype=torch.uint8)
    plain = BatchRandomResizedCrop(32, flip=0.0, mean=None, std=None)(images, keys=[0, 1], epoch=0)
    assert torch.allclose(plain, torch.full_like(plain, 100.0))
    brighter = BatchRandomResizedCrop(32, brightness=0.5, mean=None, std=None, seed=5)(images, keys=[0, 1], epoch=0)
    factors = BatchRandomResizedCrop(32, brightness=0.5, seed=5).parameters(64, 64, keys=[0, 1], epoch=0)[:, 5]
    assert np.allclose(brighter.mean(dim=(1, 2, 3)).numpy(), np.minimum(100 * factors, 255), rtol=1e-4)


@pytest.mark.parametrize("bad", [dict(size=None), dict(brightness=1.0), dict(contrast=-0.1), dict(mean=None)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(LabkitError):
        BatchRandomResizedCrop(**bad)


def test_one_key_per_sample_and_a_batch_are_required():
    augment = BatchRandomResizedCrop(16)
    with pytest.raises(LabkitError, match="one key"):
        augment(torch.zeros(2, 3, 32, 32, dtype=torch.uint8), keys=[0], epoch=0)
    with pytest.raises(LabkitError, match="N x C x H x W"):
        augment(torch.zeros(3, 32, 32, dtype=torch.uint8), keys=[0], epoch=0)


@pytest.mark.cuda
def test_the_same_batch_on_cuda_as_on_the_cpu():
    images = _batch(4)
    augment = BatchRandomResizedCrop(64, brightness=0.2, contrast=0.2, seed=6)
    on_cpu = augment(images, keys=range(4), epoch=0)
    on_gpu = augment(images.cuda(), keys=range(4), epoch=0).cpu()
    assert torch.allclose(on_cpu, on_gpu, atol=1e-3)
