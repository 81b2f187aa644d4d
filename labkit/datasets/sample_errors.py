"""What a labkit dataset says when a sample cannot be loaded, and what it records when one is skipped.

A sample that fails raises `SampleError` naming its index, its path and the fix, in the main process and through a
DataLoader worker alike; under ``on_error="skip"`` each broken sample becomes one `SkipRecord`
(`labkit.datasets.skip_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.decode.decoder_contract import DecodeError
from labkit.storage.pack_format import PackError

#: What a dataset does with a sample that cannot be loaded: raise `SampleError`, or substitute another and record it.
ON_ERROR = ("raise", "skip")
#: The errors a sample's read or decode may raise: each becomes a `SampleError` naming the sample.
LOAD_ERRORS = (DecodeError, PackError, OSError)
#: Those that will fail again on the next read (a failed read, EIO or EMFILE, may succeed later).
LASTING_ERRORS = (DecodeError, PackError, FileNotFoundError, IsADirectoryError, PermissionError)


class SampleError(LabkitError, RuntimeError):
    """One sample could not be loaded; the message names its index, its path and the fix."""

    def __init__(self, message: str, index: int | None = None, path: str | None = None) -> None:
        # One positional argument, so DataLoader can re-raise it in the main process.
        super().__init__(message)
        self.index = index
        self.path = path


@dataclass(frozen=True)
class SkipRecord:
    """A broken sample under ``on_error="skip"``: where it is, why it failed, and how many times
    another sample was returned in its place (0 for one found broken only while looking for a
    replacement)."""

    index: int
    path: str
    error: str
    substitutions: int = 0


def check_on_error(on_error: str) -> None:
    """Refuse an ``on_error`` the datasets do not know, before any work."""
    if on_error not in ON_ERROR:
        raise LabkitValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
