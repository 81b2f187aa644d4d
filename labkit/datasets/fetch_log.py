"""A dataset wrapper that passes samples through unchanged and logs every fetch from the process doing it.

Two tools need to know what the workers are doing while they do it: the watchdog (which sample a
stuck or dead worker was fetching) and the timeline of notebook 04 (who fetched which batch, when).
Both read the same records, written to a `SharedLog` from inside each worker:
``{"worker", "pid", "event", "indices", "time"}`` with ``event`` "start" as a fetch begins, then "end"
(with the fetch's ``"start"`` too) or "error" as it ends; ``worker`` is -1 in the main process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from torch.utils.data import Dataset, get_worker_info

from labkit.core.pass_through import PassThrough
from labkit.core.shared_log import SharedLog
from labkit.core.timing import timestamp


class FetchLoggedDataset(PassThrough, Dataset):
    """``dataset``'s samples, each fetch logged to ``log`` (see the module's docstring).

    Batched fetches go through the wrapped dataset's ``__getitems__`` where it has one, so wrapping
    changes what is logged, not how samples are read; other attributes (labels, classes,
    sample_path...) are the wrapped dataset's.
    """

    wraps = "dataset"

    def __init__(self, dataset: Dataset, log: SharedLog) -> None:
        self.dataset, self.log = dataset, log

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def _note(self, event: str, indices: list[int], **extra: float) -> None:
        info = get_worker_info()
        record: dict[str, Any] = {
            "worker": info.id if info else -1,
            "pid": os.getpid(),
            "event": event,
            "indices": indices,
            "time": timestamp(),
            **extra,
        }
        self.log.append(record)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        # ``indices`` goes to the wrapped dataset as it came: a batch sampler may send more than a list
        # (labkit.workers.shared_slots sends the slot to write into with the indices).
        logged = [int(i) for i in indices]
        start = timestamp()
        self._note("start", logged)
        fetch = getattr(self.dataset, "__getitems__", None)
        try:
            samples = fetch(indices) if fetch else [self.dataset[i] for i in indices]
        except BaseException:
            self._note("error", logged, start=start)
            raise
        self._note("end", logged, start=start)
        return samples
