"""The ablation's versions: the article's four (section 5) as its code runs them, and the kit's beyond them, each a
row of `VERSIONS` (``labkit ablation``) or `TRAINING_VERSIONS` (``--train``), with the settings a run takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.core.cpus import cpu_budget
from labkit.datasets.storage_kinds import DECODED_PACK, ENCODED_PACK, FOLDER, PACK
from labkit.decode.decoder_contract import OUTPUT_SIZE
from labkit.decode.registry import NO_DECODE
from labkit.device.simulated_accelerator import AcceleratorModel
from labkit.device.transfer import normalize_uint8

SEED_BATCH = 64
GPU_DECODER = "nvjpeg"  # v8's: a device decoder of `labkit.decode.registry`, decoding each batch after the loader
TRAIN_OUTPUT_SIZE = 224  # RandomResizedCrop(224): what ImageNet recipes train on
SEED_MACHINE = "the article's run: 8-core CPU, one consumer GPU, SSD, 20,000 photos of about 200 KB"


@dataclass(frozen=True)
class AblationVersion:
    id: str
    name: str
    storage: str  # a kind of labkit.datasets.storage_kinds, or "tuned"
    decoder: str  # a labkit decoder, "fastest", NO_DECODE, GPU_DECODER (a device decoder, after the loader) or "tuned"
    workers: bool  # True: worker processes (num_workers = AblationSettings.num_workers); False: num_workers=0
    prefetch_factor: int | None  # None: DataLoader's default (2)
    normalize_in_workers: bool
    mix: str  # "none", "collate" (float MixUp in the workers) or "device"
    sampler: str = "random"  # or "block"
    seed_step_s: float | None = None
    cuda_only: bool = False
    reuse_host_buffers: bool = False  # labkit.core.host_buffers: float batches written into reused CPU memory
    budget_main_threads: bool = False  # main process runs only on the cores the workers leave
    checksum_reads: bool = True  # False: checksums were verified once (labkit verify), not on every read
    batch_slots: bool = (
        False  # labkit.workers.shared_slots: workers write batches into reused shared memory (CPU device only:
    )
    # with CUDA the DataLoader's pin thread copies batches to pinned memory off the training thread)
    crop: bool = False  # a training version: RandomResizedCrop(224) + flip per sample, instead of a resize to 256
    by_make_loader: bool = False  # labkit's versions: the loader is make_loader's; else the article's DataLoader code

    @property
    def output_size(self) -> int:
        return TRAIN_OUTPUT_SIZE if self.crop else OUTPUT_SIZE


VERSIONS: tuple[AblationVersion, ...] = (
    AblationVersion(
        "v1",
        "files, PIL, Resize+ToTensor+Normalize, num_workers=0",
        FOLDER,
        "pil",
        False,
        None,
        True,
        "none",
        seed_step_s=0.58,
    ),
    AblationVersion(
        "v2",
        "+ workers, persistent_workers, pin_memory where CUDA runs",
        FOLDER,
        "pil",
        True,
        None,
        True,
        "none",
        seed_step_s=0.35,
    ),
    AblationVersion(
        "v3", "+ one packed file read through mmap", PACK, "pil", True, None, True, "none", seed_step_s=0.26
    ),
    AblationVersion(
        "v4", "+ prefetch_factor=4, MixUp in collate", PACK, "pil", True, 4, True, "collate", seed_step_s=0.21
    ),
    AblationVersion(
        "v5",
        "+ fastest decoder, uint8 across processes (in reused slots on a CPU), normalise+MixUp on device",
        PACK,
        "fastest",
        True,
        4,
        False,
        "device",
        reuse_host_buffers=True,
        budget_main_threads=True,
        batch_slots=True,
        by_make_loader=True,
    ),
    AblationVersion(
        "v6",
        "+ pre-decoded uint8 pack verified once, block shuffle, batched reads, no workers",
        DECODED_PACK,
        NO_DECODE,
        False,
        None,
        False,
        "device",
        sampler="block",
        reuse_host_buffers=True,
        budget_main_threads=True,
        checksum_reads=False,
        by_make_loader=True,
    ),
    AblationVersion(
        "v7",
        "the settings `labkit autotune` picks here",
        "tuned",
        "tuned",
        True,
        None,
        False,
        "device",
        reuse_host_buffers=True,
        budget_main_threads=True,
        checksum_reads=False,
        by_make_loader=True,
    ),
    AblationVersion(
        "v8",
        "GPU JPEG decode (nvJPEG), whole batch at once",
        ENCODED_PACK,
        GPU_DECODER,
        True,
        4,
        False,
        "device",
        cuda_only=True,
        reuse_host_buffers=True,
        budget_main_threads=True,
        by_make_loader=True,
    ),
)


#: ``labkit ablation --train``: the article's first versions as people train with them (the random-resized crop of
#: every ImageNet recipe, after a full decode), beside labkit's training pipeline (the crop inside the decode).
TRAINING_VERSIONS: tuple[AblationVersion, ...] = (
    AblationVersion(
        "t1",
        "files, PIL, RandomResizedCrop(224)+flip+ToTensor+Normalize, num_workers=0",
        FOLDER,
        "pil",
        False,
        None,
        True,
        "none",
        crop=True,
    ),
    AblationVersion(
        "t2",
        "+ workers, persistent_workers, pin_memory where CUDA runs",
        FOLDER,
        "pil",
        True,
        None,
        True,
        "none",
        crop=True,
    ),
    AblationVersion("t3", "+ one packed file read through mmap", PACK, "pil", True, None, True, "none", crop=True),
    AblationVersion(
        "t5",
        "+ the crop inside the fastest DCT-scaled decode, uint8 across processes (in reused slots on a CPU), "
        "normalise+MixUp on device",
        PACK,
        "fastest",
        True,
        4,
        False,
        "device",
        reuse_host_buffers=True,
        budget_main_threads=True,
        batch_slots=True,
        crop=True,
        by_make_loader=True,
    ),
)


class NormalizeInWorker:
    """The article's ToTensor + Normalize, run inside ``__getitem__`` (v1–v4): float32 crosses processes."""

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return normalize_uint8(image)


@dataclass
class AblationSettings:
    batch_size: int = SEED_BATCH
    num_workers: int | None = None  # None: the CPU budget's (one CPU left for the model step with model=True)
    runs: int = 3
    steps: int = 20  # batches per measured run (at most one epoch)
    min_seconds: float = 3.0  # a fast version is measured over more runs until they add up to this long
    model: bool = False
    #: with ``model``: a key of `labkit.device.simulated_accelerator.ACCELERATORS` ("a100") to step against a
    #: simulated GPU instead of running a real model ("": a small CNN on a CPU, ResNet-50 on a GPU)
    accelerator: str | AcceleratorModel = ""
    cold: bool = False
    seed: int = 0
    device: str = ""  # "": cuda when available, else cpu

    def resolved_device(self) -> torch.device:
        return torch.device(self.device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def resolved_num_workers(self) -> int:
        """``num_workers``, else `labkit.core.cpus`'s: the rank's CPUs measuring a loader alone, one left for a
        model."""
        if self.num_workers is not None:
            return self.num_workers
        return cpu_budget(main_process_steps=self.model).workers_per_rank
