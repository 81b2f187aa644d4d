"""Switches and facts read from the environment, in one place so every command, notebook and worker agrees.

The ``LABKIT_*`` variables (`QUICK_ENV`, `PROFILE_ENV`, `DATA_ENV`), the CPUs this process may use,
the clone labkit runs from, and where this process stands in a distributed job: its rank among the
ranks, and its consumer slot among every rank × DataLoader worker.
"""

from __future__ import annotations

import os

from labkit.core.errors import LabkitValueError

QUICK_ENV = "LABKIT_QUICK"
PROFILE_ENV = "LABKIT_PROFILE"
DATA_ENV = "LABKIT_DATA"


def configured_data_folder() -> str | None:
    """The data folder ``LABKIT_DATA`` names (user's ``~`` expanded, made absolute), or None when unset."""
    configured = os.environ.get(DATA_ENV)
    return os.path.abspath(os.path.expanduser(configured)) if configured else None


def flag(name: str, default: bool = False) -> bool:
    """An on/off ``LABKIT_*`` switch: on when set to anything but ``""``/``0``/``false``/``no``; ``default``
    when unset."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in ("", "0", "false", "no")


def quick_mode(default: bool = False) -> bool:
    """``LABKIT_QUICK``: every command and notebook then shrinks its data to run on a 2-core laptop in under
    a minute.

    ``default`` answers when the variable is unset: the CLI runs at full scale unless asked,
    the notebooks run quick unless asked (a learner's first run should take a minute, not an hour).
    """
    return flag(QUICK_ENV, default)


def profile_enabled() -> bool:
    """``LABKIT_PROFILE``: labkit's loaders print a wait/compute report at the end of every epoch."""
    return flag(PROFILE_ENV)


def usable_cpu_ids() -> list[int]:
    """Ids of the CPUs this process may run on (taskset/cgroup affinity; every CPU where the OS has no
    affinity call)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return list(range(os.cpu_count() or 1))


def usable_cpus() -> int:
    """How many CPUs this process may run on (respects affinity, unlike ``os.cpu_count``)."""
    return len(usable_cpu_ids())


def clone_root() -> str | None:
    """The top of the source checkout labkit runs from (the folder holding its pyproject.toml), or None for
    an installed labkit."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return top if os.path.exists(os.path.join(top, "pyproject.toml")) else None


def local_rank() -> int:
    """This process's rank on its node, as torchrun says it (``LOCAL_RANK``); 0 outside torchrun. A value that
    is not a whole number is an error naming the variable."""
    value = os.environ.get("LOCAL_RANK", "0")
    try:
        return int(value)
    except ValueError:
        raise LabkitValueError(
            f"LOCAL_RANK={value!r} is not a whole number: unset it, or start under torchrun, which sets it"
        ) from None


def rank_and_world(rank: int | None = None, world_size: int | None = None, required: bool = False) -> tuple[int, int]:
    """(rank, world size): as given, else from torch.distributed when it is initialised, else (0, 1) — or,
    with ``required`` (a sampler that splits data across ranks must not guess), an error naming the fix."""
    if rank is None or world_size is None:
        import torch.distributed as dist

        ready = dist.is_available() and dist.is_initialized()
        if not ready and required:
            raise LabkitValueError(
                "pass the rank and the number of ranks (num_replicas), or initialise torch.distributed first"
            )
        rank = (dist.get_rank() if ready else 0) if rank is None else rank
        world_size = (dist.get_world_size() if ready else 1) if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise LabkitValueError(f"rank {rank} is not in [0, {world_size})")
    return int(rank), int(world_size)


def consumer_slot(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(this consumer's id, number of consumers) over every rank × DataLoader worker."""
    from torch.utils.data import get_worker_info

    rank, world_size = rank_and_world(rank, world_size)
    info = get_worker_info()
    workers, worker = (info.num_workers, info.id) if info else (1, 0)
    return rank * workers + worker, world_size * workers
