"""Checks a loader configuration against this machine before it crashes or crawls (article §4.4, 6.1, 6.5).

Each check gives a level (ok / warn / fail), what it found with the numbers, and a one-line
fix. `diagnose` runs them all for a planned ``num_workers × prefetch_factor × batch_size``;
``labkit doctor`` prints them. `labkit.workers.thread_budget.limit_worker_threads` is the ``worker_init_fn`` that fixes
thread oversubscription inside workers.
"""

from __future__ import annotations

import math
import multiprocessing
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from labkit.core.cpus import cpu_budget
from labkit.core.environment import usable_cpus
from labkit.core.machine import MemoryFacts, memory_facts, os_name
from labkit.core.wording import count, first
from labkit.workers.thread_budget import threads_per_worker

GIB = 2**30


def shm_batches(num_workers: int, prefetch_factor: int) -> int:
    """Most batches a loader holds in /dev/shm at once: num_workers × prefetch_factor made or waiting,
    the one the training step holds, and the next, which arrives while ``for batch in loader``
    still holds the last (peaks of workers × prefetch + 1 and + 2 batches were measured in a
    small /dev/shm). None without workers: the main process makes batches in its own memory."""
    return num_workers * prefetch_factor + 2 if num_workers else 0


@dataclass(frozen=True)
class LoaderPlan:
    """The loader settings to check: per rank, and how many ranks share the node."""

    num_workers: int
    prefetch_factor: int = 2
    batch_size: int = 64
    image: tuple[int, ...] = (3, 256, 256)
    bytes_per_value: int = 1  # uint8 images; 4 for float32
    ranks_per_node: int = 1
    pin_memory: bool = False
    main_threads: int | None = None  # the main process's torch threads; None: torch.get_num_threads()
    decode_threads: int | None = None  # threads decoding a batch in each loader process; None: their share

    @property
    def batch_bytes(self) -> int:
        return self.batch_size * math.prod(self.image) * self.bytes_per_value

    @property
    def shm_batches(self) -> int:
        """Most batches in /dev/shm at once per rank (see `shm_batches`)."""
        return shm_batches(self.num_workers, self.prefetch_factor)

    @property
    def shm_bytes(self) -> int:
        """The most /dev/shm the plan uses at once on the node (`shm_batches` on every rank)."""
        return self.ranks_per_node * self.shm_batches * self.batch_bytes


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "warn" or "fail"
    check: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"[{self.level.upper():4}] {self.check}: {self.message}"
        return text + (f"\n       fix: {self.fix}" if self.fix else "")


