"""A list of strings stored as two numpy arrays, safe to share with DataLoader workers.

A Python ``list[str]`` of a million paths is a million refcounted objects. Every worker
forked from the main process that merely *reads* them bumps their refcounts, which writes
to the pages holding them, so copy-on-write duplicates the whole list into every worker
and RSS grows epoch after epoch (pytorch/pytorch#13246). Two numpy arrays — one byte
buffer and one offsets array — are two objects, however many strings they hold.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Union

import numpy as np

from labkit.core.errors import LabkitIndexError, LabkitValueError

PathLike = Union[str, bytes, "os.PathLike[str]"]  #: a path as os functions take it, bytes included
TextPath = Union[str, "os.PathLike[str]"]  #: a path that is text: one a message or a temporary name is made from


class StringTable:
    """Immutable sequence of strings (file names included) held in two numpy arrays.

    Strings are stored as file-system bytes (``os.fsencode``), so names that are not valid
    UTF-8 survive the round trip unchanged; ``table[i]`` gives them back as ``str`` with
    ``os.fsdecode`` (surrogate escapes), which ``open()`` accepts.
    """

    __slots__ = ("blob", "offsets")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        if blob.dtype != np.uint8 or blob.ndim != 1:
            raise LabkitValueError("StringTable blob must be a 1-D uint8 array")
        if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(blob):
            raise LabkitValueError("StringTable offsets must start at 0 and end at len(blob)")
        if np.any(np.diff(offsets) < 0):
            raise LabkitValueError("StringTable offsets must not decrease")
        self.blob = blob
        self.offsets = offsets.astype(np.int64, copy=False)

    @classmethod
    def from_strings(cls, items: Iterable[PathLike]) -> StringTable:
        items = list(items)
        if items and all(type(s) is str for s in items):
            joined = "\0".join(items)  # one encode for all: a file name holds no NUL
            if joined.count("\0") == len(items) - 1:
                return cls._from_joined(np.frombuffer(os.fsencode(joined), dtype=np.uint8), len(items))
        encoded = [os.fsencode(s) for s in items]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        return cls(blob, offsets)

    @classmethod
    def _from_joined(cls, joined: np.ndarray, count: int) -> StringTable:
        """From ``count`` strings' bytes joined by NUL bytes (none inside a string)."""
        ends = np.append(np.flatnonzero(joined == 0), len(joined))
        offsets = np.zeros(count + 1, dtype=np.int64)
        offsets[1:] = ends - np.arange(count)  # each string ends where its NUL was, less the NULs before it
        return cls(joined[joined != 0].copy(), offsets)

    @classmethod
    def concat(cls, tables: Sequence[StringTable]) -> StringTable:
        """The strings of ``tables``, one after another."""
        if not tables:
            return cls(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))
        starts = np.cumsum([0] + [t.blob.nbytes for t in tables[:-1]])
        offsets = np.concatenate([tables[0].offsets[:1]] + [t.offsets[1:] + s for t, s in zip(tables, starts)])
        return cls(np.concatenate([t.blob for t in tables]), offsets)

    def take(self, indices: np.ndarray | Sequence[int]) -> StringTable:
        """A new table of the strings at ``indices``, in that order, without a Python string per item."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise LabkitIndexError(f"string indices out of range for {len(self)} strings")
        starts, lengths = self.offsets[idx], self.offsets[idx + 1] - self.offsets[idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
        return StringTable(self.blob[gather], offsets)

    def strings(self, indices: np.ndarray | Sequence[int]) -> list[str]:
        """The strings at ``indices`` (each in ``[0, len)``), as a list: one call for a batch, with no Python call
        per string (each is decoded as `os.fsdecode` does)."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise LabkitIndexError(f"string indices out of range for {len(self)} strings")
        blob, encoding, errors = self.blob, sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
        spans = zip(self.offsets[idx].tolist(), self.offsets[idx + 1].tolist())
        return [blob[start:end].tobytes().decode(encoding, errors) for start, end in spans]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, i: int) -> bytes:
        """The i-th string as the bytes that were stored."""
        if not -len(self) <= i < len(self):
            raise LabkitIndexError(f"string index {i} out of range for {len(self)} strings")
        i %= len(self)
        return self.blob[self.offsets[i] : self.offsets[i + 1]].tobytes()

    def __getitem__(self, i: int) -> str:
        return os.fsdecode(self.raw(i))

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"StringTable({len(self)} strings, {self.blob.nbytes} bytes)"


def printable(name: str) -> str:
    """A file name safe to print: bytes that are not UTF-8 shown as ``\\xe9`` instead of crashing print()."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
