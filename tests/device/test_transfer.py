import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchvision.transforms import v2

from labkit.collate.mixing import MixUp, mix_batch
from labkit.core.errors import LabkitTypeError
from labkit.device.transfer import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher, normalize_mix_uint8, normalize_uint8


def _batches(n=4, batch=6):
    g = torch.Generator().manual_seed(0)
    return [
        (torch.randint(0, 256, (batch, 3, 8, 8), dtype=torch.uint8, generator=g), torch.arange(batch) % 3)
        for _ in range(n)
    ]


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


@pytest.mark.cuda
def test_cuda_fused_mixup_equals_cpu():
    batches = _batches(n=3)
    on_gpu = list(DevicePrefetcher(batches, "cuda", mix=MixUp(3, alpha=1.0, seed=5)))
    on_cpu = list(DevicePrefetcher(batches, "cpu", mix=MixUp(3, alpha=1.0, seed=5)))
    torch.cuda.synchronize()
    for (g_img, g_soft), (c_img, c_soft) in zip(on_gpu, on_cpu):
        assert g_img.device.type == "cuda" and torch.allclose(g_img.cpu(), c_img, atol=1e-5)
        assert torch.allclose(g_soft.cpu(), c_soft)


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


@given(lam=st.floats(0, 1), seed=st.integers(0, 2**31), n=st.integers(1, 5))
@settings(max_examples=40, deadline=None)
def test_fused_normalize_and_mix_equals_normalize_then_mix(lam, seed, n):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 3, 5, 7), dtype=torch.uint8, generator=g)
    perm = torch.randperm(n, generator=g)
    normalized = normalize_uint8(images)
    reference = normalized[perm].lerp_(normalized, lam)  # lam·x + (1−lam)·x[perm], as mix_batch computes it
    before = images.clone()
    fused = normalize_mix_uint8(images, perm, lam)
    assert fused.dtype == torch.float32 and torch.equal(images, before)
    assert torch.allclose(fused, reference, atol=1e-5)
    whole_batch = normalize_mix_uint8(images, perm, lam, per_sample=False)  # the GPU's way, run here
    assert torch.allclose(whole_batch, reference, atol=1e-5) and torch.equal(images, before)


