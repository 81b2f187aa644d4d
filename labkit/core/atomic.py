"""Files that appear whole or not at all, and survive a power cut once written.

A file written in place and cut short by a crash (or a kill, or a full disk) is a trap: the next
run finds it and trusts it. Every file the kit publishes — packs, checkpoints, staged shards, data
manifests — is written to a temporary name beside its target, flushed and fsynced, renamed over the
target in one step (``os.replace``), and then its folder is fsynced, so the rename itself is on disk.
Temporary names carry the writer's pid (``<target>.tmp-<pid>``), so a reader can tell a dead
writer's leftovers from a live one's.
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]
TMP_INFIX = ".tmp-"


def temporary_name(path: PathLike) -> str:
    """The name this process writes ``path`` under before publishing it."""
    return f"{os.fspath(path)}{TMP_INFIX}{os.getpid()}"


def fsync_folder(folder: PathLike) -> None:
    """Put a folder's entries (a rename into it) on disk. Windows cannot open a folder; NTFS journals renames."""
    if os.name != "posix":
        return
    fd = os.open(os.fspath(folder) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: PathLike, path: PathLike, durable: bool = True) -> None:
    """Rename the finished ``tmp`` over ``path`` in one step; with ``durable``, fsync the folder after."""
    os.replace(tmp, path)
    if durable:
        fsync_folder(os.path.dirname(os.path.abspath(os.fspath(path))))


@contextlib.contextmanager
def atomic_file(path: PathLike, durable: bool = True) -> Iterator[IO[bytes]]:
    """Write ``path`` through the binary file this yields: published when the block ends without an error
    (fsynced first with ``durable``), removed when it raises. The file's ``name`` is its temporary path."""
    tmp = temporary_name(path)
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        publish(tmp, path, durable)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomic(path: PathLike, data: bytes, durable: bool = True) -> None:
    """``path`` holds ``data`` whole, or what it held before; never a part."""
    with atomic_file(path, durable) as f:
        f.write(data)
