"""A full disk, said in one line: before a write (the space it needs against the space there is) and during one
(another writer filled the disk first).

Both errors name the destination and the bytes, and the writers that raise them remove their temporary files
first, so what is left on disk is what was there before.
"""

from __future__ import annotations

import errno
import os
import shutil

from labkit.core.errors import LabkitOSError
from labkit.core.string_table import PathLike
from labkit.core.wording import size_text

#: The errors a write gets when its file system has no room: no space left, or the user's quota spent.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(LabkitOSError):
    """A write that does not fit on its file system, refused before it starts or stopped when the disk filled.

    Its ``errno`` is ``ENOSPC``, as the system's own error; its text is the message alone."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOSPC


def _existing_folder(path: str) -> str:
    folder = os.path.abspath(path)
    while not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    return folder


def free_bytes(path: PathLike) -> int:
    """Bytes free (to this user) on the file system that holds ``path``, or would hold it once created."""
    return shutil.disk_usage(_existing_folder(os.fspath(path))).free


def require_space(path: PathLike, needed: int, what: str = "") -> None:
    """Raise `DiskFullError` with both numbers unless ``needed`` bytes fit where ``path`` goes; ``what`` says
    what the bytes are (``"2,000 files of the source"``)."""
    path = os.fspath(path)
    free = free_bytes(path)
    if needed > free:
        of = f" ({what})" if what else ""
        raise DiskFullError(
            f"{path} needs {size_text(needed)}{of} and its file system has "
            f"{size_text(free)} free: free some space there or write elsewhere"
        )


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` is a write refused for lack of space (any ``OSError`` with `FULL_ERRNOS`)."""
    return isinstance(error, OSError) and error.errno in FULL_ERRNOS


def disk_full_error(path: PathLike, written: int | None) -> DiskFullError:
    """The error for a write to ``path`` stopped by a full disk after ``written`` bytes (``None``: not known);
    the caller has removed its temporary file."""
    path = os.fspath(path)
    done = f" after {size_text(written)} had been written" if written is not None else ""
    return DiskFullError(
        f"{path}: the disk filled up{done} ({size_text(free_bytes(path))} free now); nothing "
        "was kept under that name: free some space there or write elsewhere"
    )
