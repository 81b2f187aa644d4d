"""Damaged packs for fuzzing the pack reader: the ways a file gets damaged, and the promise the reader keeps.

The promise (`labkit.storage.pack_format`): opening, reading and verifying a pack, however damaged,
either gives back exactly the bytes that were packed or raises a `PackError` that names the
file (and the sample) — never another exception, never changed bytes, never a hang.

A `Mutation` damages a copy of a small valid pack (`sample_pack_bytes`): a truncation, flipped
bytes, or an edited index record or header field, optionally *re-signed* (checksums recomputed,
as someone editing the file on purpose would) so that the damage gets past the checksums and
reaches the bounds checks behind them. `check_promise` runs the reader on the result. The
hypothesis strategies at the end draw mutations; the quick fuzz in ``tests/storage/test_pack_format.py``
and the long one in ``benchmarks/fuzz_pack.py`` both use them (hypothesis is a test
dependency, imported only when a strategy is asked for).
"""

from __future__ import annotations

import functools
import os
import random
import struct
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The header's layout too: a mutation must know where each field lies.
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.storage.pack_format import (
    HEADER_CRC_STRUCT,
    HEADER_SIZE,
    HEADER_STRUCT,
    RECORD_DTYPE,
    PackError,
    PackReader,
    PackWriter,
    verify_pack,
)

SAMPLE_CLASSES = ["a", "b"]
SAMPLE_BLOBS = [b"first sample", b"", b"\x00\xff" * 100, random.Random(0).randbytes(333)]
SAMPLE_NAMES: list[Any] = ["a/0.jpg", "a/empty.jpg", b"b/caf\xe9.jpg", "b/3.jpg"]  # one path is not UTF-8
SAMPLE_LABELS = [0, 0, 1, 1]

# Header fields after magic and version, in the order of HEADER_STRUCT; trailer_crc is rewritten by re-signing.
HEADER_FIELDS = (
    "kind",
    "count",
    "data_offset",
    "index_offset",
    "paths_length",
    "meta_length",
    "total_size",
    "alignment",
)


def _header_offsets() -> dict[str, tuple[int, str]]:
    """Byte offset and struct format of every header field, read from the header's own format."""
    names = ("magic", "version", *HEADER_FIELDS, "trailer_crc")
    codes = ["8s", *list(HEADER_STRUCT.format.lstrip("<")[2:])]
    out, offset = {}, 0
    for name, code in zip(names, codes):
        out[name] = (offset, "<" + code)
        offset += struct.calcsize("<" + code)
    return out


def _record_format(field: str) -> str:
    dtype = RECORD_DTYPE.fields[field][0]
    letter = {1: "b", 2: "h", 4: "i", 8: "q"}[dtype.itemsize]
    return "<" + (letter.upper() if dtype.kind == "u" else letter)


RECORD_FIELDS = {name: _record_format(name) for name in RECORD_DTYPE.names}
HEADER_OFFSETS = _header_offsets()


class BrokenPromise(LabkitError, AssertionError):
    """The reader did something other than return the packed bytes or raise a PackError naming the file."""


@functools.cache
def sample_pack_bytes(alignment: int = 1) -> bytes:
    """The bytes of a small valid pack of `SAMPLE_BLOBS` (written once per process)."""
    with tempfile.TemporaryDirectory(prefix="labkit-fuzz-") as tmp:
        path = write_sample_pack(os.path.join(tmp, "sample.pack"), alignment)
        with open(path, "rb") as f:
            return f.read()


def write_sample_pack(path: str, alignment: int = 1) -> str:
    """Write the small pack of `SAMPLE_BLOBS` to ``path`` with `PackWriter`; return ``path``."""
    with PackWriter(path, SAMPLE_CLASSES, alignment=alignment) as w:
        for blob, label, name in zip(SAMPLE_BLOBS, SAMPLE_LABELS, SAMPLE_NAMES):
            w.add(blob, label, name)
    return path


