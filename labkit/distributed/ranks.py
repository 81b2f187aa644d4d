"""Distributed loading on torch.distributed (article section 4.4): set-up and local staging (the workers per rank
are `labkit.core.cpus`'s).

No cluster code of our own: process groups come from ``torchrun``'s environment, splitting
comes from `labkit.samplers.block_shuffle.DistributedBlockSampler`, and the checks use collectives.
"""

from __future__ import annotations

import datetime
import gc
import os
import shutil
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from labkit.core.atomic import atomic_file, clear_dead_temporaries
from labkit.core.disk_space import require_space
from labkit.core.environment import local_rank as this_node_rank
from labkit.core.errors import LabkitOSError, LabkitRuntimeError, LabkitValueError
from labkit.core.string_table import PathLike
from labkit.core.wording import count

_CHUNK = 1 << 22


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str
    device: torch.device


def init_from_env(backend: str | None = None, timeout: datetime.timedelta | None = None) -> DistInfo:
    """Join the process group ``torchrun`` describes in the environment (nccl with CUDA, else gloo).

    ``timeout`` bounds how long a collective waits for the other ranks (torch's default is long:
    10 to 30 minutes) — a test or a demo sets it short so a hang becomes an error."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise LabkitRuntimeError(
            f"{', '.join(missing)} not set: start this under torchrun, e.g. "
            "`torchrun --nproc_per_node=2 -m labkit.course.ddp_demo`"
        )
    local_rank = this_node_rank()
    cuda = torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    device = (
        torch.device("cuda", local_rank % torch.cuda.device_count())
        if cuda and backend == "nccl"
        else torch.device("cpu")
    )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend, **({"timeout": timeout} if timeout is not None else {}))
    return DistInfo(
        dist.get_rank(),
        dist.get_world_size(),
        local_rank,
        int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size())),
        backend,
        device,
    )


def close_process_group() -> None:
    """Leave the default process group so the process exits cleanly.

    Delete the DistributedDataParallel models (and their optimizers) first: with gloo, a DDP reducer
    still alive at interpreter exit, or a rank leaving while another is still in its last collective,
    can abort a process whose work is done ("terminate called without an active exception", about one
    run in three of ``labkit.course.ddp_demo`` on torch 2.14 without this). Every rank collects garbage, waits
    for the others at a barrier, and then the group goes."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def _crc32(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _copy_verified(src: str, dst: str) -> None:
    crc = 0
    with open(src, "rb") as fin, atomic_file(dst) as fout:
        while chunk := fin.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            fout.write(chunk)
        fout.flush()
        if _crc32(fout.name) != crc:  # read back before it is published
            raise LabkitOSError(f"{dst}: copy of {src} does not match its checksum; check the local disk and retry")
        shutil.copystat(src, fout.name)


def stage_to_local(shards: Sequence[PathLike], local_dir: PathLike, local_rank: int | None = None) -> list[str]:
    """Copy shards from shared storage to this node's disk once per node (article §4.4); return local paths.

    Local rank 0 copies, checking each copy against the CRC32 of what it read; the other
    ranks of the node wait at a barrier. A shard already there with the source's size and
    checksum is kept, so an interrupted staging resumes where it stopped. Shards that cannot fit
    on the local disk are refused before any is copied (`labkit.core.disk_space.DiskFullError`).
    """
    local_dir = os.fspath(local_dir)
    local_rank = this_node_rank() if local_rank is None else local_rank
    targets = [os.path.join(local_dir, os.path.basename(os.fspath(s))) for s in shards]
    if len(set(targets)) != len(targets):
        raise LabkitValueError("two shards have the same file name; staging would overwrite one with the other")
    if local_rank == 0:
        os.makedirs(local_dir, exist_ok=True)
        todo = [
            (src, dst)
            for src, dst in zip(map(os.fspath, shards), targets)
            if not (os.path.exists(dst) and os.path.getsize(dst) == os.path.getsize(src) and _crc32(dst) == _crc32(src))
        ]
        for _, dst in todo:  # a killed earlier staging's partial copies, before the space is counted
            clear_dead_temporaries(dst)
        stale = [os.path.getsize(dst) for _, dst in todo if os.path.exists(dst)]  # each freed once its copy lands
        require_space(
            local_dir,
            sum(os.path.getsize(src) for src, _ in todo) - sum(stale) + max(stale, default=0),
            f"{count(len(todo), 'shard')} to copy",
        )
        for src, dst in todo:
            _copy_verified(src, dst)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    return targets


def file_crc32(path: PathLike) -> int:
    """The CRC32 of a whole file, the checksum `stage_to_local` checks its copies against (to print or compare)."""
    return _crc32(os.fspath(path))
