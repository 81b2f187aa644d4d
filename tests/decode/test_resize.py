"""labkit.decode.resize: torchvision's antialiased resize bit for bit, from torch alone; sizes and PSNR."""

import platform

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.decode import resize
from labkit.decode.decoder_contract import (
    target_hw,
)
from labkit.decode.resize import psnr, resize_uint8


def test_sizes_and_psnr_helpers():
    assert target_hw(8) == (8, 8) and target_hw((2, 3)) == (2, 3) and target_hw(None) is None
    for bad in ((1, 2, 3), 224.0, (224.0, 224), "224", True):
        with pytest.raises(LabkitTypeError, match="give whole pixels"):
            target_hw(bad)
    with pytest.raises(LabkitValueError, match="positive"):
        target_hw((0, 3))
    a = torch.zeros(3, 4, 4, dtype=torch.uint8)
    assert psnr(a, a) == float("inf") and psnr(a, a + 255) == pytest.approx(0.0)


def _torchvision_resize(image, hw):
    from torchvision.transforms.v2 import functional as F

    return F.resize(image, list(hw), interpolation=F.InterpolationMode.BILINEAR, antialias=True)


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(1, 300),
    w=st.integers(1, 300),
    oh=st.integers(1, 200),
    ow=st.integers(1, 200),
    channels_last=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_resize_is_torchvisions_bit_for_bit_stride_for_stride(h, w, oh, ow, channels_last, seed):
    assume((oh, ow) != (1, 1))  # torchvision fails there; the next test covers it
    pixels = torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
    image = pixels.permute(2, 0, 1) if channels_last else pixels.permute(2, 0, 1).contiguous()
    ours, theirs = resize_uint8(image, (oh, ow)), _torchvision_resize(image, (oh, ow))
    assert torch.equal(ours, theirs) and ours.stride() == theirs.stride()


def test_resize_without_the_vectorised_uint8_kernel_rounds_through_float_as_torchvision_does(monkeypatch):
    monkeypatch.setattr(resize, "NATIVE_UINT8_RESIZE", False)  # ours, read once at import
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")  # torchvision's, read per call
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    image = torch.randint(0, 256, (2, 3, 97, 131), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    ours = resize_uint8(image, (40, 64))
    assert ours.shape == (2, 3, 40, 64) and torch.equal(ours, _torchvision_resize(image, (40, 64)))


def test_a_resize_to_one_pixel_works_where_the_uint8_kernel_asserts(monkeypatch):
    image = torch.randint(0, 256, (3, 5, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    ours = resize_uint8(image, (1, 1))
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")  # torchvision's float path
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert ours.shape == (3, 1, 1) and torch.equal(ours, _torchvision_resize(image, (1, 1)))
