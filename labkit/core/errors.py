"""The one base class under every error labkit raises, so a caller can catch the kit's errors in one clause.

Each error also keeps the standard base that says what kind of failure it is (a damaged pack is
also a ``ValueError``, an unwritable folder also an ``OSError``), and its message names the
file or sample and the fix.
"""

from __future__ import annotations


class LabkitError(Exception):
    """Base of every error labkit raises."""


# The kit's versions of the standard errors it raises: each is caught by ``except LabkitError`` and by the
# standard clause (``except ValueError``) alike, so code written against either keeps working.


class LabkitValueError(LabkitError, ValueError):
    """An argument or a piece of data has a value the kit cannot use; the message says which and the fix."""


class LabkitTypeError(LabkitError, TypeError):
    """An argument or a sample is of a type the kit cannot use."""


class LabkitIndexError(LabkitError, IndexError):
    """A sample index outside the dataset."""


class LabkitKeyError(LabkitError, KeyError):
    """A name the kit does not know (a decoder, a version)."""


class LabkitFileNotFoundError(LabkitError, FileNotFoundError):
    """A file or folder the kit was pointed at does not exist."""


class LabkitFileExistsError(LabkitError, FileExistsError):
    """A file or folder the kit would write is there already, holding what it must not replace."""


class LabkitRuntimeError(LabkitError, RuntimeError):
    """Something failed while running: a worker, a pool, a measurement that could not be made."""


class LabkitOSError(LabkitError, OSError):
    """The operating system refused something the kit needs (a folder it cannot write, a mount)."""


class LabkitWarning(LabkitError, UserWarning):
    """A setting that works but costs something the user likely did not mean (more workers than cores)."""
