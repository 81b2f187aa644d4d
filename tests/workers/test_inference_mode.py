"""Every loader under torch.inference_mode(), torch.no_grad() and neither, with any worker and decode-thread count:
torchvision's evaluate() wraps its loop in inference_mode, and a batch allocated there and filled by decode threads
(or a worker forked there) must not be an inference tensor."""

import contextlib

import pytest
import torch

from labkit.core.host_buffers import HostBuffers
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import PackedDataset
from labkit.decode.random_crop import RandomResizedCrop
from labkit.device.transfer import DevicePrefetcher
from labkit.workers.loader_factory import make_loader
from labkit.workers.shared_slots import SlotLoader
from labkit.workers.thread_loader import ThreadLoader

MODES = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad, "neither": contextlib.nullcontext}


def _reference(dataset):
    return torch.stack([dataset[i][0] for i in range(len(dataset))])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("threads", [1, 2])
def test_make_loader_and_the_prefetcher(photos, mode, workers, threads):
    dataset = ImageFolderDataset(photos, size=16, decode_threads=threads)
    with MODES[mode]():
        images = torch.cat([x for x, _ in make_loader(dataset, batch_size=8, shuffle=False, num_workers=workers)])
        prepared = [
            x for x, _ in DevicePrefetcher(make_loader(dataset, batch_size=8, num_workers=workers), device="cpu")
        ]
    assert torch.equal(images, _reference(dataset)) and all(x.dtype == torch.float32 for x in prepared)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("threads", [1, 2])
def test_the_thread_loader(encoded_pack, mode, threads):
    dataset = PackedDataset(encoded_pack, size=16)
    with MODES[mode]():
        images = torch.cat([x for x, _ in ThreadLoader(dataset, batch_size=8, shuffle=False, threads=threads)])
    assert torch.equal(images, _reference(dataset))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workers", [0, 2])
def test_the_slot_loader_made_and_run_in_any_mode(encoded_pack, mode, workers):
    dataset = PackedDataset(encoded_pack, crop=RandomResizedCrop(16, seed=1))
    with MODES[mode]():
        loader = SlotLoader(dataset, batch_size=8, shuffle=False, num_workers=workers)
        inside = sum(len(x) for x, _ in loader)
    outside = sum(len(x) for x, _ in loader)  # slots made in the mode, written outside it
    assert inside == outside == len(dataset)


def test_an_evaluation_s_buffers_serve_the_training_after_it(photos):
    dataset = ImageFolderDataset(photos, size=16)
    buffers = HostBuffers()
    with torch.inference_mode():
        for _ in DevicePrefetcher(make_loader(dataset, batch_size=8, num_workers=0), device="cpu", buffers=buffers):
            pass
    for images, _ in DevicePrefetcher(make_loader(dataset, batch_size=8, num_workers=0), device="cpu", buffers=buffers):
        images.mul_(1.0)  # training writes in place into what evaluation allocated
    assert buffers.reused > 0
