"""labkit.decode.torch_decoders: torchvision imported only where used, nvJPEG's batch decode, torchcodec optional."""

import os
import subprocess
import sys

import pytest
import torch
from conftest import RUN_TO_RUN_NOISE, photo_jpeg

from labkit.decode.decoder_contract import (
    DecodeError,
)
from labkit.decode.registry import decode_image, get_decoder
from labkit.decode.resize import psnr


def test_only_the_torchvision_decoder_imports_torchvision():
    # A worker that starts fresh imports what unpickling its dataset needs: Pillow's decoders must not cost it
    # torchvision's import.
    code = (
        "import sys; from labkit.datasets.pack_datasets import PackedDataset;"
        "from labkit.decode.registry import get_decoder; get_decoder('pil-reduced');"
        "print('torchvision' in sys.modules); get_decoder('torchvision'); print('torchvision' in sys.modules)"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.split() == ["False", "True"]


def test_batched_jpeg_decode_matches_torchvision_decoder_on_cpu():
    from labkit.decode.torch_decoders import decode_jpeg_batch

    blobs = [torch.frombuffer(bytearray(photo_jpeg(index=k)), dtype=torch.uint8) for k in range(3)]
    batch = decode_jpeg_batch(blobs, 64, device="cpu")
    assert batch.shape == (3, 3, 64, 64) and batch.dtype == torch.uint8
    assert torch.equal(batch[1], decode_image(photo_jpeg(index=1), 64, "torchvision"))


def test_a_broken_file_in_a_batched_decode_is_named_by_its_position():
    from labkit.decode.torch_decoders import decode_jpeg_batch

    good = photo_jpeg()
    blobs = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in (good, good[: len(good) // 3], good)]
    with pytest.raises(DecodeError, match=r"batch item 1: .*bytes starting") as e:
        decode_jpeg_batch(blobs, 64, device="cpu")
    assert not RUN_TO_RUN_NOISE.search(str(e.value)), str(e.value)


@pytest.mark.cuda
def test_batched_jpeg_decode_on_cuda_is_close_to_cpu():
    from labkit.decode.torch_decoders import decode_jpeg_batch

    blobs = [torch.frombuffer(bytearray(photo_jpeg(index=k)), dtype=torch.uint8) for k in range(4)]
    on_gpu = decode_jpeg_batch(blobs, 256, device="cuda").cpu()
    on_cpu = decode_jpeg_batch(blobs, 256, device="cpu")
    assert all(psnr(a, b) >= 30 for a, b in zip(on_gpu, on_cpu))


def test_without_torchcodec_its_decoder_is_unlisted_and_named_with_the_install(monkeypatch):
    from labkit.core.errors import LabkitError
    from labkit.decode import registry, torch_decoders

    monkeypatch.setattr(torch_decoders, "torchcodec_available", lambda: False)
    monkeypatch.setattr(registry, "DECODERS", {k: v for k, v in registry.DECODERS.items() if k != "torchcodec"})
    monkeypatch.setattr(registry, "MISSING", {"torchcodec": "pip install 'torch-labkit[torchcodec]'"})
    with pytest.raises(LabkitError, match=r"not installed here: pip install 'torch-labkit\[torchcodec\]'"):
        get_decoder("torchcodec")
    with pytest.raises(LabkitError, match=r"pip install 'torch-labkit\[torchcodec\]'"):
        torch_decoders.decode_torchcodec(photo_jpeg())
    with pytest.raises(LabkitError, match="choose one of pil, pil-reduced, torchvision, simplejpeg$"):
        get_decoder("turbo")