def _size(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


def check_shared_memory(plan: LoaderPlan, facts: MemoryFacts) -> Finding:
    """Will the batches on their way from workers to the main process fit in /dev/shm?"""
    if plan.num_workers == 0:
        return Finding("ok", "shared memory", "no workers: batches never pass through /dev/shm")
    need = plan.shm_bytes
    what = (
        f"{count(plan.ranks_per_node, 'rank')} × (num_workers {plan.num_workers} × prefetch_factor "
        f"{plan.prefetch_factor} + 2) × "
        f"{plan.batch_bytes / 2**20:.1f} MiB batches = {_size(need)} in /dev/shm at once"
    )
    if facts.shm_total is None or facts.shm_free is None:
        return Finding("ok", "shared memory", f"{what}; /dev/shm not available on {os_name()}: none to run out of")
    if facts.shm_total == 0:  # a tmpfs mounted without a size limit reports no blocks
        return Finding("ok", "shared memory", f"{what}; /dev/shm reports no size limit to run out of")
    fix = (
        "give the container more (docker run --shm-size=8g), or lower prefetch_factor, num_workers or the batch "
        "size (and keep batches uint8). set_sharing_strategy('file_system') does not help: both strategies put "
        "every batch in /dev/shm; it is the fix for 'Too many open files'"
    )
    if need > facts.shm_free:
        return Finding(
            "fail",
            "shared memory",
            f"{what}, but only {_size(facts.shm_free)} free: expect 'unable to "
            "allocate shared memory(shm) ... No space left on device' (some torch releases print another "
            "errno there) from a worker whose collate_fn stacks into /dev/shm, a loader that waits forever when a "
            "worker's finished batch cannot "
            "be moved there (it is dropped), or, where torch cannot reserve the space up front, "
            "'DataLoader worker ... killed by signal: Bus error'",
            fix,
        )
    if need > facts.shm_free / 2:
        return Finding("warn", "shared memory", f"{what}, over half of the {_size(facts.shm_free)} free", fix)
    return Finding("ok", "shared memory", f"{what} of {_size(facts.shm_free)} free")


def check_pinned_memory(plan: LoaderPlan, facts: MemoryFacts, cuda: bool) -> Finding:
    if not plan.pin_memory:
        return Finding(
            "ok",
            "pinned memory",
            "pin_memory off" + ("" if not cuda else "; host→device copies cannot overlap compute"),
            "" if not cuda else "pin_memory=True with non_blocking copies (labkit.device.transfer.DevicePrefetcher)",
        )
    if not cuda:
        return Finding(
            "warn",
            "pinned memory",
            "pin_memory=True without a CUDA device does nothing useful",
            "pin_memory=torch.cuda.is_available()",
        )
    pinned = plan.ranks_per_node * (plan.num_workers * plan.prefetch_factor + 1) * plan.batch_bytes
    text = f"about {_size(pinned)} of page-locked RAM ({_size(facts.ram_available)} available)"
    if facts.ram_available and pinned > facts.ram_available / 4:
        return Finding(
            "warn",
            "pinned memory",
            text + ": pinned pages cannot be swapped, the OS can run out",
            "lower prefetch_factor or batch size, keep batches uint8",
        )
    return Finding("ok", "pinned memory", text)


def check_cpus(plan: LoaderPlan, cpus: int) -> Finding:
    processes = plan.ranks_per_node * (plan.num_workers + 1)
    text = (
        f"{count(plan.ranks_per_node, 'rank')} × ({count(plan.num_workers, 'worker')} + 1 main) = "
        f"{processes} busy "
        f"processes on {count(cpus, 'CPU')}"
    )
    per_rank = cpu_budget(ranks=plan.ranks_per_node, cpus=cpus).workers_per_rank
    fix = f"num_workers={per_rank} per rank (CPUs ÷ ranks, less one for the main process: labkit.core.cpus.cpu_budget)"
    if processes > 2 * cpus:
        return Finding("fail", "CPUs", text + ": they will fight for cores (article §4.4: 8 GPUs × 8 workers)", fix)
    if processes > cpus + plan.ranks_per_node:
        return Finding("warn", "CPUs", text + ": more processes than cores", fix)
    return Finding("ok", "CPUs", text)


def check_worker_threads(plan: LoaderPlan, cpus: int) -> Finding:
    if plan.num_workers == 0:
        return Finding("ok", "threads in workers", "no workers")
    per_worker, sources = threads_per_worker()
    total = plan.ranks_per_node * plan.num_workers * per_worker
    text = (
        f"torch uses 1 thread per worker (DataLoader sets it), but native libraries may start {per_worker} "
        f"each ({', '.join(sources)}): up to {total} threads on {cpus} CPUs"
    )
    if total > cpus:
        return Finding(
            "warn",
            "threads in workers",
            text,
            "worker_init_fn=labkit.workers.thread_budget.limit_worker_threads (or OMP_NUM_THREADS=1)",
        )
    return Finding("ok", "threads in workers", text)


def check_decode_threads(plan: LoaderPlan, cpus: int) -> Finding:
    budget = cpu_budget(ranks=plan.ranks_per_node, cpus=cpus)
    processes = plan.ranks_per_node * max(1, plan.num_workers)
    threads = plan.decode_threads or budget.decode_threads(plan.num_workers)
    where = f"{count(plan.num_workers, 'worker')}" if plan.num_workers else "the main process (no workers)"
    ranks = f" of each of {count(plan.ranks_per_node, 'rank')}" if plan.ranks_per_node > 1 else ""
    text = (
        f"{threads} decoding {'thread' if threads == 1 else 'threads'} in each of {where}{ranks}: "
        f"{threads * processes} on {count(cpus, 'CPU')}"
    )
    if threads * processes > cpus:
        return Finding(
            "warn",
            "decode threads",
            text + ": more than the cores, so they take turns",
            f"decode_threads={budget.decode_threads(plan.num_workers)} (or None: "
            "labkit.core.cpus.cpu_budget shares the rank's CPUs)",
        )
    return Finding("ok", "decode threads", text)


def check_main_threads(plan: LoaderPlan, cpus: int) -> Finding:
    threads = torch.get_num_threads() if plan.main_threads is None else plan.main_threads
    budget = cpu_budget(ranks=plan.ranks_per_node, cpus=cpus).main_threads(plan.num_workers)
    text = f"the main process runs {threads} torch threads beside {plan.num_workers} busy workers on {cpus} CPUs"
    if plan.num_workers and threads > budget:
        return Finding(
            "warn",
            "main-process threads",
            text + ": OpenMP threads spin while they wait and take the "
            "workers' cores (`labkit autotune` measures main-thread counts here)",
            f"torch.set_num_threads({budget})  # labkit.workers.thread_budget.main_thread_budget(num_workers)",
        )
    return Finding("ok", "main-process threads", text)


def check_start_method(threads: Sequence[str]) -> Finding:
    method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()
    if method == "fork" and len(threads) > 1:
        return Finding(
            "warn",
            "fork after threads",
            f"start method fork with {len(threads)} threads running "
            f"({first(threads, 4)}): a lock held by a thread at fork time stays locked in every "
            "worker, which then hangs (article §6.5)",
            "create DataLoaders before starting threads, or multiprocessing_context='forkserver'",
        )
    if method == "fork":
        return Finding(
            "ok",
            "start method",
            "fork: workers start fast and share the parent's memory "
            "copy-on-write (keep paths in numpy arrays: labkit.datasets.encoded_images does)",
        )
    return Finding(
        "ok",
        "start method",
        f"{method}: workers import your code afresh, so datasets, samplers and "
        "collates must be importable (not defined in a notebook); use persistent_workers=True",
    )


def diagnose(
    plan: LoaderPlan,
    cpus: int | None = None,
    facts: MemoryFacts | None = None,
    cuda: bool | None = None,
    threads: Sequence[str] | None = None,
) -> list[Finding]:
    """Every check, for ``plan`` on this machine (the keyword arguments stand in for the machine in tests)."""
    cpus = usable_cpus() if cpus is None else cpus
    facts = memory_facts() if facts is None else facts
    cuda = torch.cuda.is_available() if cuda is None else cuda
    threads = [t.name for t in threading.enumerate()] if threads is None else threads
    return [
        check_shared_memory(plan, facts),
        check_pinned_memory(plan, facts, cuda),
        check_cpus(plan, cpus),
        check_worker_threads(plan, cpus),
        check_decode_threads(plan, cpus),
        check_main_threads(plan, cpus),
        check_start_method(threads),
    ]


def format_findings(plan: LoaderPlan, findings: list[Finding]) -> str:
    head = (
        f"labkit doctor: num_workers {plan.num_workers} × prefetch_factor {plan.prefetch_factor} × batch_size "
        f"{plan.batch_size} of "
        f"{'x'.join(map(str, plan.image))} ({plan.bytes_per_value}-byte values), "
        f"{count(plan.ranks_per_node, 'rank')} "
        f"per node, pin_memory={plan.pin_memory}"
    )
    counts = {level: sum(f.level == level for f in findings) for level in ("fail", "warn", "ok")}
    tail = f"{counts['fail']} fail, {counts['warn']} warn, {counts['ok']} ok"
    return "\n".join([head, *map(str, findings), tail])
