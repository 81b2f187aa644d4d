"""Packing an ImageFolder into one pack file (seed section 5.3), in parallel, with a progress bar.

Worker processes each take a run of up to 256 files, read (and check or decode) them and write
them to a part file of their own; the main process appends the parts in order, in the kernel
(`PackWriter.add_run`), and deletes each. No sample's bytes go through a pipe, and at most two
part files a worker exist at once.

Kept apart from `labkit.packfile` so the format module knows nothing of decoding: this
module composes folder scanning, decoding and the writer. Files that cannot be read or
decoded are not packed; they are reported, and listed in the pack's own metadata, so
nothing is lost without a trace.
"""

from __future__ import annotations

import collections
import glob
import itertools
import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from labkit.decode import MAX_PIXELS, DecodeError, check_decodable, get_decoder
from labkit.folders import FolderIndex, scan_image_folder
from labkit.packfile import RECORD_DTYPE, PackWriter
from labkit.settings import usable_cpus
from labkit.strtable import PathLike, StringTable, printable

#: A decoded pack aligns each image to a cache line, so a batch copy never splits one.
DECODED_ALIGNMENT = 64


@dataclass
class PackReport:
    """What `pack_folder` wrote and what it left out."""

    path: str
    kind: str
    count: int
    nbytes: int
    skipped: List[Dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"packed {self.count} {self.kind} samples into {self.path} ({self.nbytes / 1e6:.1f} MB)"
        if self.skipped:
            text += f"; {len(self.skipped)} files could not be packed:\n" + "\n".join(
                f"  {printable(s['path'])}: {s['error']}" for s in self.skipped)
        return text


@dataclass(frozen=True)
class _Run:
    """A contiguous run of the folder's files, packed by one worker into a part file of its own."""

    root: str
    first: int
    relpaths: StringTable
    part: str
    decoded_hw: Optional[Tuple[int, int]]
    decoder: str
    check: bool
    max_pixels: int
    alignment: int


# (the run, its records for the files kept, their positions in the run, (position, error) of the others)
_RunResult = Tuple[_Run, np.ndarray, np.ndarray, List[Tuple[int, str]]]


def _init_worker() -> None:
    """One torch thread per pool process. A process forked from a parent that has run OpenMP
    (any multi-threaded torch op) hangs in its first parallel region otherwise (GNU libgomp
    is not fork-safe); DataLoader does the same for its workers."""
    torch.set_num_threads(1)


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


def _sample_bytes(run: _Run, path: bytes) -> bytes:
    """One file's bytes as the pack stores them: as they are (checked unless told not to), or decoded."""
    data = read_file(path)
    if run.decoded_hw is not None:
        return get_decoder(run.decoder)(data, run.decoded_hw, run.max_pixels).numpy().tobytes()
    if run.check:
        check_decodable(data, run.max_pixels)
    return data


def _pack_run(run: _Run) -> _RunResult:
    """Write one run's samples to its part file (in a worker process); what cannot be read is reported."""
    records: List[Tuple[int, int, int, int]] = []
    kept: List[int] = []
    failed: List[Tuple[int, str]] = []
    root, blob, ends = os.path.join(os.fsencode(run.root), b""), run.relpaths.blob.tobytes(), run.relpaths.offsets
    with open(run.part, "wb") as out:
        offset = 0
        for k, (a, b) in enumerate(zip(ends[:-1].tolist(), ends[1:].tolist())):
            try:
                data = _sample_bytes(run, root + blob[a:b])
            except (OSError, DecodeError) as e:
                failed.append((k, f"{type(e).__name__}: {e}"))
                continue
            padding = -offset % run.alignment
            if padding:
                out.write(b"\0" * padding)
                offset += padding
            out.write(data)
            records.append((offset, len(data), 0, zlib.crc32(data)))
            kept.append(k)
            offset += len(data)
    return run, np.array(records, dtype=RECORD_DTYPE), np.array(kept, dtype=np.int64), failed


def _in_order(pool: Any, runs: Iterator[_Run], window: int) -> Iterator[_RunResult]:
    """The runs' results in order, with at most ``window`` runs handed out and not yet appended (so at
    most that many part files on disk; ``Pool.imap`` would hand out every run at once)."""
    pending: Deque[Any] = collections.deque(pool.apply_async(_pack_run, (run,))
                                            for run in itertools.islice(runs, window))
    while pending:
        result = pending.popleft().get()
        pending.extend(pool.apply_async(_pack_run, (run,)) for run in itertools.islice(runs, 1))
        yield result


def _run_length(files: int, workers: int) -> int:
    """Files per run: several runs per worker (balance, a moving progress bar), at most 256 (bounded part files)."""
    return max(1, min(256, files // (4 * workers)))


def pack_folder(src: PathLike, dst: PathLike, decoded_size: Optional[int] = None, decoder: str = "pil",
                alignment: Optional[int] = None, check: bool = True, workers: Optional[int] = None,
                progress: bool = True, max_pixels: int = MAX_PIXELS) -> PackReport:
    """Pack every image of the ImageFolder ``src`` into the single file ``dst``.

    ``decoded_size=None`` stores the files' bytes as they are (checked by `labkit.decode.check_decodable`
    unless ``check=False``); ``decoded_size=N`` stores N×N uint8 C×H×W arrays decoded by
    ``decoder``. The output appears under ``dst`` only once complete.
    """
    from tqdm.auto import tqdm

    index: FolderIndex = scan_image_folder(src)
    hw = (decoded_size, decoded_size) if decoded_size else None
    get_decoder(decoder)  # fail now on a bad name, not in every worker
    alignment = alignment or (DECODED_ALIGNMENT if hw else 1)
    workers = max(1, min(workers or usable_cpus(), len(index)))
    skipped: List[Dict[str, str]] = []
    # `skipped` is filled while packing; the writer stores it with the index when it closes.
    meta = {"source": os.path.basename(os.path.abspath(index.root)), "skipped": skipped}
    if hw:
        meta["decoded_by"] = decoder
    bar = tqdm(total=len(index), desc=f"labkit pack {os.path.basename(os.fspath(dst))}", unit="file",
               disable=not progress)
    pool = None
    writer = PackWriter(dst, index.classes, (3, *hw) if hw else None, alignment, meta)
    try:
        step = _run_length(len(index), workers)
        # a generator, not a list: the runs' path tables are cut from the index only as workers ask
        runs = (_Run(index.root, a, index.relpaths.take(np.arange(a, min(a + step, len(index)))),
                     f"{writer.tmp_path}.part-{a}", hw, decoder, check, max_pixels, alignment)
                for a in range(0, len(index), step))
        if workers == 1:
            results: Iterator[_RunResult] = map(_pack_run, runs)
        else:
            import multiprocessing as mp

            pool = mp.get_context().Pool(workers, initializer=_init_worker)
            results = _in_order(pool, runs, window=2 * workers)
        for run, records, kept, failed in results:
            records["label"] = index.labels[run.first + kept]
            writer.add_run(run.part, records, run.relpaths.take(kept))
            os.unlink(run.part)
            skipped.extend({"path": run.relpaths[k], "error": error} for k, error in failed)
            bar.update(len(run.relpaths))
        count = len(writer)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
        for part in glob.glob(glob.escape(writer.tmp_path) + ".part-*"):
            os.unlink(part)
    return PackReport(os.fspath(dst), "decoded" if hw else "encoded", count, os.path.getsize(dst), skipped)

