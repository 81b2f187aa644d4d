"""One self-describing packed file of samples: the storage layer of article section 5.3, made safe.

Layout (all integers little-endian)::

    [header, HEADER_SIZE bytes]  magic, version, kind, count, section offsets and sizes,
                                 CRC32 of the trailer, CRC32 of the header itself
    [blobs]                      each sample's bytes as they were (kind "encoded": the JPEG/PNG
                                 file) or a uint8 C×H×W array (kind "decoded"), each blob
                                 starting on a multiple of ``alignment``
    [trailer]  records           count × (offset u64, length u64, label i32, crc32 u32)
               path offsets      (count + 1) × i64 into the path bytes
               path bytes        original relative paths, file-system encoded
               metadata          UTF-8 JSON: class names, decoded shape, skipped files

Nothing in the format is pickled, so opening an untrusted pack never runs code. Every size
in the header is checked against the real file size before anything is read, every record
against the blob region, and every blob against its CRC32 when it is read.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.core.atomic import clear_dead_temporaries, publish, temporary_name
from labkit.core.disk_space import disk_full_error, is_disk_full
from labkit.core.errors import (
    LabkitError,
    LabkitFileNotFoundError,
    LabkitIndexError,
    LabkitOSError,
    LabkitTypeError,
    LabkitValueError,
)
from labkit.core.indices import wrap_indices
from labkit.core.string_table import PathLike, StringTable, printable

MAGIC = b"LABKPACK"


def is_pack(path: PathLike) -> bool:
    """Whether the file at ``path`` starts as a labkit pack does (its header is not checked further)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


VERSION = 1
HEADER_SIZE = 128
KIND_ENCODED = 0
KIND_DECODED = 1
_KIND_NAMES = {KIND_ENCODED: "encoded", KIND_DECODED: "decoded"}

# magic, version, kind, count, data_offset, index_offset, paths_length, meta_length,
# total_size, alignment, trailer_crc; the header CRC follows at HEADER_STRUCT.size.
HEADER_STRUCT = struct.Struct("<8sIIQQQQQQII")
HEADER_CRC_STRUCT = struct.Struct("<I")
RECORD_DTYPE = np.dtype([("offset", "<u8"), ("length", "<u8"), ("label", "<i4"), ("crc32", "<u4")])
_PATH_OFFSET_DTYPE = np.dtype("<i8")
#: Bytes a `PackWriter` appends between two background flushes to the disk.
SYNC_BEHIND = 128 << 20


class PackError(LabkitError, ValueError):
    """A pack file is damaged or is not a pack; the message names the file and the sample."""

    def __init__(
        self, message: str, pack_path: str | None = None, index: int | None = None, sample_path: str | None = None
    ) -> None:
        # One positional argument, so DataLoader can re-raise it in the main process.
        super().__init__(message)
        self.pack_path = pack_path
        self.index = index
        self.sample_path = sample_path

    @classmethod
    def at(
        cls, pack_path: PathLike, problem: str, index: int | None = None, sample_path: str | None = None, fix: str = ""
    ) -> PackError:
        """The error for ``problem`` in ``pack_path`` (at sample ``index``), with the fix."""
        where = os.fsdecode(pack_path)
        if index is not None:
            where += f", sample {index}" + (f" ({sample_path!r})" if sample_path is not None else "")
        message = f"{where}: {problem}" + (f". {fix}" if fix else "")
        return cls(message, os.fsdecode(pack_path), index, sample_path)


class NotAPackError(PackError):
    """The file does not start with the pack magic bytes."""


class UnsupportedVersionError(PackError):
    """The pack was written by a format version this labkit cannot read."""


class TruncatedPackError(PackError):
    """The file is shorter than its header says (an interrupted copy or download)."""


class CorruptIndexError(PackError):
    """Header, trailer or a record is inconsistent: a checksum fails or a size does not add up."""


class EntryOutOfBoundsError(CorruptIndexError):
    """A record points outside the blob region of the file."""


class ChecksumMismatchError(PackError):
    """A blob's bytes do not match the CRC32 recorded when it was packed."""


REPACK = "Re-create it with `labkit pack`, or copy it again from its source"


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


