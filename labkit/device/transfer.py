"""Host → device: overlapped copies, then uint8 → float, normalisation and mixing on the device
(article section 3.2, and the house rule that images stay uint8 until the last moment).

On CUDA, `DevicePrefetcher` copies batch k+1 from pinned memory on a side stream while the
model computes on batch k: the copy is issued ``non_blocking`` on the side stream, the
compute stream waits on it before using the batch, and ``record_stream`` tells the caching
allocator that the compute stream still uses that memory. Without pinned memory
(``DataLoader(pin_memory=True)``) a "non-blocking" copy is synchronous and overlaps nothing.
On the CPU the same object does the same conversions, so code and results do not change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from labkit.collate.mixing import MixUp
from labkit.core.errors import LabkitTypeError
from labkit.core.host_buffers import HostBuffers
from labkit.core.pass_through import PassThrough

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
Batch = tuple[torch.Tensor, torch.Tensor]
Mix = Callable[[torch.Tensor, torch.Tensor], Batch]


def normalize_affine(
    mean: Sequence[float], std: Sequence[float], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and shift per channel such that ``x·scale + shift == (x / 255 − mean) / std``."""
    mean_t = torch.as_tensor(mean, dtype=torch.float32, device=device).view(-1, 1, 1)
    std_t = torch.as_tensor(std, dtype=torch.float32, device=device).view(-1, 1, 1)
    return 1 / (255 * std_t), -mean_t / std_t


def normalize_uint8(
    images: torch.Tensor,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """uint8 (N×)C×H×W in 0..255 → float32 ``(x / 255 - mean) / std``, as ToTensor + Normalize give.

    One conversion and two in-place passes (``x * 1/(255·std) - mean/std``) instead of the textbook four: fewer passes
    over the batch's memory, which matters when the "device" is the CPU itself. ``out``: a float32 tensor of the same
    shape to write into (see `labkit.core.host_buffers.HostBuffers`), else a new one.
    """
    scale, shift = normalize_affine(mean, std, images.device)
    converted = images.to(torch.float32, copy=True) if out is None else out.copy_(images)  # never the input itself
    return converted.mul_(scale).add_(shift)


def normalize_mix_uint8(
    images: torch.Tensor,
    perm: torch.Tensor,
    lam: float,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    out: torch.Tensor | None = None,
    per_sample: bool | None = None,
) -> torch.Tensor:
    """uint8 N×C×H×W → normalised MixUp ``lam·x + (1−lam)·x[perm]`` in float32, in one pass.

    The same batch as `normalize_uint8` followed by `labkit.collate.mixing.mix_batch` with the same
    ``lam`` and ``perm`` (normalisation is affine, so it commutes with a weighted mean), at
    half the memory traffic. ``per_sample`` (default: on a CPU) works one sample at a time, so
    the float intermediates stay in cache (faster on a CPU than the two passes: ``benchmarks/README.md``);
    elsewhere whole-batch kernels (fewer launches).
    """
    scale, shift = normalize_affine(mean, std, images.device)
    out = torch.empty(images.shape, dtype=torch.float32, device=images.device) if out is None else out
    if not (images.device.type == "cpu" if per_sample is None else per_sample):
        partner = images.index_select(0, perm.to(images.device)).to(torch.float32)
        return out.copy_(images).lerp_(partner, 1 - lam).mul_(scale).add_(shift)
    partner = torch.empty(images.shape[1:], dtype=torch.float32, device=images.device)
    for i, j in enumerate(perm.tolist()):
        partner.copy_(images[j])
        out[i].copy_(images[i]).lerp_(partner, 1 - lam).mul_(scale).add_(shift)
    return out


def to_device(value: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=non_blocking)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device, non_blocking) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device, non_blocking) for k, v in value.items()}
    return value


def _record_stream(value: Any, stream: torch.cuda.Stream) -> None:
    if isinstance(value, torch.Tensor):
        value.record_stream(stream)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _record_stream(v, stream)
    elif isinstance(value, dict):
        for v in value.values():
            _record_stream(v, stream)


