"""One CPU budget for every loader of a process: workers per rank, decode threads per process, torch threads.

The usable CPUs (affinity, not the machine's count) are shared by every training process on the node: under
``torchrun`` that is ``LOCAL_WORLD_SIZE`` ranks, each with its own loader. A default worth having divides by
them, or 8 ranks × 8 workers on 16 CPUs start 64 busy loader processes (the article's 4.4 trap). Each rank's
share feeds its main process (the step, the device stage: one CPU) and its workers; each loader process
decodes with threads that together fill the share without exceeding it.

A second loader of the same process (a validation loader) has the same budget: the two loaders take turns,
so their processes never decode at the same time; what idle persistent workers cost is memory, not CPU time
(`benchmarks/second_loader.py` measures both sides of keeping them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from labkit.core.environment import usable_cpus
from labkit.core.errors import LabkitValueError
from labkit.core.wording import count

MAX_WORKERS = 8  # past this, more workers mostly add memory and start-up time
LOCAL_RANKS_ENV = "LOCAL_WORLD_SIZE"


def ranks_on_node() -> tuple[int, str]:
    """How many training processes share this node's CPUs, and who says so: ``LOCAL_WORLD_SIZE`` (torchrun),
    else the initialised process group's size (every rank on this node), else 1."""
    value = os.environ.get(LOCAL_RANKS_ENV)
    if value is not None:
        try:
            ranks = int(value)
        except ValueError:
            raise LabkitValueError(
                f"{LOCAL_RANKS_ENV}={value!r} is not a whole number: unset it, or start under torchrun, which sets it"
            ) from None
        if ranks < 1:
            raise LabkitValueError(f"{LOCAL_RANKS_ENV}={value}: at least 1 rank per node")
        return ranks, f"{LOCAL_RANKS_ENV}={ranks}"
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), "the initialised process group (taken as one node)"
    return 1, "no torchrun, no process group"


@dataclass(frozen=True)
class CpuBudget:
    """The CPUs one rank may use, and how its loaders spend them."""

    cpus: int  #: usable CPUs of this node (this process's affinity)
    ranks: int  #: training processes sharing them
    source: str  #: where ``ranks`` came from
    main_process_steps: bool = True  #: one of the rank's CPUs kept for its main process (the model's step)
    max_workers: int = MAX_WORKERS

    @property
    def share(self) -> int:
        """This rank's CPUs: the node's divided by its ranks, at least 1."""
        return max(1, self.cpus // self.ranks)

    @property
    def workers_per_rank(self) -> int:
        """DataLoader workers a rank's loader starts by default: its share, less the main process's CPU when it
        steps, at least 1 and at most `max_workers`."""
        return max(1, min(self.max_workers, self.share - (1 if self.main_process_steps else 0)))

    def decode_threads(self, workers: int) -> int:
        """Decoding threads in each loader process of a rank with ``workers`` workers (0: the main process
        decodes), so that processes × threads fill the rank's share and never exceed it."""
        return max(1, self.share // max(1, workers))

    def main_threads(self, workers: int) -> int:
        """torch threads for the rank's main process: the share its ``workers`` leave, at least one."""
        return max(1, self.share - workers)

    @property
    def reasoning(self) -> str:
        """Why ``workers_per_rank``: the arithmetic, in a sentence or three."""
        naive = self.ranks * (self.max_workers + 1)
        busy = self.ranks * (self.workers_per_rank + 1)
        said = "" if self.source == "given" else f" ({self.source})"
        return (
            f"{count(self.ranks, 'rank')}{said} x ({count(self.max_workers, 'worker')} + 1 main "
            f"process) = {naive} busy processes on {count(self.cpus, 'CPU')} would be {naive / self.cpus:.2f}x "
            f"the CPUs (the article's 8 GPUs x 8 workers trap). Each rank gets {self.cpus} / {self.ranks} = "
            f"{count(self.share, 'CPU')}, less one for its main process: {count(self.workers_per_rank, 'worker')} "
            f"per rank, {busy} busy processes in all ({busy / self.cpus:.2f}x the CPUs), each worker decoding "
            f"with {count(self.decode_threads(self.workers_per_rank), 'thread')}."
        )


def cpu_budget(
    ranks: int | None = None, cpus: int | None = None, main_process_steps: bool = True, max_workers: int = MAX_WORKERS
) -> CpuBudget:
    """The budget of one rank: ``ranks`` sharing ``cpus`` (default: `ranks_on_node`, `usable_cpus`).

    ``main_process_steps`` keeps one of the rank's CPUs for its main process (the model, the device stage);
    ``False`` (a loader measured with nothing else to do) gives the workers the whole share.
    """
    source = "given"
    if ranks is None:
        ranks, source = ranks_on_node()
    cpus = usable_cpus() if cpus is None else cpus
    if cpus < 1 or ranks < 1:
        raise LabkitValueError(f"cpus={cpus}, ranks={ranks}: a budget needs at least 1 of each")
    return CpuBudget(int(cpus), int(ranks), source, main_process_steps, max_workers)
