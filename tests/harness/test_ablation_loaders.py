"""Each version's loader is what its row says: the article's DataLoader code for v1–v4, make_loader for labkit's."""

import torch
from torch.utils.data import RandomSampler

from labkit.collate.batching import list_collate, stack_samples, stack_uint8
from labkit.collate.mixing import MixCollate
from labkit.core.environment import usable_cpus
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import (
    DecodedArrayDataset,
    EncodedPackDataset,
    PackedDataset,
)
from labkit.decode.registry import NO_DECODE
from labkit.device.transfer import DevicePrefetcher
from labkit.diagnose.autotuner import LoaderConfig
from labkit.harness.ablation_loaders import build_loader, device_batches
from labkit.harness.ablation_versions import (
    TRAINING_VERSIONS,
    VERSIONS,
    AblationSettings,
    NormalizeInWorker,
)
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.epoch_tagged import EpochTagged
from labkit.samplers.every_sample import RandomPermutationSampler
from labkit.workers.shared_slots import SlotLoader
from labkit.workers.stateful_loader import StatefulLoader

V = {v.id: v for v in VERSIONS + TRAINING_VERSIONS}


def _build(vid, ws, decoder=None, tuned=None, workers=2):
    settings = AblationSettings(batch_size=8, num_workers=workers, device="cpu")
    return build_loader(V[vid], ws, settings, decoder or V[vid].decoder, tuned)


def test_v1_is_the_seed_baseline(ws):
    loader, described = _build("v1", ws)
    assert isinstance(loader.dataset, ImageFolderDataset) and loader.dataset.decoder == "pil"
    assert isinstance(loader.dataset.transform, NormalizeInWorker) and loader.collate_fn is stack_samples
    assert loader.num_workers == 0 and not loader.pin_memory and isinstance(loader.sampler, RandomSampler)
    images, labels = next(iter(loader))
    assert images.dtype == torch.float32 and images.shape == (8, 3, 256, 256)


def test_v2_adds_workers_persistence_and_pinning_only_with_cuda(ws):
    loader, _ = _build("v2", ws)
    assert isinstance(loader.dataset, ImageFolderDataset)
    assert loader.num_workers == 2 and loader.persistent_workers and loader.prefetch_factor == 2
    assert loader.pin_memory is False  # the device is the CPU here: pinning would only cost


def test_v3_reads_the_pack_and_v4_prefetches_deeper_and_mixes_float_in_collate(ws):
    v3, _ = _build("v3", ws)
    assert isinstance(v3.dataset, PackedDataset) and v3.dataset.decoder == "pil"
    v4, described = _build("v4", ws)
    assert v4.prefetch_factor == 4 and isinstance(v4.collate_fn, MixCollate)
    assert v4.collate_fn.stack is stack_samples and described["mix"] == "collate"
    images, soft = next(iter(v4))
    assert images.dtype == torch.float32 and soft.shape == (8, len(ws.classes))


def test_v5_keeps_uint8_across_processes_and_normalises_and_mixes_on_the_device(ws):
    loader, described = _build("v5", ws, decoder="pil-reduced")
    assert isinstance(loader, StatefulLoader) and described["batch_memory"] == "reused shared-memory slots"
    assert isinstance(loader.loader, SlotLoader)  # make_loader(..., batch_slots=True)
    assert described["call"] == (
        "make_loader(dataset, batch_size=8, num_workers=2, prefetch_factor=4, batch_slots=True, seed=0)"
    )
    assert isinstance(loader.dataset, PackedDataset) and loader.dataset.decoder == "pil-reduced"
    assert loader.dataset.transform is None and loader.prefetch_factor == 4
    assert loader.num_workers == 2 and loader.persistent_workers
    images, labels = next(iter(loader))
    assert images.dtype == torch.uint8
    batches = device_batches(V["v5"], loader, AblationSettings(batch_size=8, device="cpu"), len(ws.classes))
    assert isinstance(batches, DevicePrefetcher) and batches.mix is not None
    images, soft = next(iter(batches))
    assert images.dtype == torch.float32 and soft.shape == (8, len(ws.classes))
    assert described["normalize"] == "on device" and described["host_buffers"] == "reused"
    assert described["main_threads"] == 1  # the workers take the other core of 2
    assert described["checksums"] == "every read" and loader.dataset.reader.check_crc


