"""Files that appear whole or not at all, and survive a power cut once written.

A file written in place and cut short by a crash (or a kill, or a full disk) is a trap: the next
run finds it and trusts it. Every file the kit publishes — packs, checkpoints, staged shards, data
manifests — is written to a temporary name beside its target, flushed and fsynced, renamed over the
target in one step (``os.replace``), and then its folder is fsynced, so the rename itself is on disk.
Temporary names carry the writer's pid (``<target>.tmp-<pid>``), so the next writer of a target can tell
a dead writer's leftovers from a live one's and remove them (`clear_dead_temporaries`), saying what it freed.
A write stopped by a full disk removes its temporary file and raises `DiskFullError` naming the target.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
from collections.abc import Iterable, Iterator
from typing import IO, NamedTuple

from labkit.core.disk_space import disk_full_error, is_disk_full, require_space
from labkit.core.processes import running
from labkit.core.string_table import TextPath
from labkit.core.wording import count, size_text

TMP_INFIX = ".tmp-"


def temporary_name(path: TextPath) -> str:
    """The name this process writes ``path`` under before publishing it."""
    return f"{os.fspath(path)}{TMP_INFIX}{os.getpid()}"


class Freed(NamedTuple):
    """The temporary files of dead writers that `clear_dead_temporaries` removed, and their bytes."""

    files: int
    nbytes: int

    def __str__(self) -> str:
        return (
            f"removed {count(self.files, 'temporary file')} left by writers no longer running "
            f"({size_text(self.nbytes)} freed)"
        )


_log = logging.getLogger(__name__)


def _dead_writer(name: str) -> bool:
    """Whether ``name`` is a temporary file of a writer that is no longer running."""
    pid = name.rpartition(TMP_INFIX)[2]
    return TMP_INFIX in name and pid.isdigit() and not running(int(pid))


def _remove(where: str, leftovers: Iterable[str], quiet: bool = False) -> Freed:
    files = nbytes = 0
    for tmp in leftovers:
        try:
            size = os.path.getsize(tmp)
            os.unlink(tmp)
        except FileNotFoundError:  # another writer cleared it first
            continue
        files, nbytes = files + 1, nbytes + size
    freed = Freed(files, nbytes)
    if files and not quiet:
        _log.warning("%s: %s", where, freed)
    return freed


def clear_dead_temporaries(path: TextPath) -> Freed:
    """Remove the ``<path>.tmp-<pid>`` files whose writer is no longer running (killed mid-write), and log a
    warning saying how many bytes that freed (Python shows it on stderr unless logging is configured). A live
    writer's file, and any other name, is left alone."""
    path = os.fspath(path)
    return _remove(
        path, (tmp for tmp in glob.glob(glob.escape(path) + TMP_INFIX + "*") if _dead_writer(tmp[len(path) :]))
    )


def clear_dead_temporaries_in(folder: TextPath, quiet: bool = False) -> Freed:
    """`clear_dead_temporaries` for every file under ``folder`` at once (one walk of the tree); ``quiet`` for a
    writer clearing up after its own helpers, which it stopped itself."""
    folder = os.fspath(folder)
    return _remove(
        folder,
        (os.path.join(dirpath, name) for dirpath, _, names in os.walk(folder) for name in names if _dead_writer(name)),
        quiet,
    )


def fsync_folder(folder: TextPath) -> None:
    """Put a folder's entries (a rename into it) on disk. Windows cannot open a folder; NTFS journals renames."""
    if os.name != "posix":
        return
    fd = os.open(os.fspath(folder) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: TextPath, path: TextPath, durable: bool = True) -> None:
    """Rename the finished ``tmp`` over ``path`` in one step; with ``durable``, fsync the folder after."""
    os.replace(tmp, path)
    if durable:
        fsync_folder(os.path.dirname(os.path.abspath(os.fspath(path))))


@contextlib.contextmanager
def atomic_file(
    path: TextPath, durable: bool = True, size: int | None = None, what: str = "", tidy: bool = True
) -> Iterator[IO[bytes]]:
    """Write ``path`` through the binary file this yields: published when the block ends without an error
    (fsynced first with ``durable``), removed when it raises (a full disk raises `DiskFullError` naming ``path``
    and the bytes written). Dead writers' temporary files of ``path`` are removed first (``tidy``; a writer of
    many files in one folder clears the folder once instead, `clear_dead_temporaries_in`); then, when the bytes
    to come are known (``size``, ``what`` they are), a write that cannot fit is refused before it starts. The
    file's ``name`` is its temporary path."""
    if tidy:
        clear_dead_temporaries(path)
    if size is not None:
        require_space(path, size, what)
    tmp = temporary_name(path)
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        publish(tmp, path, durable)
    except BaseException as error:
        written = os.path.getsize(tmp) if os.path.exists(tmp) else None
        if written is not None:
            os.unlink(tmp)
        if is_disk_full(error):
            raise disk_full_error(path, written) from None
        raise


def write_atomic(path: TextPath, data: bytes, durable: bool = True, tidy: bool = True) -> None:
    """``path`` holds ``data`` whole, or what it held before; never a part (``tidy`` as for `atomic_file`)."""
    with atomic_file(path, durable, size=len(data), tidy=tidy) as f:
        f.write(data)


def write_json(path: TextPath, value: object) -> None:
    """``path`` holds ``value`` as indented JSON, whole (`write_atomic`): how results and reports are saved."""
    write_atomic(path, (json.dumps(value, indent=1) + "\n").encode("utf-8"))


def save_figure(figure: object, path: TextPath, **savefig: object) -> None:
    """A matplotlib figure saved to ``path`` whole (`write_atomic`), in the format its extension names."""
    import io

    buffer = io.BytesIO()
    ext = os.path.splitext(os.fspath(path))[1].lstrip(".") or "png"
    figure.savefig(buffer, format=ext, **savefig)  # type: ignore[attr-defined]
    write_atomic(path, buffer.getvalue())
