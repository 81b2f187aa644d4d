"""Big CPU tensors reused between batches, so a CPU "device stage" is not page-fault bound.

A normalised float batch of 64×3×256×256 is 50 MiB. glibc serves any block over 32 MiB with a
fresh ``mmap`` and unmaps it on ``free``, so each new batch touches 12,800 fresh pages: a page
fault and a zeroed page each, and the conversion of a uint8 batch to float then costs several times what
it costs into a reused buffer (the figures: ``benchmarks/README.md``, "Figures behind design choices"). On a
GPU, PyTorch's caching allocator does this reuse already; on a CPU nothing does.

`HostBuffers` is that caching for the CPU, made safe: a buffer is handed out again only when
nothing outside the pool refers to it or to its memory (no tensor, no view), so a batch you
keep is never overwritten. (Raising glibc's mmap threshold with ``mallopt`` looks like the same
fix, but it was measured to fragment the heap instead.)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.utils.data import get_worker_info

from labkit.core.errors import LabkitValueError
from labkit.core.torch_internals import new_shared_tensor, storage_use_count

_POOL_REFS = 4  # the pool's list, the caller's loop variable, this function's argument, getrefcount's
_STORAGE_REFS = 2  # the tensor itself, the temporary storage object asked about it


def writable_tensors() -> AbstractContextManager[Any]:
    """A block whose new tensors are normal ones even under ``torch.inference_mode()``: a buffer that threads,
    workers or later batches write in place must not be an inference tensor (written outside inference mode,
    it raises "Inplace update to inference tensor outside InferenceMode")."""
    return torch.inference_mode(False)


def storage_refs(tensor: torch.Tensor) -> int | None:
    """How many tensors, views and storage objects refer to ``tensor``'s memory (``tensor`` counts);
    ``None`` where this PyTorch cannot tell."""
    count = storage_use_count(tensor)
    return None if count is None else count - (_STORAGE_REFS - 1)


def _unreferenced(tensor: torch.Tensor) -> bool:
    refs = storage_refs(tensor)
    return refs is not None and refs <= 1 and sys.getrefcount(tensor) <= _POOL_REFS


class HostBuffers:
    """A few big CPU tensors, handed out again once unreferenced (the CPU's caching allocator).

    ``empty(shape, dtype)`` behaves like ``torch.empty``; on CUDA devices it is exactly
    ``torch.empty``, since the caching allocator already reuses memory there. At most
    ``keep`` buffers are kept; beyond that, fresh tensors are allocated and not kept.
    """

    def __init__(self, keep: int = 4) -> None:
        if keep < 0:
            raise LabkitValueError(f"keep must be >= 0, got {keep}")
        self.keep = keep
        self._buffers: list[torch.Tensor] = []
        self.reused = 0
        self.allocated = 0

    def empty(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
        """An uninitialised tensor of ``shape``/``dtype``: a free kept buffer when there is one."""
        shape = torch.Size(shape)
        if torch.device(device).type != "cpu":
            return torch.empty(shape, dtype=dtype, device=device)
        for buffer in self._buffers:
            if buffer.shape == shape and buffer.dtype == dtype and _unreferenced(buffer):
                self.reused += 1
                return buffer
        self.allocated += 1
        with writable_tensors():  # kept for later batches, which may come outside inference mode
            fresh = torch.empty(shape, dtype=dtype)
        if len(self._buffers) < self.keep:
            self._buffers.append(fresh)
        return fresh

    def __repr__(self) -> str:
        return (
            f"HostBuffers(keep={self.keep}, holding {len(self._buffers)}, "
            f"{self.reused} reused, {self.allocated} allocated)"
        )


def batch_buffer(shape: Sequence[int], dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    """An uninitialised tensor for a whole batch; inside a DataLoader worker it lives in shared
    memory (as default_collate's output does), so it reaches the main process without a copy.
    Never an inference tensor (`writable_tensors`): decode threads fill it outside the caller's mode."""
    with writable_tensors():
        if get_worker_info() is None:
            return torch.empty(tuple(shape), dtype=dtype)
        return new_shared_tensor(tuple(shape), dtype)
