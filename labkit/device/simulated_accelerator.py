"""A stand-in for a GPU on a machine without one: a model step that takes as long as a named GPU needs for a named
model on the batch it is given, and uses no CPU while it waits.

On a CPU-only machine a real model step runs on the same cores as the DataLoader's workers, so "does loading hide
behind compute?" can only come out "no, they compete" — a fact about the machine, not about loading. The article's
question is about a GPU, which computes while the CPU's workers decode. `SimulatedAccelerator` answers it on any
machine: each step does what the device stage does here (nothing on a CPU; the copy to the device where CUDA
runs), then sleeps ``images / images_per_s`` seconds, the time a published benchmark gives that GPU for that many
images. Sleeping releases the core, as a CPU thread waiting on a GPU does. Every verdict measured against it says
which GPU, which model and whose figure (`SimulatedAccelerator.label`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from labkit.core.errors import LabkitValueError

#: Where the figures come from: NVIDIA's own training benchmark of ResNet-50 v1.5 in PyTorch, one GPU.
DLE_RESNET50 = (
    "NVIDIA DeepLearningExamples, PyTorch ResNet50 v1.5 README, training performance, 1 GPU, "
    "pytorch-21.03 NGC container"
)


@dataclass(frozen=True)
class AcceleratorModel:
    """A GPU running a model's training step at a published rate."""

    gpu: str  #: the device, as the source names it
    workload: str  #: the model and precision the rate is for
    images_per_s: float  #: training images a second, one GPU
    source: str  #: where the figure is published

    def __post_init__(self) -> None:
        if self.images_per_s <= 0:
            raise LabkitValueError(f"{self.gpu}: images_per_s={self.images_per_s}, a rate above 0")


#: The accelerators a learner can pick, by key; each figure is the source's single-GPU training throughput.
ACCELERATORS: dict[str, AcceleratorModel] = {
    "a100": AcceleratorModel("A100 80GB", "ResNet-50 v1.5 training, mixed precision", 2470.0, DLE_RESNET50),
    "a100-tf32": AcceleratorModel("A100 80GB", "ResNet-50 v1.5 training, TF32", 938.0, DLE_RESNET50),
    "v100": AcceleratorModel("V100 16GB", "ResNet-50 v1.5 training, mixed precision", 1200.0, DLE_RESNET50),
    "v100-fp32": AcceleratorModel("V100 16GB", "ResNet-50 v1.5 training, FP32", 367.0, DLE_RESNET50),
}


def accelerator(name: str | AcceleratorModel) -> AcceleratorModel:
    """The accelerator ``name`` names (a key of `ACCELERATORS`), or ``name`` itself when it is one already."""
    if isinstance(name, AcceleratorModel):
        return name
    try:
        return ACCELERATORS[name.lower()]
    except KeyError:
        raise LabkitValueError(
            f"no simulated accelerator {name!r}; pick one of {', '.join(ACCELERATORS)}, or describe your own with "
            "AcceleratorModel(gpu, workload, images_per_s, source)"
        ) from None


def batch_images(batch: Any) -> int:
    """How many images a batch holds: the first dimension of its first tensor (a ``(images, labels)`` pair, a
    dict, or a tensor)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)) and batch:
        return batch_images(batch[0])
    raise LabkitValueError(f"cannot tell how many images a {type(batch).__name__} holds: pass images= to the step")


class SimulatedAccelerator:
    """A model step for `labkit.measure.step_profile.profile_loader` or the ablation: ``step(batch)`` waits the time
    ``model`` needs for the batch's images, without using a core. ``steps`` and ``busy_s`` count what it did."""

    def __init__(self, model: str | AcceleratorModel = "a100", device: torch.device | str | None = None) -> None:
        self.model = accelerator(model)
        self.device = torch.device(device) if device is not None else None
        self.steps = 0
        self.busy_s = 0.0

    def seconds(self, images: int) -> float:
        """The time the accelerator needs for a training step on ``images`` images."""
        return images / self.model.images_per_s

    def __call__(self, batch: Any, images: int | None = None) -> None:
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the batch's copy is done before the "model" starts
        wait = self.seconds(batch_images(batch) if images is None else images)
        time.sleep(wait)
        self.steps += 1
        self.busy_s += wait

    @property
    def label(self) -> str:
        """How a verdict measured against it names it."""
        m = self.model
        return f"a simulated {m.gpu} ({m.workload}, {m.images_per_s:,.0f} images/s published by {m.source})"

    @property
    def short_label(self) -> str:
        """The accelerator in a few words: "a simulated A100 80GB"."""
        return f"a simulated {self.model.gpu}"

    def __repr__(self) -> str:
        return f"SimulatedAccelerator({self.model.gpu!r}, {self.model.images_per_s:g} images/s)"