def test_v6_reads_verified_decoded_arrays_in_block_order_with_batched_reads_in_the_main_process(ws):
    loader, described = _build("v6", ws)
    assert isinstance(loader.dataset, DecodedArrayDataset) and isinstance(loader.sampler, BlockShuffleSampler)
    assert hasattr(loader.dataset, "__getitems__") and loader.collate_fn is stack_uint8
    assert loader.num_workers == 0 and not loader.dataset.reader.check_crc and described["checksums"] == "verified once"
    assert described["main_threads"] == usable_cpus()  # no workers: the main process has every core
    images, _ = next(iter(loader))
    assert images.dtype == torch.uint8 and images.shape == (8, 3, 256, 256)


def test_v7_takes_the_autotuners_choice(ws):
    loader, described = _build("v7", ws, tuned=LoaderConfig(NO_DECODE, 1, 4, main_threads=1))
    assert isinstance(loader.dataset, DecodedArrayDataset) and loader.num_workers == 1
    assert loader.prefetch_factor == 4 and described["main_threads"] == 1
    loader, described = _build("v7", ws, tuned=LoaderConfig(NO_DECODE, 0, 2))
    assert loader.num_workers == 0 and not loader.persistent_workers and loader.prefetch_factor == 2
    assert described["batch_memory"] == "main process, a producer thread 2 batches ahead"
    assert described["call"] == "make_loader(dataset, batch_size=8, num_workers=0, prefetch_factor=2, seed=0)"
    loader, _ = _build("v7", ws, tuned=LoaderConfig("torchvision", 2, 2))
    assert isinstance(loader.dataset, PackedDataset) and loader.dataset.decoder == "torchvision"
    assert isinstance(loader.sampler, RandomPermutationSampler)
    loader, described = _build("v7", ws, tuned=LoaderConfig(NO_DECODE, 0, 2, sampler="block"))
    assert isinstance(loader.sampler, BlockShuffleSampler) and described["sampler"] == "BlockShuffleSampler"


def test_v8_hands_encoded_files_to_the_gpu(ws):
    assert V["v8"].cuda_only
    loader, _ = _build("v8", ws)
    assert isinstance(loader.dataset, EncodedPackDataset) and loader.collate_fn is list_collate


def test_t1_crops_after_a_full_decode_in_the_main_process_and_t5_inside_the_decode_in_slots(ws):
    t1, described = _build("t1", ws)
    assert isinstance(t1.dataset, ImageFolderDataset) and t1.dataset.decoder == "pil" and t1.num_workers == 0
    assert t1.dataset.crop.output_hw == (224, 224) and isinstance(t1.sampler, EpochTagged)
    assert described["crop"] == "RandomResizedCrop(224) + flip"
    images, _ = next(iter(t1))
    assert images.dtype == torch.float32 and images.shape == (8, 3, 224, 224)
    t5, described = _build("t5", ws, decoder="simplejpeg")
    assert V["t5"].decoder == "fastest"  # the run picks it by timing the decoders that crop inside their decode
    assert isinstance(t5.loader, SlotLoader) and t5.dataset.decoder == "simplejpeg" and t5.dataset.crop is not None
    images, _ = next(iter(t5))
    assert images.dtype == torch.uint8 and images.shape == (8, 3, 224, 224)
    assert _build("v5", ws, decoder="pil-reduced")[1]["crop"] is None


def test_t5_takes_the_fastest_decoder_that_crops_inside_its_decode(ws, monkeypatch):
    import labkit.harness.ablation_loaders as ablation

    monkeypatch.setattr(
        ablation,
        "time_decoders",
        lambda blobs, size: {"pil": 0.001, "torchvision": 0.002, "pil-reduced": 0.004, "simplejpeg": 0.003},
    )
    assert ablation.fastest_decoder(ws)[0] == "pil"
    assert ablation.fastest_decoder(ws, crops=True)[0] == "simplejpeg"
