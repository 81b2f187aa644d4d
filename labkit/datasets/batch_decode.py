"""The batch as the unit of work: a whole batch decoded by a few threads straight into one uint8 tensor.

torch's DataLoader hands a dataset that has ``__getitems__`` the whole batch of indices at once. labkit's
image datasets use that: every sample of the batch is read, decoded (or cropped) and written into its row
of one preallocated ``B×3×H×W`` uint8 tensor — in shared memory inside a worker, so it crosses to the main
process without a copy — by a few threads of the process doing the fetch, started for the batch and joined
before it is handed on. The decoders release
the GIL (`labkit.decode.registry`), so the threads decode in parallel; `labkit.collate.batching.stack_uint8`
sees rows of one tensor and passes it on without stacking a copy.

Threads x processes stay within the rank's CPUs (`labkit.core.cpus`): with two workers on two cores
each worker decodes on its own thread; with no workers (or a `ThreadLoader`) the main process gets the rank's
share. A sample that fails is fetched again on its own through the dataset's per-sample
path, so it is named in a `SampleError`, or substituted and recorded under ``on_error="skip"``, exactly as
without the batch path.
"""

from __future__ import annotations

import threading
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import get_worker_info

from labkit.core.cpus import cpu_budget
from labkit.core.epoch_index import epochs_of
from labkit.core.errors import LabkitValueError
from labkit.core.host_buffers import batch_buffer

def threads_here(asked: Optional[int]) -> int:
    """The decoding threads this process uses: ``asked``, or the share of the cores a DataLoader worker
    (or the main process) is due."""
    if asked is not None:
        if asked < 1:
            raise LabkitValueError(f"decode_threads={asked}: at least 1 (one thread decodes the batch in turn)")
        return asked
    info = get_worker_info()
    return cpu_budget().decode_threads(info.num_workers if info is not None else 0)


class BatchDecoder:
    """Fills a batch tensor row by row with ``threads`` threads of the process that fetches it.

    Each thread takes a contiguous share of the batch's rows (in storage order, so each reads its own run of the
    file) and the calling thread decodes a share itself: no task object per sample, and no thread outlives its
    batch. That last point matters in the main process (``num_workers=0``, a validation pass, a `ThreadLoader`):
    a thread pool kept alive there would be copied half-held into every worker the next loader forks (the
    article's 6.5), and Python 3.12+ warns on every such fork.
    """

    def __init__(self, threads: Optional[int] = None) -> None:
        self.threads = threads

    def __repr__(self) -> str:
        return f"BatchDecoder(threads={self.threads if self.threads is not None else 'auto'})"

    def _map(self, work: Callable[[int], None], rows: Sequence[int]) -> None:
        threads = min(threads_here(self.threads), len(rows))
        shares = [rows[k * len(rows) // threads:(k + 1) * len(rows) // threads] for k in range(threads)]
        raised: List[BaseException] = []

        def run(share: Sequence[int]) -> None:
            try:
                for k in share:
                    work(k)
            except BaseException as error:  # re-raised in the calling thread, with its traceback
                raised.append(error)

        helpers = [threading.Thread(target=run, args=(share,), name="labkit-decode", daemon=True)
                   for share in shares[1:]]
        for helper in helpers:
            helper.start()
        run(shares[0])
        for helper in helpers:
            helper.join()
        if raised:
            raise raised[0]

    def fill(self, indices: Sequence[int], checked: Sequence[int], order: np.ndarray, image_shape: Tuple[int, ...],
             load: Callable[[int, int], torch.Tensor], default_epoch: int, failures: Tuple[type, ...],
             out: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, List[int]]:
        """One uint8 tensor of ``len(indices)`` rows of ``image_shape`` (``out`` where given), row ``k`` =
        ``load(checked[k], epoch)``, loaded in ``order``; and the rows whose load raised one of ``failures``
        (left unwritten)."""
        shape = (len(checked), *image_shape)
        if out is not None and (tuple(out.shape) != shape or out.dtype != torch.uint8):
            raise LabkitValueError(f"out is a {out.dtype} tensor of shape {tuple(out.shape)}; this batch needs uint8 "
                                   f"{shape}")
        batch = batch_buffer(shape) if out is None else out
        failed: List[int] = []
        epochs = epochs_of(indices, default_epoch)  # here: the epoch scope is this thread's

        def work(k: int) -> None:
            try:
                batch[k].copy_(load(checked[k], epochs[k]))
            except failures:
                failed.append(k)
        self._map(work, [int(k) for k in order])
        return batch, sorted(failed)
