"""The batch as the unit of work: a whole batch decoded by a few threads straight into one uint8 tensor.

torch's DataLoader hands a dataset that has ``__getitems__`` the whole batch of indices at once; the engine
(`labkit.datasets.batch_engine`) plans and reads the batch, and a `BatchDecoder` decodes it: every sample written
into its row of one preallocated ``B×3×H×W`` uint8 tensor — in shared memory inside a worker, so it crosses to the
main process without a copy — by a few threads of the process doing the fetch, started for the batch and joined
before it is handed on. The decoders release the GIL (`labkit.decode.registry`), so the threads decode in
parallel; `labkit.collate.batching.stack_uint8` sees rows of one tensor and passes it on without stacking a copy.

Threads x processes stay within the rank's CPUs (`labkit.core.cpus`): with two workers on two cores
each worker decodes on its own thread; with no workers (or a `ThreadLoader`) the main process gets the rank's
share. The rows that fail are handed back to the engine, which fetches each again on its own, so it is named or
substituted as without the batch path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch.utils.data import get_worker_info

from labkit.core.cpus import cpu_budget
from labkit.core.errors import LabkitValueError
from labkit.core.host_buffers import batch_buffer
from labkit.decode.batch_crop import BoxesFor, ShareCropper, ShareOutcome, Source

T = TypeVar("T")


def threads_here(asked: int | None) -> int:
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

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

    def __repr__(self) -> str:
        return f"BatchDecoder(threads={self.threads if self.threads is not None else 'auto'})"

    def map_shares(self, work: Callable[[Sequence[int]], T], rows: Sequence[int]) -> list[T]:
        """``work(share)`` for contiguous shares of ``rows``, one per thread (the calling thread takes the first, unless
        torch's kernels must run on one thread each: see below), and what each returned, in share order; the first
        exception any raised is raised here."""
        threads = max(1, min(threads_here(self.threads), len(rows)))
        shares = [rows[k * len(rows) // threads : (k + 1) * len(rows) // threads] for k in range(threads)]
        results: list[Any] = [None] * threads
        raised: list[BaseException] = []
        # torch's kernels (the resize) each start torch.get_num_threads() OpenMP threads: with several decode threads
        # in a process that keeps more than one (the main process; a worker keeps one), they would fight over the
        # cores. So each decode thread then runs its kernels on one thread (an OpenMP setting of that thread alone),
        # and the calling thread, whose setting is the user's, only waits.
        intra_op = torch.get_num_threads()
        serial_kernels = threads > 1 and intra_op > 1

        def run(k: int) -> None:
            try:
                if serial_kernels:
                    torch.set_num_threads(1)
                results[k] = work(shares[k])
            except BaseException as error:  # re-raised in the calling thread, with its traceback
                raised.append(error)

        first = 0 if serial_kernels else 1
        helpers = [
            threading.Thread(target=run, args=(k,), name="labkit-decode", daemon=True) for k in range(first, threads)
        ]
        for helper in helpers:
            helper.start()
        if not serial_kernels:
            run(0)
        for helper in helpers:
            helper.join()
        if serial_kernels:
            torch.set_num_threads(intra_op)  # the default a thread started later takes: the user's, not the helpers'
        if raised:
            raise raised[0]
        return results

    def load_rows(
        self, batch: torch.Tensor, rows: Sequence[int], load: Callable[[int], torch.Tensor], failures: tuple[type, ...]
    ) -> list[int]:
        """Row ``k`` of ``batch`` = ``load(k)`` for each of ``rows`` (one call a sample: the path for decoders and
        storage without a batch loop of their own); the rows whose load raised one of ``failures``."""

        def work(share: Sequence[int]) -> list[int]:
            failed = []
            for k in share:
                try:
                    batch[k].copy_(load(k))
                except failures:
                    failed.append(k)
            return failed

        return sorted(k for failed in self.map_shares(work, rows) for k in failed)

    def crop_rows(
        self,
        batch: torch.Tensor,
        rows: Sequence[int],
        sources: Sequence[Source],
        boxes_for: BoxesFor,
        crop_share: ShareCropper,
        max_pixels: int,
    ) -> ShareOutcome:
        """Each of ``rows`` of ``batch`` cropped from ``sources`` by a decoder's own batch loop (``crop_share``,
        `labkit.decode.batch_crop`): the rows that failed, and those it handed back for the per-sample path."""
        outcomes = self.map_shares(lambda share: crop_share(share, sources, boxes_for, batch, max_pixels), rows)
        return ShareOutcome(
            sorted(k for o in outcomes for k in o.failed), sorted(k for o in outcomes for k in o.handed_back)
        )


def batch_tensor(rows: int, image_shape: tuple[int, ...], out: torch.Tensor | None = None) -> torch.Tensor:
    """A uint8 batch of ``rows`` images of ``image_shape``: ``out`` (a batch slot) where given, checked, else new."""
    shape = (rows, *image_shape)
    if out is not None and (tuple(out.shape) != shape or out.dtype != torch.uint8):
        raise LabkitValueError(
            f"out is a {out.dtype} tensor of shape {tuple(out.shape)}; this batch needs uint8 {shape}"
        )
    return batch_buffer(shape) if out is None else out
