"""labkit.device.device_decode: the engine's encoded batches decoded whole on the device, after the loader."""

import dataclasses

import pytest
import torch

from labkit.collate.batching import list_collate
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.datasets.pack_datasets import EncodedPackDataset
from labkit.decode import registry
from labkit.decode.registry import decode_image
from labkit.decode.resize import psnr
from labkit.device.device_decode import DeviceDecoded
from labkit.workers.loader_factory import make_loader


def _loader(encoded_pack, batch_size=4):
    return make_loader(
        EncodedPackDataset(encoded_pack), batch_size=batch_size, shuffle=False, num_workers=0, collate_fn=list_collate
    )


def test_without_the_device_the_decoder_says_what_it_needs(encoded_pack, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(LabkitError, match="the nvjpeg decoder needs a CUDA device"):
        DeviceDecoded(_loader(encoded_pack))


def test_a_device_of_another_kind_is_refused_with_the_one_it_needs(encoded_pack, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(LabkitValueError, match="decodes on a CUDA device, not on cpu: pass device='cuda'"):
        DeviceDecoded(_loader(encoded_pack), device="cpu")


def test_each_batch_is_decoded_whole_and_handed_on_with_its_labels(encoded_pack, monkeypatch):
    # nvJPEG's record, pointed at the CPU (torchvision's decode_jpeg decodes there too): the wrapper's own logic
    on_cpu = dataclasses.replace(registry.DEVICE_DECODERS["nvjpeg"], name="jpeg-on-cpu", device_type="cpu")
    monkeypatch.setitem(registry.DEVICE_DECODERS, "jpeg-on-cpu", on_cpu)
    loader = _loader(encoded_pack)
    decoded = DeviceDecoded(loader, size=48, device="cpu", decoder="jpeg-on-cpu")
    assert len(decoded) == len(loader) and decoded.batch_size == 4  # the loader's attributes pass through
    dataset, seen = loader.dataset, 0
    for images, labels in decoded:
        assert images.shape == (len(labels), 3, 48, 48) and images.dtype == torch.uint8
        for k, label in enumerate(labels.tolist()):
            blob, expected_label = dataset[seen + k]
            assert label == expected_label
            assert torch.equal(images[k], decode_image(bytes(blob.numpy()), 48, "torchvision"))
        seen += len(labels)
    assert seen == len(dataset)


@pytest.mark.cuda
def test_nvjpeg_decodes_each_batch_on_the_gpu_close_to_the_cpu_decode(encoded_pack):
    loader = _loader(encoded_pack)
    images, labels = next(iter(DeviceDecoded(loader, size=64)))
    assert images.is_cuda and labels.is_cuda and images.shape == (4, 3, 64, 64)
    for k in range(4):
        blob, _ = loader.dataset[k]
        assert psnr(images[k].cpu(), decode_image(bytes(blob.numpy()), 64, "torchvision")) >= 30
