"""The resize every decoder ends with: torch's antialiased bilinear kernel on uint8 (`resize_uint8`, what
torchvision's ``F.resize(antialias=True)`` gives, bit for bit, from torch alone), a decoded H×W×3 array seen as a
C×H×W tensor without a copy (`chw_view`), and the fidelity a resize is chosen by (`psnr`,
``benchmarks/resize_candidates.py``).
"""

from __future__ import annotations

import math
import platform

import numpy as np
import torch

from labkit.core.errors import LabkitValueError
from labkit.core.torch_internals import antialiased_bilinear


def chw_view(pixels: np.ndarray) -> torch.Tensor:
    """An H×W×3 uint8 array as a (3, H, W) tensor view: channels-last memory, which torch's resize keeps."""
    return torch.from_numpy(pixels).permute(2, 0, 1)


#: Whether torch's CPU kernel resizes uint8 bytes as they are (vectorised on AVX2, AVX-512 and ARM).
NATIVE_UINT8_RESIZE = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512") or platform.machine() in (
    "aarch64",
    "arm64",
)


def resize_uint8(image: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """Antialiased bilinear resize of a uint8 (..., C, H, W) tensor: what torchvision's
    ``F.resize(image, hw, antialias=True)`` gives, bit for bit, from torch alone (see `torchvision_io`).

    On a CPU with torch's vectorised uint8 kernel (AVX2, AVX-512, ARM) the bytes are resized as they
    are, keeping a channels-last input channels-last (a pixel view of a Pillow image needs no copy);
    elsewhere (other CPUs, CUDA) through float32 and rounded back, as torchvision does.
    """
    channels, height, width = image.shape[-3:]
    if (height, width) == tuple(hw):
        return image
    batch = image.reshape(-1, channels, height, width)
    strides = batch.stride()
    if batch.is_contiguous(memory_format=torch.channels_last) and batch.shape[0] == 1 and image.numel() != strides[0]:
        # torch allocates a 1×C×H×W channels-last input's output as contiguous unless the batch stride says otherwise
        batch = batch.as_strided(batch.shape, (image.numel(),) + strides[1:])
    # torch's uint8 kernel fails an internal assert on a 1×1 output from a channels-first input (torch 2.14)
    if NATIVE_UINT8_RESIZE and image.device.type == "cpu" and tuple(hw) != (1, 1):
        out = antialiased_bilinear(batch, hw)
    else:
        out = antialiased_bilinear(batch.float(), hw).round_().to(torch.uint8)
    return out.reshape(image.shape[:-3] + (channels, *hw))


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """Peak signal-to-noise ratio in dB between two uint8 images of one shape (inf when equal)."""
    if a.shape != b.shape:
        raise LabkitValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    mse = torch.mean((a.to(torch.float64) - b.to(torch.float64)) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)