@dataclass(frozen=True)
class PackLayout:
    """What the header of a pack says, after every size in it was checked."""

    kind: int
    count: int
    data_offset: int
    index_offset: int
    paths_length: int
    meta_length: int
    total_size: int
    alignment: int
    trailer_crc: int

    @property
    def records_offset(self) -> int:
        return self.index_offset

    @property
    def path_offsets_offset(self) -> int:
        return self.index_offset + self.count * RECORD_DTYPE.itemsize

    @property
    def paths_offset(self) -> int:
        return self.path_offsets_offset + (self.count + 1) * _PATH_OFFSET_DTYPE.itemsize

    @property
    def meta_offset(self) -> int:
        return self.paths_offset + self.paths_length


def _parse_header(path: PathLike, head: bytes, file_size: int) -> PackLayout:
    if len(head) < len(MAGIC) or head[: len(MAGIC)] != MAGIC:
        raise NotAPackError.at(
            path,
            f"not a labkit pack (starts with {head[:8]!r}, expected {MAGIC!r})",
            fix="Pass a file written by `labkit pack`",
        )
    if file_size < HEADER_SIZE:
        raise TruncatedPackError.at(
            path, f"file is {file_size} bytes, shorter than the {HEADER_SIZE}-byte header", fix=REPACK
        )
    fields = HEADER_STRUCT.unpack_from(head)
    (
        _,
        version,
        kind,
        count,
        data_offset,
        index_offset,
        paths_length,
        meta_length,
        total_size,
        alignment,
        trailer_crc,
    ) = fields
    if version != VERSION:
        raise UnsupportedVersionError.at(
            path,
            f"format version {version}; this labkit reads version {VERSION}",
            fix="Upgrade labkit, or re-pack with this one",
        )
    (header_crc,) = HEADER_CRC_STRUCT.unpack_from(head, HEADER_STRUCT.size)
    if zlib.crc32(head[: HEADER_STRUCT.size]) != header_crc:
        raise CorruptIndexError.at(path, "header checksum mismatch", fix=REPACK)
    if kind not in _KIND_NAMES:
        raise CorruptIndexError.at(path, f"unknown pack kind {kind}", fix=REPACK)
    if file_size < total_size:
        raise TruncatedPackError.at(path, f"file is {file_size} bytes but its header says {total_size}", fix=REPACK)
    if file_size > total_size:
        raise CorruptIndexError.at(
            path, f"{file_size - total_size} unexpected bytes after the end of the pack", fix=REPACK
        )
    layout = PackLayout(
        kind, count, data_offset, index_offset, paths_length, meta_length, total_size, alignment, trailer_crc
    )
    trailer_size = (
        count * RECORD_DTYPE.itemsize + (count + 1) * _PATH_OFFSET_DTYPE.itemsize + paths_length + meta_length
    )
    if not (
        alignment >= 1 and HEADER_SIZE <= data_offset <= index_offset and index_offset + trailer_size == total_size
    ):
        raise CorruptIndexError.at(path, "section sizes in the header do not add up to the file size", fix=REPACK)
    return layout


def _check_records(
    path: PathLike, layout: PackLayout, records: np.ndarray, paths: StringTable, n_classes: int, item_bytes: int | None
) -> None:
    """Bounds-check every record at once; name the first bad one."""

    def first_bad(mask: np.ndarray) -> int:
        return int(np.flatnonzero(mask)[0])

    offsets = records["offset"]
    lengths = records["length"]
    # Written so that no sum can overflow uint64.
    outside = (
        (offsets < layout.data_offset)
        | (offsets > layout.index_offset)
        | (lengths > layout.index_offset - np.minimum(offsets, layout.index_offset))
    )
    if outside.any():
        i = first_bad(outside)
        raise EntryOutOfBoundsError.at(
            path,
            f"record points at bytes {int(offsets[i])}..{int(offsets[i]) + int(lengths[i])}, outside the "
            f"blob region {layout.data_offset}..{layout.index_offset}",
            i,
            paths[i],
            REPACK,
        )
    labels = records["label"]
    bad_label = (labels < 0) | (labels >= n_classes)
    if bad_label.any():
        i = first_bad(bad_label)
        raise CorruptIndexError.at(
            path, f"label {int(labels[i])} is not one of the {n_classes} classes", i, paths[i], REPACK
        )
    if item_bytes is not None and (lengths != item_bytes).any():
        i = first_bad(lengths != item_bytes)
        raise CorruptIndexError.at(
            path, f"decoded sample has {int(lengths[i])} bytes, expected {item_bytes}", i, paths[i], REPACK
        )


