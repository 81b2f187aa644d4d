"""Asking the kernel to forget cached file pages, so a measurement starts cold.

``posix_fadvise(POSIX_FADV_DONTNEED)`` drops a file's clean pages from the page cache and
needs no root, unlike writing to ``/proc/sys/vm/drop_caches``. It is advice: some file
systems (tmpfs, some overlays) keep the pages anyway, so callers report it as an attempt.

What is cached now (`resident_fraction`, `resident_share`) is ``None`` where the OS cannot say (no
``mincore``), never a number that reads as "nothing cached".
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

from labkit.core.processes import process_maps


def can_evict() -> bool:
    return hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_DONTNEED")


def evict(paths: Iterable[str]) -> int:
    """Advise the kernel to drop the cached pages of each file; return how many files were advised."""
    if not can_evict():
        return 0
    advised = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            advised += 1
        finally:
            os.close(fd)
    return advised


@functools.cache
def load_libc() -> Any | None:
    """The C library, once: finding it runs ``ldconfig``, about a millisecond, too slow per file."""
    import ctypes
    import ctypes.util
    import mmap

    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name and hasattr(mmap, "MAP_PRIVATE") else None


def resident_fraction(path: str) -> float | None:
    """Share of the file's pages now in the page cache (Linux ``mincore``); ``None`` where the OS cannot say."""
    import ctypes
    import mmap

    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    libc = load_libc()
    if libc is None:
        return None
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)  # writable view, so ctypes can address it
        try:
            address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
            vector = (ctypes.c_ubyte * pages)()
            failed = libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector)
            del address
            return None if failed else sum(v & 1 for v in vector) / pages
        finally:
            mapping.close()


def mapping_processes(path: str) -> list[int]:
    """Processes that have ``path`` memory-mapped now (Linux ``/proc/<pid>/maps``; [] elsewhere).

    The kernel does not drop a page some process maps, so these are what keeps a file warm after
    `evict`: a DataLoader worker, another notebook, a reader still alive in this process.
    Processes of other users cannot be inspected and are not listed."""
    target = os.stat(path)
    device = f"{os.major(target.st_dev):02x}:{os.minor(target.st_dev):02x}"
    pids = []
    for pid, lines in process_maps():
        for line in lines:
            fields = line.split(None, 5)  # address perms offset dev inode path
            if len(fields) >= 5 and fields[4] == str(target.st_ino) and fields[3] == device:
                pids.append(pid)
                break
    return pids


DROP_CACHES = "/proc/sys/vm/drop_caches"


def empty_page_cache(paths: Iterable[str], system: bool = True) -> str:
    """Empty the page cache of ``paths`` before a cold measurement; return how, in words, for the report.

    With ``system`` and root, the whole page cache is dropped (``sync``, then ``3`` into
    ``/proc/sys/vm/drop_caches``: what "cold" means on a benchmark machine). Without root, or where a
    container refuses that write, each file gets `evict`'s advice instead."""
    paths = list(paths)
    if hasattr(os, "sync"):
        os.sync()  # dirty pages (a file just written) cannot be dropped until they are on disk
    if system and hasattr(os, "geteuid") and os.geteuid() == 0:
        try:
            with open(DROP_CACHES, "w", encoding="ascii") as f:
                f.write("3\n")
            return f"dropped every cached page ({DROP_CACHES}, as root)"
        except OSError as e:
            refused = f"{DROP_CACHES} refused ({e.strerror}); "
    else:
        refused = ""
    advised = evict(paths)
    return f"{refused}posix_fadvise(DONTNEED) on {advised} of {len(paths)} files (advice; needs no root)"


def resident_share(paths: Iterable[str]) -> float | None:
    """Share of the bytes of ``paths`` now in the page cache, weighted by file size; ``None`` where the OS
    cannot say for one of them."""
    resident = total = 0.0
    for path in paths:
        size = os.path.getsize(path)
        fraction = resident_fraction(path)
        if fraction is None:
            return None
        resident += fraction * size
        total += size
    return resident / total if total else 1.0