def test_prefetcher_folds_mixup_into_normalisation_with_the_same_draws(monkeypatch):
    import labkit.device.transfer

    calls = []
    real = labkit.device.transfer.normalize_mix_uint8
    monkeypatch.setattr(labkit.device.transfer, "normalize_mix_uint8", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(MixUp, "__call__", lambda *a: pytest.fail("MixUp ran after normalising, not fused"))
    batches = _batches(n=5)
    prefetcher = DevicePrefetcher(batches, "cpu", mix=MixUp(3, alpha=1.0, seed=7))
    fused = [(images.clone(), soft) for images, soft in prefetcher]
    monkeypatch.undo()
    assert len(calls) == 5
    unfused = MixUp(3, alpha=1.0, seed=7)
    assert unfused.buffers is None
    for (raw, labels), (images, soft) in zip(batches, fused):
        ref_images, ref_soft = unfused(normalize_uint8(raw), labels)
        assert torch.allclose(images, ref_images, atol=1e-5) and torch.allclose(soft, ref_soft)
    assert any(
        not torch.allclose(images, normalize_uint8(raw), atol=1e-3) for (raw, _), (images, _) in zip(batches, fused)
    )


def test_prefetcher_keeps_mixup_unfused_for_float_batches():
    batches = [(normalize_uint8(raw), labels) for raw, labels in _batches(n=2)]
    out = list(DevicePrefetcher(batches, "cpu", mix=MixUp(3, alpha=1.0, seed=7)))
    reference = MixUp(3, alpha=1.0, seed=7)
    for (images, labels), (mixed, soft) in zip(batches, out):
        ref_images, ref_soft = reference(images, labels)
        assert torch.equal(mixed, ref_images) and torch.equal(soft, ref_soft)


def test_a_mixup_subclass_is_called_as_given_not_fused():
    class Swap(MixUp):
        def __call__(self, images, labels):
            return images.flip(0), labels

    batches = _batches(n=1)
    images, labels = list(DevicePrefetcher(batches, "cpu", mix=Swap(3)))[0]
    assert torch.allclose(images, normalize_uint8(batches[0][0]).flip(0)) and torch.equal(labels, batches[0][1])


def test_normalising_a_float_batch_leaves_the_batch_as_it_was():
    images = torch.full((2, 3, 4, 4), 128.0)
    normalize_uint8(images)
    assert torch.all(images == 128.0)


def test_the_prefetcher_s_state_is_the_loader_s_and_the_mix_s_as_of_the_batch_handed_out():
    from labkit.workers.loader_factory import make_loader

    data = torch.utils.data.TensorDataset(torch.randint(0, 255, (24, 3, 4, 4), dtype=torch.uint8), torch.arange(24) % 3)
    first = DevicePrefetcher(make_loader(data, batch_size=4, num_workers=0, seed=1), "cpu", mix=MixUp(3, seed=2))
    batches = iter(first)
    for _ in range(2):
        next(batches)
    state = first.state_dict()
    assert state["loader"]["sampler"]["position"] == 8
    expected = [next(batches)[0] for _ in range(4)]
    second = DevicePrefetcher(make_loader(data, batch_size=4, num_workers=0, seed=1), "cpu", mix=MixUp(3, seed=9))
    second.load_state_dict(state)
    resumed = [b[0] for b in second]
    assert len(resumed) == 4 and all(torch.equal(a, b) for a, b in zip(expected, resumed))
    with pytest.raises(LabkitTypeError, match="keeps no state: build the loader with labkit.make_loader"):
        DevicePrefetcher(torch.utils.data.DataLoader(data), "cpu").state_dict()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_state_is_not_the_batch_prepared_ahead():
    from labkit.workers.loader_factory import make_loader

    data = torch.utils.data.TensorDataset(torch.zeros(24, 3, 4, 4, dtype=torch.uint8), torch.arange(24))
    prefetcher = DevicePrefetcher(make_loader(data, batch_size=4, num_workers=0, seed=1), "cuda")
    batches = iter(prefetcher)
    next(batches)
    assert prefetcher.state_dict()["loader"]["sampler"]["position"] == 4  # the loader itself is at 8


def _uint8_loader(batches=2, size=8, classes=3):
    from torch.utils.data import TensorDataset

    from labkit.workers.loader_factory import make_loader

    images = torch.randint(
        0, 256, (batches * 4, 3, size, size), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    labels = torch.arange(batches * 4) % classes
    return make_loader(TensorDataset(images, labels), batch_size=4, shuffle=False, num_workers=0)


def test_the_prefetcher_passes_the_loader_s_attributes_through():
    loader = _uint8_loader()
    prefetcher = DevicePrefetcher(loader, device="cpu")
    assert prefetcher.dataset is loader.dataset and len(prefetcher.dataset) == 8  # torchvision's evaluate reads it
    assert (prefetcher.batch_size, prefetcher.sampler, prefetcher.batches_left) == (4, loader.sampler, 2)


def test_torchvision_v2_transforms_run_on_the_uint8_batch_through_the_hook():
    loader = _uint8_loader()
    flipped = [
        x for x, _ in DevicePrefetcher(loader, device="cpu", normalize=None, transform=v2.RandomHorizontalFlip(p=1))
    ]
    plain = [x for x, _ in DevicePrefetcher(loader, device="cpu", normalize=None)]
    assert all(torch.equal(f, p.flip(-1)) for f, p in zip(flipped, plain))
    augmented = [
        x
        for x, _ in DevicePrefetcher(
            loader, device="cpu", transform=v2.Compose([v2.RandAugment(), v2.ColorJitter(0.2)])
        )
    ]
    assert all(x.dtype == torch.float32 and x.shape == (4, 3, 8, 8) for x in augmented)


def test_torchvision_v2_mixup_refuses_uint8_batches_and_runs_as_the_mix():
    images, labels = next(iter(_uint8_loader()))
    with pytest.raises((TypeError, RuntimeError), match="[Ff]loat"):  # the wording depends on torchvision's release
        v2.MixUp(num_classes=3)(images, labels)
    mixed, targets = next(iter(DevicePrefetcher(_uint8_loader(), device="cpu", mix=v2.MixUp(num_classes=3))))
    assert mixed.dtype == torch.float32 and targets.shape == (4, 3)