class PackReader:
    """Random access to the samples of a pack through a lazily created ``np.memmap``.

    The mapping is opened on first use in each process and never pickled: a reader pickles
    as its path, so it crosses into DataLoader workers under fork, spawn and forkserver
    alike, and each worker maps the file itself (the OS shares the pages between them).
    """

    def __init__(self, path: PathLike, check_crc: bool = True) -> None:
        self.path = os.fspath(path)
        self.check_crc = check_crc
        self._map: np.memmap | None = None
        self._open()

    # -- opening and pickling -------------------------------------------------
    def _open(self) -> None:
        """Read and check header and trailer with plain reads; the blobs are mapped on first use."""
        try:
            file_size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                head = f.read(HEADER_SIZE)
                self.layout = layout = _parse_header(self.path, head, file_size)
                f.seek(layout.index_offset)
                trailer = f.read(layout.total_size - layout.index_offset)
        except FileNotFoundError:
            raise LabkitFileNotFoundError(
                f"{self.path}: no such pack file; make one with `labkit pack FOLDER {self.path}`"
            ) from None
        except IsADirectoryError:
            raise LabkitFileNotFoundError(
                f"{self.path} is a folder, not a pack file: open an ImageFolder with "
                f"ImageFolderDataset, or pack it first (`labkit pack {self.path} "
                f"{self.path.rstrip(os.sep)}.pack`)"
            ) from None
        if zlib.crc32(trailer) != layout.trailer_crc:
            raise CorruptIndexError.at(
                self.path, "index checksum mismatch (records, paths or metadata damaged)", fix=REPACK
            )
        base = layout.index_offset
        self.records = np.frombuffer(trailer, RECORD_DTYPE, layout.count, layout.records_offset - base)
        path_offsets = np.frombuffer(trailer, _PATH_OFFSET_DTYPE, layout.count + 1, layout.path_offsets_offset - base)
        try:
            path_bytes = np.frombuffer(trailer, np.uint8, layout.paths_length, layout.paths_offset - base)
            self.paths = StringTable(path_bytes, path_offsets)
            self.meta: dict[str, Any] = json.loads(trailer[layout.meta_offset - base :])
            self.classes: list[str] = [str(c) for c in self.meta["classes"]]
            decoded = self.meta.get("decoded")
            self.decoded_shape: tuple[int, ...] | None = tuple(int(d) for d in decoded["shape"]) if decoded else None
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptIndexError.at(self.path, f"unreadable path table or metadata ({e})", fix=REPACK) from None
        if (layout.kind == KIND_DECODED) != (self.decoded_shape is not None):
            raise CorruptIndexError.at(self.path, "pack kind and metadata disagree", fix=REPACK)
        item_bytes = int(np.prod(self.decoded_shape)) if self.decoded_shape else None
        _check_records(self.path, layout, self.records, self.paths, len(self.classes), item_bytes)
        self.labels = self.records["label"].astype(np.int64)
        # one plain array per field: reading a structured record as a tuple costs ~9 us a sample
        self._offsets, self._lengths, self._crcs = (self.records[k] for k in ("offset", "length", "crc32"))

    @property
    def mapped(self) -> bool:
        """Whether the blobs are mapped yet: a reader maps them at its first read, in the process that reads (a
        worker maps its own; the parent's mapping is never pickled)."""
        return self._map is not None

    def _blobs(self) -> np.ndarray:
        if self._map is None:
            size = os.path.getsize(self.path)
            if size != self.layout.total_size:  # changed since opened: reading past its end would be a Bus error
                raise TruncatedPackError.at(
                    self.path, f"file is now {size} bytes, was {self.layout.total_size}", fix=REPACK
                )
            # a plain ndarray over the mapping (it keeps the mapping alive): slicing an np.memmap runs
            # Python-level __array_finalize__, ~7 us a sample
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r").view(np.ndarray)
        return self._map

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "check_crc": self.check_crc}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.check_crc = state["check_crc"]
        self._map = None
        self._open()

    # -- facts ------------------------------------------------------------------
    def __len__(self) -> int:
        return self.layout.count

    @property
    def kind(self) -> str:
        """``"encoded"`` (image files as they were) or ``"decoded"`` (uint8 C×H×W arrays)."""
        return _KIND_NAMES[self.layout.kind]

    @property
    def fields(self) -> dict[str, list[Any]]:
        """The samples' own fields (`labkit.storage.sample_writer.pack_samples`): {name: one JSON value per
        sample, None where a sample has none}; empty for a pack without them."""
        return dict(self.meta.get("fields", {}))

    @property
    def nbytes(self) -> int:
        """The pack file's size in bytes."""
        return self.layout.total_size

    def __repr__(self) -> str:
        shape = f", shape={self.decoded_shape}" if self.decoded_shape else ""
        return f"PackReader({self.path!r}, {len(self)} {self.kind} samples, {len(self.classes)} classes{shape})"

    # -- reading ------------------------------------------------------------------
    def _check_index(self, i: int) -> int:
        n = len(self)
        if not -n <= i < n:
            raise LabkitIndexError(f"{self.path}: sample index {i} out of range for {n} samples")
        return int(i) % n

    def view(self, i: int) -> np.ndarray:
        """Zero-copy, read-only view of sample i's bytes, checked against its CRC32."""
        i = self._check_index(i)
        offset = int(self._offsets[i])
        blob = self._blobs()[offset : offset + int(self._lengths[i])]
        if self.check_crc and zlib.crc32(blob) != int(self._crcs[i]):
            raise ChecksumMismatchError.at(
                self.path, "checksum mismatch: the bytes changed since packing", i, self.paths[i], REPACK
            )
        return blob

    def read(self, i: int) -> bytes:
        """Sample i's bytes (an encoded image file, or a decoded array's raw bytes)."""
        return self.view(i).tobytes()

    def read_many(self, indices: Sequence[int]) -> list[bytes]:
        """Bytes of many samples (a batch), in the order asked, each checked against its CRC32: one call for the
        batch, so a batch costs no Python call per sample. A damaged sample raises, naming the first."""
        checked = wrap_indices(indices, len(self), self._check_index)
        blobs = self._blobs()
        starts = self._offsets[checked].astype(np.int64)
        spans = zip(starts.tolist(), (starts + self._lengths[checked].astype(np.int64)).tolist())
        out = [blobs[start:end].tobytes() for start, end in spans]
        if self.check_crc:
            bad = [k for k, (data, crc) in enumerate(zip(out, self._crcs[checked].tolist())) if zlib.crc32(data) != crc]
            if bad:
                i = int(checked[bad[0]])
                raise ChecksumMismatchError.at(
                    self.path, "checksum mismatch: the bytes changed since packing", i, self.paths[i], REPACK
                )
        return out

    def read_decoded(self, indices: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
        """Decoded samples as one writable uint8 array of shape (len(indices), C, H, W): ``out`` if
        given (a batch buffer in shared memory, say), else a new one."""
        if self.decoded_shape is None:
            raise LabkitTypeError(
                f"{self.path}: holds encoded images; decode them (labkit.decode) or pack with --decoded"
            )
        shape = (len(indices), *self.decoded_shape)
        if out is None:
            out = np.empty(shape, dtype=np.uint8)
        elif out.shape != shape or out.dtype != np.uint8 or not out.flags.c_contiguous:
            raise LabkitValueError(
                f"out must be a C-contiguous uint8 array of shape {shape}, got {out.dtype} {out.shape}"
            )
        flat = out.reshape(len(indices), -1)
        for k, i in enumerate(indices):
            flat[k] = self.view(i)
        return out


class PackWriter:
    """Writes a pack to ``<path>.tmp-<pid>`` and renames it into place only when complete.

    An interrupted write (exception, Ctrl-C, a killed process) never leaves a file under the
    final name, and the magic bytes are written last, so even the temporary file does not
    look like a pack. The temporary files of earlier writers of ``path`` that were killed are
    removed when a writer opens (`labkit.core.atomic.clear_dead_temporaries`).
    """

    def __init__(
        self,
        path: PathLike,
        classes: Sequence[str],
        decoded_shape: Sequence[int] | None = None,
        alignment: int = 1,
        extra_meta: dict[str, Any] | None = None,
    ) -> None:
        if alignment < 1:
            raise LabkitValueError(f"alignment must be >= 1, got {alignment}")
        self.path = os.fspath(path)
        self.tmp_path = temporary_name(self.path)
        self.classes = [str(c) for c in classes]
        self.decoded_shape = tuple(int(d) for d in decoded_shape) if decoded_shape is not None else None
        self.alignment = alignment
        self.extra_meta = dict(extra_meta or {})
        # one sample at a time (`add`) goes to the lists, whole runs (`add_written`) to the chunks;
        # `_flush` moves the lists into the chunks so that order is kept
        self._records: list[tuple[int, int, int, int]] = []
        self._paths: list[PathLike] = []
        self._record_chunks: list[np.ndarray] = []
        self._path_chunks: list[StringTable] = []
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        clear_dead_temporaries(self.path)
        self._file = open(self.tmp_path, "wb")
        self._synced_to = 0
        self._syncer: threading.Thread | None = None
        self._sync_error: OSError | None = None
        self._data_offset = _align(HEADER_SIZE, alignment)
        self._file.write(b"\0" * self._data_offset)

    def __enter__(self) -> PackWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __len__(self) -> int:
        return len(self._records) + sum(len(chunk) for chunk in self._record_chunks)

    def add(self, data: bytes | np.ndarray, label: int, relpath: PathLike) -> None:
        """Append one sample: encoded file bytes, or a uint8 array of ``decoded_shape``."""
        if not 0 <= label < len(self.classes):
            raise LabkitValueError(
                f"{os.fsdecode(relpath)!r}: label {label} is not one of the {len(self.classes)} classes"
            )
        if self.decoded_shape is not None:
            arr = np.ascontiguousarray(data)
            if arr.dtype != np.uint8 or arr.shape != self.decoded_shape:
                raise LabkitValueError(
                    f"{os.fsdecode(relpath)!r}: expected uint8 {self.decoded_shape}, got {arr.dtype} {arr.shape}"
                )
            data = arr.tobytes()
        offset = _align(self._file.tell(), self.alignment)
        if offset != self._file.tell():
            self._file.write(b"\0" * (offset - self._file.tell()))
        self._file.write(data)
        self._records.append((offset, len(data), int(label), zlib.crc32(data)))
        self._paths.append(relpath)
        self._sync_behind()

    @property
    def data_end(self) -> int:
        """Where the next sample's bytes may start: other processes write runs from here (`add_written`)."""
        self._file.flush()
        return self._file.tell()

    def add_written(self, records: np.ndarray, paths: StringTable) -> None:
        """Record samples another process has already written into ``tmp_path``, after `data_end`.

        ``records`` (``RECORD_DTYPE``) give each sample's offset in the pack (a multiple of the
        alignment, in order), length, label and CRC32; ``paths`` their relative paths. How
        `pack_folder`'s workers hand over what they wrote: the bytes never pass through here.
        """
        if len(paths) != len(records):
            raise LabkitValueError(f"{self.tmp_path}: {len(records)} records but {len(paths)} paths")
        if not len(records):
            return
        start, size = self.data_end, os.fstat(self._file.fileno()).st_size
        offsets, ends = records["offset"].astype(np.int64), (records["offset"] + records["length"]).astype(np.int64)
        after = np.concatenate([[start], ends[:-1]])
        misplaced = (offsets < after) | (ends > size) | (offsets % self.alignment != 0)
        if misplaced.any():
            k = int(np.argmax(misplaced))
            raise LabkitValueError(
                f"{self.tmp_path}: {printable(paths[k])!r} is recorded at bytes {offsets[k]} to "
                f"{ends[k]}, but samples written by another process must follow one another from byte "
                f"{start} to at most {size}, each on a multiple of {self.alignment}: the writer and "
                "its records disagree (a bug in the caller)"
            )
        labels = records["label"]
        unknown = (labels < 0) | (labels >= len(self.classes))
        if unknown.any():
            k = int(np.argmax(unknown))
            raise LabkitValueError(
                f"{printable(paths[k])!r}: label {labels[k]} is not one of the {len(self.classes)} classes"
            )
        if self.decoded_shape is not None:
            wrong = records["length"] != int(np.prod(self.decoded_shape))
            if wrong.any():
                k = int(np.argmax(wrong))
                raise LabkitValueError(
                    f"{printable(paths[k])!r}: {records['length'][k]} bytes, not a uint8 array of {self.decoded_shape}"
                )
        self._file.seek(int(ends[-1]))
        self._flush()
        self._record_chunks.append(records.astype(RECORD_DTYPE, copy=True))
        self._path_chunks.append(paths)
        self._sync_behind()

    def _sync_behind(self) -> None:
        """Every `SYNC_BEHIND` bytes, start writing what came before to the disk in a thread, so that
        `close`'s fsync waits for the last stretch only instead of the whole pack."""
        if self._file.tell() - self._synced_to < SYNC_BEHIND or (self._syncer and self._syncer.is_alive()):
            return
        self._file.flush()
        self._synced_to = self._file.tell()
        self._syncer = threading.Thread(
            target=self._sync, args=(self._file.fileno(),), name="labkit-pack-sync", daemon=True
        )
        self._syncer.start()

    def _sync(self, fd: int) -> None:
        try:
            getattr(os, "fdatasync", os.fsync)(fd)
        except OSError as e:  # reported once by the kernel: a later fsync may succeed on lost data
            self._sync_error = e

    def _join_syncer(self) -> None:
        """Wait for the background sync; raise its error, if it had one, so the pack is not published."""
        if self._syncer is not None:
            self._syncer.join()
            self._syncer = None
        if self._sync_error is not None:
            error, self._sync_error = self._sync_error, None
            raise LabkitOSError(error.errno, f"writing {self.tmp_path} to disk failed: {error.strerror}") from error

    def _flush(self) -> None:
        if self._records:
            self._record_chunks.append(np.array(self._records, dtype=RECORD_DTYPE))
            self._path_chunks.append(StringTable.from_strings(self._paths))
            self._records, self._paths = [], []

    def abort(self) -> None:
        """Drop everything written so far."""
        if os.path.exists(self.tmp_path):  # first: a second Ctrl-C while the sync is awaited leaves nothing
            os.unlink(self.tmp_path)
        if self._syncer is not None:  # its fd stays open until it is done
            self._syncer.join()
            self._syncer = None
        self._sync_error = None
        if not self._file.closed:
            self._file.close()

    def close(self) -> None:
        """Write index, metadata and header, then move the file into place."""
        if self._file.closed:
            return
        try:
            index_offset = self._file.tell()
            self._flush()
            records = np.concatenate(self._record_chunks) if self._record_chunks else np.zeros(0, dtype=RECORD_DTYPE)
            paths = StringTable.concat(self._path_chunks)
            meta = {
                "format": "labkit-pack",
                "classes": self.classes,
                "decoded": {"shape": list(self.decoded_shape), "dtype": "uint8", "layout": "CHW"}
                if self.decoded_shape
                else None,
                **self.extra_meta,
            }
            trailer = b"".join(
                [
                    records.tobytes(),
                    paths.offsets.astype(_PATH_OFFSET_DTYPE).tobytes(),
                    paths.blob.tobytes(),
                    json.dumps(meta, ensure_ascii=True).encode(),
                ]
            )
            self._file.write(trailer)
            meta_length = len(trailer) - records.nbytes - paths.offsets.nbytes - paths.blob.nbytes
            kind = KIND_DECODED if self.decoded_shape else KIND_ENCODED
            head = HEADER_STRUCT.pack(
                MAGIC,
                VERSION,
                kind,
                len(records),
                self._data_offset,
                index_offset,
                paths.blob.nbytes,
                meta_length,
                index_offset + len(trailer),
                self.alignment,
                zlib.crc32(trailer),
            )
            self._file.seek(0)
            self._file.write(head + HEADER_CRC_STRUCT.pack(zlib.crc32(head)))
            self._file.flush()
            self._join_syncer()
            os.fsync(self._file.fileno())
            self._file.close()
            publish(self.tmp_path, self.path)  # and the folder fsynced: the rename is on disk too
        except BaseException:
            self.abort()
            raise


@dataclass
class VerifyReport:
    """What `verify_pack` checked."""

    path: str
    kind: str
    count: int
    nbytes: int
    classes: list[str]

    def __str__(self) -> str:
        return (
            f"OK {self.path}: {self.count} {self.kind} samples, {len(self.classes)} classes, "
            f"{self.nbytes / 2**20:.1f} MiB; header, index bounds and every checksum verified"
        )


def verify_pack(path: PathLike, progress: bool = False) -> VerifyReport:
    """Check header, every record's bounds and every blob's checksum; raise the first PackError found."""
    reader = PackReader(path, check_crc=True)
    indices: Iterable[int] = range(len(reader))
    if progress:
        from tqdm.auto import tqdm

        indices = tqdm(indices, desc=f"verify {os.path.basename(reader.path)}", unit=" samples")
    for i in indices:
        reader.view(i)
    return VerifyReport(reader.path, reader.kind, len(reader), reader.nbytes, reader.classes)


def abandon_pack(writer: PackWriter | None, dst: PathLike, error: BaseException) -> None:
    """Remove what an unfinished pack left (if its writer had opened) after ``error``; a full disk raises
    `DiskFullError` naming ``dst`` and how much was written, any other error is the caller's to re-raise."""
    written = None
    if writer is not None:
        written = os.path.getsize(writer.tmp_path) if os.path.exists(writer.tmp_path) else None
        writer.abort()
    if is_disk_full(error):
        raise disk_full_error(dst, written) from None
