"""Runs DataLoader plans inside a private, small /dev/shm; started as a child process by test_shm.py.

``python shm_child.py '<JSON list of scenarios>'``. Each scenario gets a fresh tmpfs of
``shm_mib`` MiB on /dev/shm and prints one JSON line: the doctor's level for the plan with
this /dev/shm, how the epoch ended (``"completed"`` or the error's type and text), the most of
/dev/shm seen in use and what was left in it afterwards. A single line ``{"unavailable": why}``
says the OS does not allow a private /dev/shm.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import sys
import time
import traceback

from labkit.diagnose.small_shm import PrivateShmUnavailable, private_shm

MIB = 2**20
IMAGE = (3, 256, 256)


class Images:
    """uint8 images filled with their index, or with ``batch`` > 0 a whole batch of them per index."""

    def __init__(self, n: int, batch: int = 0) -> None:
        self.n, self.batch = n, batch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        shape = (self.batch, *IMAGE) if self.batch else IMAGE
        return torch.full(shape, i % 256, dtype=torch.uint8)


def _shm_used() -> int:
    from labkit.core.machine import memory_facts

    facts = memory_facts()  # inside the private /dev/shm that run() mounts first: its sizes are known
    if facts.shm_total is None or facts.shm_free is None:
        raise SystemExit("no /dev/shm: private_shm should have mounted one")
    return facts.shm_total - facts.shm_free


def run(scenario: dict) -> dict:
    import torch
    from torch.utils.data import DataLoader

    from labkit.core.machine import memory_facts
    from labkit.diagnose.doctor import LoaderPlan, check_shared_memory
    from labkit.workers.watchdog import watched_loader

    private_shm(scenario["shm_mib"] * MIB)
    torch.multiprocessing.set_sharing_strategy(scenario["strategy"])
    workers, prefetch, batch = scenario["workers"], scenario["prefetch"], scenario["batch"]
    plan = LoaderPlan(num_workers=workers, prefetch_factor=prefetch, batch_size=batch, image=IMAGE)
    result = {"name": scenario["name"], "level": check_shared_memory(plan, memory_facts()).level,
              "outcome": "completed", "batches": 0, "peak_used": 0}
    if scenario["whole_batches"]:  # the worker returns a whole batch: it enters /dev/shm on its way out
        loader = watched_loader(Images(8, batch), timeout=2, batch_size=None, num_workers=workers,
                                prefetch_factor=prefetch)
    else:  # default_collate stacks each batch straight into /dev/shm inside the worker
        loader = DataLoader(Images(8 * batch), batch_size=batch, num_workers=workers, prefetch_factor=prefetch,
                            timeout=20)
    try:
        for images in loader:
            time.sleep(0.05)  # a slow training step, so the workers fill every prefetch slot
            result["peak_used"] = max(result["peak_used"], _shm_used())
            result["batches"] += 1
            del images
    except Exception as e:
        result["outcome"] = f"{type(e).__name__}: {e}"
        # Frees the failed iterator now, which stops its workers at once; left to the garbage
        # collector, it would wait 5 s for each of them.
        traceback.clear_frames(e.__traceback__)
    del loader
    gc.collect()
    # A worker stopped a moment ago may still be exiting, its last pages not yet freed: what is left is
    # what is still there once every child has ended (waited for, up to 5 s).
    deadline = time.monotonic() + 5.0
    while (multiprocessing.active_children() or _shm_used()) and time.monotonic() < deadline:
        time.sleep(0.05)
    result["left_used"] = _shm_used()
    return result


def main() -> None:
    scenarios = json.loads(sys.argv[1])
    try:
        private_shm(MIB)  # first, while this process has one thread (torch starts more)
    except PrivateShmUnavailable as e:
        print(json.dumps({"unavailable": str(e)}), flush=True)
        return
    for scenario in scenarios:
        print(json.dumps(run(scenario)), flush=True)


if __name__ == "__main__":
    main()
