"""DataLoader plans run inside a private, small /dev/shm, each reported as it ended (seed 6.1).

``python -m labkit.diagnose.small_shm_demo --shm-mib 16 --plan 2,4,64 --plan 2,1,16`` gives this process a fresh
/dev/shm of 16 MiB (`labkit.diagnose.small_shm.private_shm`: a container started without ``--shm-size``), then
runs one epoch of each plan — workers, prefetch_factor, batch of 3×256×256 uint8 images — each
in a fresh tmpfs, and prints one JSON line per plan: the doctor's level for the plan inside this
/dev/shm, how the epoch ended (``"completed"`` or the error torch raised), the batches that
arrived, and the most of /dev/shm seen in use. It must run as a process of its own: a process
can only enter a new namespace while it has one thread, and importing torch starts more. Where
the OS does not allow it, the only line printed is ``{"unavailable": "<why>"}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

from labkit.diagnose.small_shm import PrivateShmUnavailable, private_shm

MIB = 2**20
IMAGE = (3, 256, 256)


class FilledImages:
    """``n`` uint8 images of `IMAGE`, each filled with its index: batches whose size is exactly known."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Any:
        import torch

        return torch.full(IMAGE, index % 256, dtype=torch.uint8)


def _shm_used() -> Optional[int]:
    """Bytes in use in /dev/shm; ``None`` where there is none (`private_shm` mounts one first, so not here)."""
    from labkit.core.machine import memory_facts

    facts = memory_facts()
    return None if facts.shm_total is None or facts.shm_free is None else facts.shm_total - facts.shm_free


def _outcome(error: BaseException) -> str:
    """The error's first line and its last (where a worker's error names its cause), without the traceback."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"
    return f"{type(error).__name__}: {text}"


def run_plan(shm_bytes: int, workers: int, prefetch: int, batch: int, batches: int = 8) -> Dict[str, Any]:
    """One epoch of ``batches`` batches in a fresh /dev/shm of ``shm_bytes``; what happened."""
    from torch.utils.data import DataLoader

    from labkit.core.machine import memory_facts
    from labkit.diagnose.doctor import LoaderPlan, check_shared_memory

    private_shm(shm_bytes)
    plan = LoaderPlan(num_workers=workers, prefetch_factor=prefetch, batch_size=batch, image=IMAGE)
    level = check_shared_memory(plan, memory_facts()).level  # the doctor, inside this /dev/shm, before the loader
    result: Dict[str, Any] = {"plan": [workers, prefetch, batch], "shm_mib": shm_bytes / MIB,
                              "batch_mib": plan.batch_bytes / MIB, "level": level, "outcome": "completed",
                              "batches": 0, "peak_used_mib": 0.0}
    loader = DataLoader(FilledImages(batches * batch), batch_size=batch, num_workers=workers,
                        prefetch_factor=prefetch, timeout=20)
    try:
        for images in loader:
            time.sleep(0.05)  # a training step, slow enough for the workers to fill every prefetch slot
            used = _shm_used()
            if used is not None:
                result["peak_used_mib"] = max(result["peak_used_mib"], used / MIB)
            result["batches"] += 1
            del images
    except Exception as e:  # what torch raised is the result
        result["outcome"] = _outcome(e)
        traceback.clear_frames(e.__traceback__)  # frees the failed iterator, which stops its workers now
    del loader
    gc.collect()
    left = _shm_used()
    result["left_used_mib"] = None if left is None else left / MIB
    return result


def _plan(text: str) -> Tuple[int, int, int]:
    workers, prefetch, batch = (int(v) for v in text.split(","))
    return workers, prefetch, batch


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shm-mib", type=float, default=16)
    parser.add_argument("--plan", type=_plan, action="append", required=True, help="WORKERS,PREFETCH,BATCH")
    args = parser.parse_args(list(argv) or None)
    size = int(args.shm_mib * MIB)
    try:
        private_shm(size)  # first, while this process has one thread
    except PrivateShmUnavailable as e:
        print(json.dumps({"unavailable": str(e)}), flush=True)
        return 0
    results: List[Dict[str, Any]] = []
    for workers, prefetch, batch in args.plan:
        results.append(run_plan(size, workers, prefetch, batch))
        print(json.dumps(results[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
