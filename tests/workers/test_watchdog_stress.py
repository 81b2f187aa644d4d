"""A worker killed at a random moment is named every time, whatever the scheduler runs first.

A worker starts a timer that SIGKILLs its own process a random moment after it begins the chosen batch: before it has
collated that batch, while it hands it over (the main process is then receiving the batch's tensors through the worker's
file-descriptor sharer), or after. The main loop sometimes consumes at once and sometimes dawdles, so 0, 1 or 2 batches
are waiting when the worker dies. Every run must end in `LoaderWorkerError` naming the dead worker, with no process
left, for `watched_loader` (what ``make_loader(hang_timeout=...)`` returns) and for `SlotLoader`; the test as a whole
must leave no /dev/shm segment or descriptor behind. Runs idle and with a busy loop on every core beside it (the order
of events changes with the load).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

from labkit.workers.shared_slots import SlotLoader
from labkit.workers.watchdog import LoaderWorkerError, watched_loader

N, BATCH, WORKERS = 80, 4, 2


class KillsItself:
    """Returns small uint8 images; the worker that fetches ``kill_at`` SIGKILLs itself ``delay`` s later."""

    def __init__(self, kill_at: int, delay: float):
        self.kill_at, self.delay = kill_at, delay

    def __len__(self):
        return N

    def __getitem__(self, i):
        if i == self.kill_at:
            threading.Timer(self.delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
        time.sleep(0.001)
        return torch.full((3, 48, 48), i % 256, dtype=torch.uint8), i


def one_run(rng: random.Random, context: str, kind: str = "watched"):
    """Run one loader (``watched_loader`` or ``SlotLoader``) to its failure; returns (the error, the worker
    that had to die)."""
    batches_per_worker = N // BATCH // WORKERS
    batch = rng.randrange(0, WORKERS * (batches_per_worker - 4))  # its worker has 4 batches more to make
    kill_at = batch * BATCH + rng.randrange(BATCH)
    dataset = KillsItself(kill_at, rng.uniform(0.0, 0.015))  # a batch takes about 5 ms to make
    options = dict(
        batch_size=BATCH, num_workers=WORKERS, prefetch_factor=rng.choice([1, 2]), multiprocessing_context=context
    )
    loader = (
        watched_loader(dataset, timeout=30, **options)
        if kind == "watched"
        else SlotLoader(dataset, shuffle=False, image_shape=(3, 48, 48), **options)
    )
    dawdle = rng.choice([0.0, 0.005, 0.02])
    try:
        for _ in range(2):  # a persistent worker that died after the last batch is found when the next epoch starts
            for _ in loader:
                time.sleep(dawdle)
    except Exception as e:  # noqa: BLE001 - the test judges what came out
        return e, batch % WORKERS
    return None, batch % WORKERS


def stress(runs: int, context: str, seed: int, kind: str = "watched"):
    """How many runs did not end in a LoaderWorkerError naming the dead worker, with what they ended in."""
    rng = random.Random(seed)
    wrong = []
    for _ in range(runs):
        error, worker = one_run(rng, context, kind)
        named = re.search(rf"worker {worker} \(pid \d+\): dead \(exit code -9", str(error))
        if not (isinstance(error, LoaderWorkerError) and named):
            wrong.append(f"{type(error).__name__}: {str(error)[:300]}")
        left = multiprocessing.active_children()
        assert not left, f"processes left after a run: {[p.pid for p in left]}"
    return wrong


@pytest.fixture(params=["fork", "forkserver"])
def context(request):
    if request.param not in multiprocessing.get_all_start_methods():
        pytest.skip(f"the {request.param} start method does not exist on this OS")
    return request.param


@pytest.mark.timeout(300)
@pytest.mark.parametrize("load", ["idle", "busy cores"])
def test_a_worker_killed_at_any_moment_is_named_every_time(context, load, no_leaks):
    busy = (
        [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        if load == "busy cores"
        else []
    )
    try:
        wrong = stress(runs=50 if load == "idle" else 20, context=context, seed=len(context) * 10 + len(load))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert not wrong, f"{len(wrong)} runs did not name the dead worker:\n" + "\n".join(wrong[:5])


@pytest.mark.timeout(300)
def test_a_slot_loader_worker_killed_at_any_moment_is_named_every_time(context, no_leaks):
    wrong = stress(runs=25, context=context, seed=len(context), kind="slots")
    assert not wrong, f"{len(wrong)} runs did not name the dead worker:\n" + "\n".join(wrong[:5])
