"""Packing an ImageFolder into one pack file (seed section 5.3), in parallel, with a progress bar.

Kept apart from `labkit.packfile` so the format module knows nothing of decoding: this
module composes folder scanning, decoding and the writer. Files that cannot be read or
decoded are not packed; they are reported, and listed in the pack's own metadata, so
nothing is lost without a trace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from labkit.decode import MAX_PIXELS, DecodeError, decode_pil_reduced, get_decoder
from labkit.folders import FolderIndex, scan_image_folder
from labkit.packfile import PackWriter
from labkit.settings import usable_cpus
from labkit.strtable import PathLike, printable

#: A decoded pack aligns each image to a cache line, so a batch copy never splits one.
DECODED_ALIGNMENT = 64
_CHECK_SIZE = (32, 32)  # an encoded file is checked by a cheap reduced decode to this size


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


_JobResult = Tuple[int, Optional[bytes], Optional[np.ndarray], Optional[str]]


def _init_worker() -> None:
    """One torch thread per pool process. A process forked from a parent that has run OpenMP
    (any multi-threaded torch op) hangs in its first parallel region otherwise (GNU libgomp
    is not fork-safe); DataLoader does the same for its workers."""
    torch.set_num_threads(1)


def _prepare(job: Tuple[str, str, int, Optional[Tuple[int, int]], str, bool, int]) -> _JobResult:
    """Read (and decode or check) one file in a worker process."""
    root, relpath, i, decoded_hw, decoder, check, max_pixels = job
    try:
        with open(os.path.join(root, relpath), "rb") as f:
            data = f.read()
        if decoded_hw is not None:
            return i, None, get_decoder(decoder)(data, decoded_hw, max_pixels).numpy(), None
        if check:
            decode_pil_reduced(data, _CHECK_SIZE, max_pixels)
        return i, data, None, None
    except (OSError, DecodeError) as e:
        return i, None, None, f"{type(e).__name__}: {e}"


def pack_folder(src: PathLike, dst: PathLike, decoded_size: Optional[int] = None, decoder: str = "pil",
                alignment: Optional[int] = None, check: bool = True, workers: Optional[int] = None,
                progress: bool = True, max_pixels: int = MAX_PIXELS) -> PackReport:
    """Pack every image of the ImageFolder ``src`` into the single file ``dst``.

    ``decoded_size=None`` stores the files' bytes as they are (checked by a reduced decode
    unless ``check=False``); ``decoded_size=N`` stores N×N uint8 C×H×W arrays decoded by
    ``decoder``. The output appears under ``dst`` only once complete.
    """
    from tqdm.auto import tqdm

    index: FolderIndex = scan_image_folder(src)
    hw = (decoded_size, decoded_size) if decoded_size else None
    get_decoder(decoder)  # fail now on a bad name, not in every worker
    alignment = alignment or (DECODED_ALIGNMENT if hw else 1)
    # a generator, not a list: a list of one tuple per file holds every path as a Python string at once
    jobs = ((index.root, index.relpaths[i], i, hw, decoder, check, max_pixels) for i in range(len(index)))
    # with nothing to decode or check, a worker would only read a file and pipe its bytes back: a copy
    # more than reading it here, and slower at any worker count (measured: benchmarks/scale.py)
    busy = hw is not None or check
    workers = max(1, min(workers or usable_cpus(), len(index))) if busy else 1
    skipped: List[Dict[str, str]] = []
    # `skipped` is filled while packing; the writer stores it with the index when it closes.
    meta = {"source": os.path.basename(os.path.abspath(index.root)), "skipped": skipped}
    if hw:
        meta["decoded_by"] = decoder
    bar = tqdm(total=len(index), desc=f"labkit pack {os.path.basename(os.fspath(dst))}", unit="file",
               disable=not progress)
    pool = None
    try:
        if workers == 1:
            results = map(_prepare, jobs)
        else:
            import multiprocessing as mp

            pool = mp.get_context().Pool(workers, initializer=_init_worker)
            results = pool.imap(_prepare, jobs, chunksize=8)
        with PackWriter(dst, index.classes, (3, *hw) if hw else None, alignment, meta) as writer:
            for i, data, array, error in results:
                if error is not None:
                    skipped.append({"path": index.relpaths[i], "error": error})
                else:
                    writer.add(array if hw else data, int(index.labels[i]), index.relpaths.raw(i))
                bar.update()
            count = len(writer)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
    return PackReport(os.fspath(dst), "decoded" if hw else "encoded", count, os.path.getsize(dst), skipped)