def patch(path: str, offset: int, data: bytes) -> None:
    """Overwrite ``len(data)`` bytes of ``path`` at ``offset``."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def record_offset(path: str, index: int) -> int:
    """Where record ``index`` of the (valid) pack at ``path`` starts."""
    return PackReader(path).layout.records_offset + index * RECORD_DTYPE.itemsize


def resign(path: str) -> None:
    """Recompute the trailer's and then the header's CRC32, as a deliberate editor of the file would."""
    with open(path, "r+b") as f:
        head = bytearray(f.read(HEADER_SIZE))
        if len(head) < HEADER_STRUCT.size:
            return  # nothing to sign
        fields = list(HEADER_STRUCT.unpack_from(head))
        f.seek(min(fields[5], os.fstat(f.fileno()).st_size))  # index_offset, as the header now says
        fields[-1] = zlib.crc32(f.read())
        signed = HEADER_STRUCT.pack(*fields)
        f.seek(0)
        f.write(signed + HEADER_CRC_STRUCT.pack(zlib.crc32(signed)))


@dataclass(frozen=True)
class Mutation:
    """One way to damage a pack.

    ``kind`` and ``args``: ``"truncate"`` (keep,), ``"flip"`` ((position, xor mask), ...),
    ``"record"`` (index, field, value) or ``"header"`` (field, value); with ``resign`` the
    checksums are recomputed afterwards.
    """

    kind: str
    args: tuple[Any, ...]
    resign: bool = False

    def apply(self, path: str) -> None:
        if self.kind == "truncate":
            with open(path, "r+b") as f:
                f.truncate(self.args[0])
        elif self.kind == "flip":
            with open(path, "r+b") as f:
                for position, mask in self.args:
                    f.seek(position)
                    byte = f.read(1)[0]
                    f.seek(position)
                    f.write(bytes([byte ^ mask]))
        elif self.kind == "record":
            index, field, value = self.args
            offset = record_offset(path, index) + RECORD_DTYPE.fields[field][1]
            patch(path, offset, struct.pack(RECORD_FIELDS[field], value))
        elif self.kind == "header":
            field, value = self.args
            offset, fmt = HEADER_OFFSETS[field]
            patch(path, offset, struct.pack(fmt, value))
        else:
            raise LabkitValueError(f"unknown mutation kind {self.kind!r}")
        if self.resign:
            resign(path)


def damaged_copy(path: str, mutation: Mutation, alignment: int = 1) -> str:
    """Write the sample pack to ``path``, damage it with ``mutation``; return ``path``."""
    with open(path, "wb") as f:
        f.write(sample_pack_bytes(alignment))
    mutation.apply(path)
    return path


def check_promise(path: str, blobs: Sequence[bytes] = SAMPLE_BLOBS) -> str:
    """Open, read and verify ``path``; raise `BrokenPromise` if the reader breaks its promise.

    Returns what happened, for statistics: the PackError's class name that rejected the
    file, or ``"read"`` when every sample came back (some perhaps rejected one by one).
    """
    name = os.path.basename(path)
    try:
        reader = PackReader(path)
    except PackError as e:
        if name not in str(e):
            raise BrokenPromise(f"{type(e).__name__} does not name the file: {e}") from e
        return type(e).__name__
    except Exception as e:
        raise BrokenPromise(f"opening raised {type(e).__name__}, not a PackError: {e}") from e
    for i in range(len(reader)):
        try:
            data = reader.read(i)
        except PackError as e:
            if f"sample {i}" not in str(e):
                raise BrokenPromise(f"{type(e).__name__} for sample {i} does not name it: {e}") from e
            continue
        except Exception as e:
            raise BrokenPromise(f"reading sample {i} raised {type(e).__name__}, not a PackError: {e}") from e
        if i >= len(blobs) or data != blobs[i]:
            raise BrokenPromise(f"sample {i} came back changed ({len(data)} bytes) and nothing said so")
    try:
        verify_pack(path)
    except PackError as e:
        return type(e).__name__
    except Exception as e:
        raise BrokenPromise(f"verify_pack raised {type(e).__name__}, not a PackError: {e}") from e
    return "read"


# -- hypothesis strategies ------------------------------------------------------------------------------


def _field_values(fmt: str) -> Any:
    from hypothesis import strategies as st

    bits = 8 * struct.calcsize(fmt)
    if fmt[-1].islower():
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    # Small values and values near the edges find more than uniform 64-bit integers.
    return st.one_of(
        st.integers(0, 2 * len(sample_pack_bytes())),
        st.integers(0, 2**bits - 1),
        st.integers(2**bits - 64, 2**bits - 1),
    )


def truncations() -> Any:
    """Cut the sample pack anywhere short of its end."""
    from hypothesis import strategies as st

    keep = st.integers(0, len(sample_pack_bytes()) - 1)
    return st.builds(Mutation, st.just("truncate"), st.tuples(keep))


def flips(resign: bool = False) -> Any:
    """XOR one to four bytes anywhere in the sample pack with a non-zero mask."""
    from hypothesis import strategies as st

    one = st.tuples(st.integers(0, len(sample_pack_bytes()) - 1), st.integers(1, 255))
    return st.builds(Mutation, st.just("flip"), st.lists(one, min_size=1, max_size=4).map(tuple), st.just(resign))


def record_edits() -> Any:
    """Set one field of one index record to any value of its type, and re-sign the file."""
    from hypothesis import strategies as st

    index = st.integers(0, len(SAMPLE_BLOBS) - 1)
    return st.one_of(
        [
            st.builds(Mutation, st.just("record"), st.tuples(index, st.just(name), _field_values(fmt)), st.just(True))
            for name, fmt in RECORD_FIELDS.items()
        ]
    )


def header_edits() -> Any:
    """Set one header field (section offsets and sizes, count, kind, alignment) and re-sign the file."""
    from hypothesis import strategies as st

    return st.one_of(
        [
            st.builds(
                Mutation,
                st.just("header"),
                st.tuples(st.just(name), _field_values(HEADER_OFFSETS[name][1])),
                st.just(True),
            )
            for name in HEADER_FIELDS
        ]
    )


def any_mutation() -> Any:
    """Every kind of damage above, re-signed or not."""
    from hypothesis import strategies as st

    return st.one_of(truncations(), flips(), flips(resign=True), record_edits(), header_edits())
