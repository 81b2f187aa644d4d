import functools

import pytest
import torch
from torchvision.transforms import v2

from labkit.collate import mix_batch
from labkit.transfer import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher, normalize_uint8


def _batches(n=4, batch=6):
    g = torch.Generator().manual_seed(0)
    return [(torch.randint(0, 256, (batch, 3, 8, 8), dtype=torch.uint8, generator=g), torch.arange(batch) % 3)
            for _ in range(n)]


def test_normalize_uint8_matches_totensor_then_normalize():
    images = _batches(1)[0][0]
    reference = v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)(images.float() / 255)
    assert torch.allclose(normalize_uint8(images), reference, atol=1e-6)


def test_cpu_prefetcher_converts_and_keeps_order_and_labels():
    batches = _batches()
    out = list(DevicePrefetcher(batches, "cpu"))
    assert len(out) == len(batches) == len(DevicePrefetcher(batches, "cpu"))
    for (images, labels), (raw, raw_labels) in zip(out, batches):
        assert images.dtype == torch.float32 and torch.equal(labels, raw_labels)
        assert torch.allclose(images, normalize_uint8(raw))


def test_normalize_none_keeps_uint8_and_mix_runs_after_conversion():
    batches = _batches(1)
    assert list(DevicePrefetcher(batches, "cpu", normalize=None))[0][0].dtype == torch.uint8
    mix = functools.partial(mix_batch, num_classes=3, generator=torch.Generator().manual_seed(0))
    images, labels = list(DevicePrefetcher(batches, "cpu", mix=mix))[0]
    assert images.dtype == torch.float32 and labels.shape == (6, 3)


def test_channels_last_layout():
    images, _ = list(DevicePrefetcher(_batches(1), "cpu", channels_last=True))[0]
    assert images.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.cuda
def test_cuda_path_equals_cpu_path():
    batches = [(img.pin_memory(), lab.pin_memory()) for img, lab in _batches(6)]
    on_gpu = list(DevicePrefetcher(batches, "cuda"))
    on_cpu = list(DevicePrefetcher(batches, "cpu"))
    torch.cuda.synchronize()
    assert len(on_gpu) == len(on_cpu)
    for (g_img, g_lab), (c_img, c_lab) in zip(on_gpu, on_cpu):
        assert g_img.device.type == "cuda"
        assert torch.allclose(g_img.cpu(), c_img, atol=1e-5) and torch.equal(g_lab.cpu(), c_lab)


@pytest.mark.cuda
def test_cuda_batches_survive_compute_on_the_main_stream():
    # Each batch is used after the next copy was issued: record_stream keeps its memory alive.
    batches = [(img.pin_memory(), lab.pin_memory()) for img, lab in _batches(8, batch=64)]
    expected = [normalize_uint8(img).sum().item() for img, _ in batches]
    sums = []
    for images, _ in DevicePrefetcher(batches, "cuda"):
        torch.cuda._sleep(1_000_000)  # a slow "model" on the compute stream
        sums.append(images.sum().item())
    assert sums == pytest.approx(expected, rel=1e-5)


def test_normalize_uint8_works_on_one_image_too():
    image = _batches(1)[0][0][0]
    reference = v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)(image.float() / 255)
    assert torch.allclose(normalize_uint8(image), reference, atol=1e-5)


def test_cpu_prefetcher_reuses_memory_but_never_overwrites_a_batch_you_keep():
    batches = _batches(n=8)
    mix = functools.partial(mix_batch, num_classes=3, generator=torch.Generator().manual_seed(0))
    prefetcher = DevicePrefetcher(batches, "cpu")
    kept = []
    for k, (images, _) in enumerate(prefetcher):
        if k % 3 == 0:
            kept.append((k, images))
    assert prefetcher.buffers.reused > 0
    for k, images in kept:
        assert torch.allclose(images, normalize_uint8(batches[k][0]))
    prefetcher = DevicePrefetcher(batches, "cpu")
    prefetcher.mix = functools.partial(mix, buffers=prefetcher.buffers)
    mixed = [images.clone() for images, _ in prefetcher]
    reference = functools.partial(mix_batch, num_classes=3, generator=torch.Generator().manual_seed(0))
    for (raw, labels), images in zip(batches, mixed):
        assert torch.allclose(images, reference(normalize_uint8(raw), labels)[0], atol=1e-6)
