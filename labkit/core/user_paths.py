"""The paths a user names, checked before any work starts.

A typo in an input folder must stop a command at once, not turn into a folder of made-up data; an
output path that cannot be written must stop it before minutes of measuring, not after. Each check
raises an error that names the path, the flag it came from and the fix, and creates nothing.
"""

from __future__ import annotations

import os
import tempfile

from labkit.core.errors import LabkitFileNotFoundError, LabkitOSError
from labkit.core.string_table import PathLike


class OutputPathError(LabkitOSError):
    """An output path the user named cannot be written; the message names it and says why."""


def _named(path: str, what: str) -> str:
    return f"{what} {path}" if what else path


def require_folder(path: PathLike, what: str = "", holds: str = "an ImageFolder (root/<class>/<image>)") -> str:
    """``path`` as a string when it is an existing folder; else `LabkitFileNotFoundError` naming it, what was
    looked for (``holds``) and, for a file, that it is one. Nothing is created."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return path
    if os.path.exists(path):
        raise LabkitFileNotFoundError(
            f"{_named(path, what)} is a file, not a folder: name the folder that holds {holds}"
        )
    parent = os.path.dirname(path.rstrip(os.sep)) or "."  # as given: a relative path stays relative
    where = "" if os.path.isdir(parent) else f"; {parent} does not exist either"
    raise LabkitFileNotFoundError(
        f"{_named(path, what)}: no such folder (looked for {holds}{where}); check the path for a typo"
    )


def write_probe_error(folder: str) -> OSError | None:
    """None where a file can be made and removed in ``folder`` (the one test that also catches read-only mounts and
    quotas), else the error that stopped it. Nothing is left behind."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".labkit-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e
    return None


def _probe(folder: str, path: str, what: str) -> None:
    error = write_probe_error(folder)
    if error is not None:
        raise OutputPathError(
            f"{_named(path, what)}: cannot write in {folder} ({error.strerror or error}); choose a folder you can write"
        )


def check_output_file(path: PathLike, what: str = "") -> str:
    """``path`` as a string when a file can be written there: its folder exists and takes new files, and it is
    not itself a folder. Else `OutputPathError` naming it. Nothing is left behind."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise OutputPathError(f"{_named(path, what)} is a folder: name a file to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        kind = "is a file, not a folder" if os.path.exists(folder) else "does not exist"
        raise OutputPathError(f"{_named(path, what)}: its folder {folder} {kind}; create it first or name another path")
    _probe(folder, path, what)
    return path


def check_output_folder(path: PathLike, what: str = "") -> str:
    """``path`` as a string when files can be made in it: an existing folder that takes new files, or a new one
    whose parent folder exists and does. Else `OutputPathError` naming it. Nothing is created."""
    path = os.fspath(path)
    if os.path.isdir(path):
        _probe(path, path, what)
        return path
    if os.path.exists(path):
        raise OutputPathError(f"{_named(path, what)} is a file: name a folder")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OutputPathError(
            f"{_named(path, what)}: its parent folder {parent} does not exist; create it first or name another path"
        )
    _probe(parent, path, what)
    return path
