"""The loader without worker processes: the batches torch's DataLoader gives, in order, errors raised where the
loop is, and no thread left behind when the loop stops early."""

import threading

import pytest
import torch
from conftest import OUT
from torch.utils.data import DataLoader, SequentialSampler

from labkit.collate.batching import stack_uint8
from labkit.core.errors import LabkitError
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import EncodedPackDataset, PackedDataset
from labkit.datasets.sample_errors import SampleError
from labkit.decode.random_crop import RandomResizedCrop
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.epoch_tagged import EpochTagged
from labkit.workers.thread_loader import ThreadLoader


def _producers() -> int:
    return sum(t.name == "labkit-thread-loader" for t in threading.enumerate())


def test_it_gives_the_batches_a_dataloader_gives(encoded_pack):
    ds = PackedDataset(encoded_pack, "simplejpeg", crop=RandomResizedCrop(24, seed=1))
    sampler = EpochTagged(BlockShuffleSampler(len(ds), block_size=4, seed=0))
    ours = ThreadLoader(ds, batch_size=5, shuffle=False, sampler=sampler, threads=2, prefetch=1)
    torch_loader = DataLoader(ds, batch_size=5, sampler=sampler, collate_fn=stack_uint8)
    assert len(ours) == len(torch_loader)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for (a, la), (b, lb) in zip(ours, torch_loader, strict=True):
            assert torch.equal(a, b) and torch.equal(la, lb) and a.dtype == torch.uint8
    assert ds.decode_threads == 2 and _producers() == 0


def test_a_broken_sample_raises_in_the_loop_naming_it(corrupt_photos):
    loader = ThreadLoader(ImageFolderDataset(corrupt_photos, "simplejpeg", OUT), batch_size=4, shuffle=False)
    with pytest.raises(SampleError, match=r"sample \d+ \("):
        for _ in loader:
            pass
    assert _producers() == 0


def test_stopping_early_leaves_no_thread_behind(encoded_pack):
    loader = ThreadLoader(PackedDataset(encoded_pack, "simplejpeg", OUT), batch_size=2, prefetch=1)
    for k, _ in enumerate(loader):
        if k == 1:
            break
    assert _producers() == 0


def test_what_it_refuses_is_said(encoded_pack):
    with pytest.raises(LabkitError, match="decodes whole batches"):
        ThreadLoader(EncodedPackDataset(encoded_pack))
    ds = PackedDataset(encoded_pack, "simplejpeg", OUT)
    with pytest.raises(LabkitError, match="sampler and shuffle=True together"):
        ThreadLoader(ds, sampler=SequentialSampler(ds))
    with pytest.raises(LabkitError, match="prefetch=0"):
        ThreadLoader(ds, prefetch=0)


def test_it_is_make_loaders_loader_with_no_workers_and_batches_made_ahead(encoded_pack):
    loader = ThreadLoader(PackedDataset(encoded_pack, "simplejpeg", OUT), batch_size=4, prefetch=3, threads=2)
    assert loader.num_workers == 0 and loader.prefetch_factor == 3 and loader.batch_size == 4
    assert "state_dict" in dir(loader)  # it keeps its place, as every loader make_loader returns