class DevicePrefetcher(PassThrough):
    """Wraps a loader of ``(uint8 images, labels)`` batches; yields device batches, one step ahead.

    ``transform`` is any ``images -> images`` run on the device on the uint8 batch (B×3×H×W) before the
    conversion: torchvision's v2 transforms that take uint8 batches (``v2.RandAugment()``, ``v2.AutoAugment()``,
    ``v2.ColorJitter(...)``, in a ``v2.Compose``; each draws once per call, so once per batch).
    ``normalize=(mean, std)`` (ImageNet's by default; ``None`` to keep uint8) converts on the
    device; ``mix`` is any ``(images, labels) -> (images, labels)`` applied there after, on the float batch:
    ``labkit.collate.mixing.MixUp(num_classes=10)``, which is folded into the normalisation pass
    (`normalize_mix_uint8`) rather than run after it (a subclass of it is called as given), or torchvision's
    ``v2.MixUp`` / ``v2.CutMix`` (which refuse uint8 batches). Attributes it lacks are the loader's
    (``.dataset``, ``.batch_size``, ``.batches_left``...), as torchvision's ``evaluate`` reads them.
    On a CPU the float batches are written into reused `HostBuffers` (``buffers``), so each
    step does not pay 12,800 page faults for a fresh 50 MiB tensor; a batch you keep is never
    overwritten. `state_dict` is the loader's (and the mix's) as of the batch last handed out, so a
    checkpoint saves the prefetcher's state, not the loader's, which is a batch ahead on CUDA.
    """

    wraps = "loader"

    def __init__(
        self,
        loader: Iterable,
        device: str | torch.device | None = None,
        normalize: tuple[Sequence[float], Sequence[float]] | None = (IMAGENET_MEAN, IMAGENET_STD),
        mix: Mix | None = None,
        channels_last: bool = False,
        buffers: HostBuffers | None = None,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        self.loader = loader
        self.transform = transform
        self.device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        self.normalize, self.mix, self.channels_last = normalize, mix, channels_last
        self.buffers = buffers if buffers is not None else HostBuffers()
        self._state: dict[str, Any] | None = None  # on CUDA: the state as of the batch last handed out

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def prepare(self, batch: Any) -> Any:
        """One batch copied to the device and converted there, as `__iter__` hands it out (there on the side
        stream on CUDA); public so that a profiler can time this stage apart from the wait for the batch."""
        batch = to_device(batch, self.device, non_blocking=True)
        if not isinstance(batch, (list, tuple)) or not isinstance(batch[0], torch.Tensor):
            return batch
        images, rest = batch[0], list(batch[1:])
        if self.transform is not None:
            images = self.transform(images)
        mix = self.mix
        if self.normalize is not None and not images.is_floating_point():
            out = self.buffers.empty(images.shape, torch.float32, images.device)
            if type(mix) is MixUp and images.ndim == 4:  # a subclass may mix differently: not fused
                lam, perm = mix.draw(len(images))
                images = normalize_mix_uint8(images, perm, lam, *self.normalize, out=out)
                rest[0], mix = mix.targets(rest[0], perm, lam), None
            else:
                images = normalize_uint8(images, *self.normalize, out=out)
        if self.channels_last and images.ndim == 4:
            images = images.contiguous(memory_format=torch.channels_last)
        if mix is not None:
            images, rest[0] = mix(images, rest[0])
        return type(batch)([images, *rest]) if isinstance(batch, tuple) else [images, *rest]

    def state_dict(self) -> dict[str, Any]:
        """The loader's state (and ``mix``'s, where it has one) as of the last batch handed out, not of the
        one prepared ahead of it on CUDA: what a checkpoint of the loop must hold."""
        return self._state if self._state is not None else self._snapshot()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict`: the loader's place, and ``mix``'s draws."""
        self.loader.load_state_dict(state["loader"])  # type: ignore[attr-defined]
        if "mix" in state:
            self.mix.load_state_dict(state["mix"])  # type: ignore[union-attr]
        self._state = None

    def _snapshot(self) -> dict[str, Any]:
        if not hasattr(self.loader, "state_dict"):
            raise LabkitTypeError(
                f"{type(self.loader).__name__} keeps no state: build the loader with "
                "labkit.make_loader, whose loader does"
            )
        state = {"loader": self.loader.state_dict()}  # type: ignore[attr-defined]
        if hasattr(self.mix, "state_dict"):
            state["mix"] = self.mix.state_dict()  # type: ignore[union-attr]
        return state

    def __iter__(self) -> Iterator[Any]:
        saves = hasattr(self.loader, "state_dict")
        self._state = None
        if self.device.type != "cuda":
            for batch in self.loader:
                yield self.prepare(batch)
            return
        side = torch.cuda.Stream(self.device)
        batches = iter(self.loader)

        def preload() -> tuple[Any, dict[str, Any] | None]:
            try:
                batch = next(batches)
            except StopIteration:
                return None, None
            with torch.cuda.stream(side):
                prepared = self.prepare(batch)
            return prepared, (self._snapshot() if saves else None)

        upcoming, upcoming_state = preload()
        while upcoming is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(side)  # the copy and conversion of `upcoming` are done before compute uses it
            current, self._state = upcoming, upcoming_state
            _record_stream(current, compute)  # its memory is in use on the compute stream too
            upcoming, upcoming_state = preload()  # issue the next copy before handing this batch out
            yield current
        self._state = None
