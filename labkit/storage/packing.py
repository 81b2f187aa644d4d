"""Packing an ImageFolder into one pack file (article section 5.3), in parallel, with a progress bar.

Worker processes each take a run of up to 256 files, read (and check or decode) them, take the
run's place in the pack after the run before it, and write the run there themselves; the main
process only records where each sample went (`PackWriter.add_written`). No sample's bytes go
through a pipe, and the pack is the same bytes whatever the number of workers.

Kept apart from `labkit.storage.pack_format` so the format module knows nothing of decoding: this
module composes folder scanning, decoding and the writer. Files that cannot be read or
decoded are not packed; they are reported, and listed in the pack's own metadata, so
nothing is lost without a trace.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing as mp
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from labkit.core.atomic import clear_dead_temporaries
from labkit.core.disk_space import require_space
from labkit.core.environment import usable_cpus
from labkit.core.errors import LabkitRuntimeError
from labkit.core.processes import ignore_interrupts, interrupts_deferred
from labkit.core.string_table import PathLike, StringTable, printable
from labkit.core.wording import count
from labkit.decode.decoder_contract import MAX_PIXELS, DecodeError
from labkit.decode.pil_decoders import check_decodable
from labkit.decode.registry import get_decoder
from labkit.storage.image_folder import FolderIndex, scan_image_folder
from labkit.storage.pack_format import RECORD_DTYPE, PackWriter, abandon_pack

#: A decoded pack aligns each image to a cache line, so a batch copy never splits one.
DECODED_ALIGNMENT = 64


@dataclass
class PackReport:
    """What `pack_folder` wrote and what it left out."""

    path: str
    kind: str
    count: int
    nbytes: int
    skipped: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"packed {self.count} {self.kind} samples into {self.path} ({self.nbytes / 2**20:.1f} MiB)"
        if self.skipped:
            text += f"; {len(self.skipped)} files could not be packed:\n" + "\n".join(
                f"  {printable(s['path'])}: {s['error']}" for s in self.skipped
            )
        return text


@dataclass(frozen=True)
class _Run:
    """A contiguous run of the folder's files, packed by one worker: its ``number`` is its place in the pack."""

    number: int
    root: str
    first: int
    relpaths: StringTable
    decoded_hw: tuple[int, int] | None
    decoder: str
    check: bool
    max_pixels: int
    alignment: int


# records of the files kept (offsets in the pack), their positions in the run, (position, error) of the others
_RunResult = tuple[np.ndarray, np.ndarray, list[tuple[int, str]]]


#: How often a worker waiting for its turn checks whether the pack was abandoned.
ABANDON_POLL_S = 0.05


class _Layout:
    """Where each run goes in the pack, shared by the workers: a run takes the place after the run
    before it once it has read its files and knows its size, then writes there itself. The pack
    is the same bytes whatever the number of workers, and no sample goes through a pipe."""

    def __init__(self, context: Any, data_start: int) -> None:
        self.turn = context.Value("q", 0, lock=False)
        self.end = context.Value("q", data_start, lock=False)
        self.changed = context.Condition()

    def place(self, number: int, size: int, alignment: int) -> int:
        """The offset where run ``number`` of ``size`` bytes starts (waits for the runs before it)."""
        with self.changed:
            while self.turn.value != number:
                if self.turn.value < 0:
                    raise LabkitRuntimeError(
                        f"run {number} not written: the pack was abandoned (a run before it failed)"
                    )
                self.changed.wait(ABANDON_POLL_S)
            start = -(-self.end.value // alignment) * alignment
            self.end.value = start + size
            self.turn.value = number + 1
            self.changed.notify_all()
        return start

    def abandon(self) -> None:
        """Tell the workers waiting for a turn that will not come to stop; they see it within `ABANDON_POLL_S`.

        No ``notify_all``: it waits until every sleeper has woken, and a worker killed while it slept never
        does. The lock is taken with a limit, since a worker killed inside `place` would hold it forever."""
        if self.changed.acquire(timeout=5):
            try:
                self.turn.value = -1
            finally:
                self.changed.release()


_WORKER: dict[str, Any] = {}  # in a packing process: the shared layout and the pack, open for writing


def _open_pack(layout: _Layout, pack: str) -> None:
    _WORKER.update(layout=layout, fd=os.open(pack, os.O_WRONLY))


def _init_worker(layout: _Layout, pack: str) -> None:
    """One torch thread per pool process: a process forked from a parent that has run OpenMP (any
    multi-threaded torch op) hangs in its first parallel region otherwise (GNU libgomp is not
    fork-safe); DataLoader does the same for its workers. Ctrl-C is left to the parent, which stops the
    pool and removes the unfinished pack."""
    ignore_interrupts()
    torch.set_num_threads(1)
    _open_pack(layout, pack)


def _close_worker() -> None:
    if "fd" in _WORKER:
        os.close(_WORKER.pop("fd"))
    _WORKER.clear()


def read_file(path: bytes) -> bytes:
    """A whole file's bytes: plain system calls, a third of the time of ``open().read()`` on a small file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, os.fstat(fd).st_size + 1)]
        while chunks[-1]:  # a short read, or a file that grew since fstat
            chunks.append(os.read(fd, 1 << 20))
    finally:
        os.close(fd)
    return b"".join(chunks)


def sample_bytes(run: _Run, path: bytes) -> bytes:
    """One file's bytes as the pack stores them: as they are (checked unless told not to), or decoded."""
    data = read_file(path)
    if run.decoded_hw is not None:
        return get_decoder(run.decoder)(data, run.decoded_hw, run.max_pixels).numpy().tobytes()
    if run.check:
        check_decodable(data, run.max_pixels)
    return data


def _write_at(fd: int, pieces: list[bytes], offset: int) -> None:
    data = b"".join(pieces)
    done = 0
    while done < len(data):
        done += os.pwrite(fd, memoryview(data)[done:], offset + done)


def _pack_run(run: _Run) -> _RunResult:
    """Read (and check or decode) one run's files, take the run's place in the pack and write them there;
    what cannot be read is reported."""
    pieces: list[bytes] = []
    records: list[tuple[int, int, int, int]] = []
    kept: list[int] = []
    failed: list[tuple[int, str]] = []
    root, blob, ends = os.path.join(os.fsencode(run.root), b""), run.relpaths.blob.tobytes(), run.relpaths.offsets
    size = 0
    for k, (a, b) in enumerate(zip(ends[:-1].tolist(), ends[1:].tolist())):
        try:
            data = sample_bytes(run, root + blob[a:b])
        except (OSError, DecodeError) as e:  # the path is reported beside the error: strerror, not a bytes path
            failed.append((k, f"{type(e).__name__}: {e.strerror if isinstance(e, OSError) and e.strerror else e}"))
            continue
        padding = -size % run.alignment
        if padding:
            pieces.append(b"\0" * padding)
            size += padding
        pieces.append(data)
        records.append((size, len(data), 0, zlib.crc32(data)))
        kept.append(k)
        size += len(data)
    start = _WORKER["layout"].place(run.number, size, run.alignment)
    _write_at(_WORKER["fd"], pieces, start)
    placed = np.array(records, dtype=RECORD_DTYPE)
    placed["offset"] += start
    return placed, np.array(kept, dtype=np.int64), failed


def _in_order(executor: ProcessPoolExecutor, runs: Iterator[_Run], window: int) -> Iterator[tuple[_Run, _RunResult]]:
    """Each run with its result, in order, with at most ``window`` runs handed out and not yet collected
    (``Executor.map`` would hand out every run at once, each holding its paths)."""
    pending: collections.deque[tuple[_Run, Future]] = collections.deque(
        (run, executor.submit(_pack_run, run)) for run in itertools.islice(runs, window)
    )
    while pending:
        run, future = pending.popleft()
        pending.extend((r, executor.submit(_pack_run, r)) for r in itertools.islice(runs, 1))
        try:
            result = future.result()
        except BrokenProcessPool:
            raise LabkitRuntimeError(
                f"a packing process died before the run of {len(run.relpaths)} files from "
                f"{printable(run.relpaths[0])!r} on was packed: a decoder that crashed on one of the files being "
                "packed, or the system out of memory (the kernel log, dmesg, says which); nothing was written under "
                "the pack's name. Packing with one worker stops at the file that kills it."
            ) from None
        yield run, result


#: Bytes a worker holds at once: a run is as many files as fit (at most 256).
RUN_BYTES = 32 << 20


def _run_length(index: FolderIndex, workers: int, sample_bytes: int | None) -> int:
    """Files per run: several runs per worker (balance, a moving progress bar), at most 256 and about
    `RUN_BYTES` (the size of a decoded sample, else the median size of a few files)."""
    if sample_bytes is None:
        picks = np.linspace(0, len(index) - 1, min(len(index), 16)).astype(int)
        sizes = []
        for i in picks:
            try:
                sizes.append(os.path.getsize(index.abspath(int(i))))
            except OSError:
                pass  # reported when it is packed
        sample_bytes = int(np.median(sizes)) if sizes else 1
    return max(1, min(256, len(index) // (4 * workers), RUN_BYTES // max(1, sample_bytes)))


def _needed_bytes(index: FolderIndex, sample_bytes: int | None) -> tuple[int, str]:
    """The bytes a pack of ``index`` takes at most (its samples, their records and paths) and what they are: the
    files' own sizes, or ``sample_bytes`` each when decoded (plus the alignment of each)."""
    if sample_bytes is None:
        samples = 0
        for i in range(len(index)):
            try:
                samples += os.path.getsize(index.abspath(i))
            except OSError:
                pass  # reported when it is packed
        what = f"the {count(len(index), 'file')} of the source"
    else:
        samples = len(index) * (sample_bytes + DECODED_ALIGNMENT)
        what = f"{count(len(index), 'decoded image')} of {sample_bytes:,} bytes"
    return samples + len(index) * RECORD_DTYPE.itemsize + index.relpaths.blob.nbytes + (1 << 16), what


def _stop(executor: ProcessPoolExecutor | None, layout: _Layout | None) -> None:
    """Stop the packing processes: those waiting for their turn give up, the runs not started are dropped."""
    if layout is not None:
        layout.abandon()
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)


def pack_folder(
    src: PathLike,
    dst: PathLike,
    decoded_size: int | None = None,
    decoder: str = "pil",
    alignment: int | None = None,
    check: bool = True,
    workers: int | None = None,
    progress: bool = True,
    max_pixels: int = MAX_PIXELS,
) -> PackReport:
    """Pack every image of the ImageFolder ``src`` into the single file ``dst``.

    ``decoded_size=None`` stores the files' bytes as they are (checked by `labkit.decode.pil_decoders.check_decodable`
    unless ``check=False``); ``decoded_size=N`` stores N×N uint8 C×H×W arrays decoded by
    ``decoder``. The output appears under ``dst`` only once complete. A pack that cannot fit on the
    destination's file system is refused before anything is written, and one stopped by a disk that filled
    anyway leaves nothing behind; both raise `labkit.core.disk_space.DiskFullError` naming ``dst``.
    """
    from tqdm.auto import tqdm

    index: FolderIndex = scan_image_folder(src)
    hw = (decoded_size, decoded_size) if decoded_size else None
    get_decoder(decoder)  # fail now on a bad name, not in every worker
    clear_dead_temporaries(dst)  # before the space is counted: a killed writer's leftover may be most of it
    require_space(dst, *_needed_bytes(index, 3 * hw[0] * hw[1] if hw else None))
    alignment = alignment or (DECODED_ALIGNMENT if hw else 1)
    workers = max(1, min(workers or usable_cpus(), len(index)))
    skipped: list[dict[str, str]] = []
    # `skipped` is filled while packing; the writer stores it with the index when it closes.
    meta = {"source": os.path.basename(os.path.abspath(index.root)), "skipped": skipped}
    if hw:
        meta["decoded_by"] = decoder
    bar = tqdm(
        total=len(index), desc=f"labkit pack {os.path.basename(os.fspath(dst))}", unit=" files", disable=not progress
    )
    executor: ProcessPoolExecutor | None = None
    writer: PackWriter | None = None
    layout: _Layout | None = None
    try:
        writer = PackWriter(dst, index.classes, (3, *hw) if hw else None, alignment, meta)
        context = mp.get_context()
        layout = _Layout(context, writer.data_end)
        step = _run_length(index, workers, 3 * hw[0] * hw[1] if hw else None)
        # a generator, not a list: the runs' path tables are cut from the index only as they are handed out
        runs = (
            _Run(
                number,
                index.root,
                a,
                index.relpaths.take(np.arange(a, min(a + step, len(index)))),
                hw,
                decoder,
                check,
                max_pixels,
                alignment,
            )
            for number, a in enumerate(range(0, len(index), step))
        )
        if workers == 1:  # in this process, whose torch threads stay as they are
            _open_pack(layout, writer.tmp_path)
            results: Iterator[tuple[_Run, _RunResult]] = ((run, _pack_run(run)) for run in runs)
        else:
            with interrupts_deferred():  # the pool's processes start at the first task
                executor = ProcessPoolExecutor(
                    workers, mp_context=context, initializer=_init_worker, initargs=(layout, writer.tmp_path)
                )
                executor.submit(int).result()
            results = _in_order(executor, runs, window=4 * workers)
        for run, (records, kept, failed) in results:
            records["label"] = index.labels[run.first + kept]
            writer.add_written(records, run.relpaths.take(kept))
            skipped.extend({"path": run.relpaths[k], "error": error} for k, error in failed)
            bar.update(len(run.relpaths))
        count = len(writer)
        writer.close()
    except BaseException as error:
        _stop(executor, layout)  # before the file goes, so no worker writes on
        _close_worker()  # this process's own descriptor too, so the space comes back with the file
        abandon_pack(writer, dst, error)
        raise
    finally:
        bar.close()
        _stop(executor, layout)
        _close_worker()
    return PackReport(os.fspath(dst), "decoded" if hw else "encoded", count, os.path.getsize(dst), skipped)
