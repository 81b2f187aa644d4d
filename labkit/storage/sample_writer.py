"""A pack from any iterable of samples, not only an ImageFolder: a CSV of labels, a list of files, a Hugging
Face dataset, a database cursor.

Each sample is ``(image, label)`` or ``(image, label, fields)``: ``image`` a file path or the encoded bytes
themselves, ``label`` a class index or a class name, ``fields`` a dict of JSON values kept beside it (a
caption, a box, an id) and read back with `PackReader.fields` (`labkit.storage.pack_format`). It is the same
pack `labkit.storage.packing.pack_folder` writes, with the same guarantees: every image is checked to
decode, one that does not is left out and listed (``skipped``), the file appears under its name only once
whole, and a disk that fills leaves nothing behind (`labkit.core.disk_space.DiskFullError`).

One process reads and checks the samples in order (an iterable has no length to split across processes);
`pack_folder` is the faster path for a folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.string_table import PathLike, printable
from labkit.decode.decoder_contract import MAX_PIXELS, DecodeError
from labkit.decode.pil_decoders import check_decodable
from labkit.storage.pack_format import PackWriter, abandon_pack
from labkit.storage.packing import PackReport

FIELDS_KEY = "fields"  # the pack's metadata key: {field name: [one JSON value per sample, None where absent]}


def _unpack(sample: Any, k: int) -> tuple:
    if not isinstance(sample, (tuple, list)) or len(sample) not in (2, 3):
        raise LabkitTypeError(
            f"sample {k} is {type(sample).__name__}: give (image, label) or (image, label, "
            "fields), image a path or its bytes"
        )
    image, label = sample[0], sample[1]
    fields = sample[2] if len(sample) == 3 else {}
    if not isinstance(fields, dict):
        raise LabkitTypeError(f"sample {k}: its fields are {type(fields).__name__}, not a dict of JSON values")
    return image, label, fields


def _read(image: Any, k: int) -> tuple:
    """(bytes, the name the pack records) of sample ``k``."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), f"{k:08d}"
    if isinstance(image, (str, os.PathLike)):
        with open(image, "rb") as f:
            return f.read(), os.fspath(image)
    raise LabkitTypeError(
        f"sample {k}: the image is {type(image).__name__}; give a file path or the encoded bytes "
        "(a PIL image: save it to bytes first, e.g. with io.BytesIO)"
    )


def pack_samples(
    samples: Iterable[Any],
    dst: PathLike,
    classes: Sequence[str] | None = None,
    check: bool = True,
    progress: bool = True,
    max_pixels: int = MAX_PIXELS,
) -> PackReport:
    """Pack ``samples`` (see the module's docstring) into the single file ``dst``.

    ``classes``: the class names, in the order of their indices. Without them, class names (strings) are
    numbered in the order they first appear, and indices (ints) name classes ``"0"``, ``"1"``, ...
    A file that cannot be read or decoded is left out and listed in the report; a label that is not a class
    stops the pack, naming the sample.
    """
    from tqdm.auto import tqdm

    fixed = classes is not None
    skipped: list[dict[str, str]] = []
    columns: dict[str, list[Any]] = {}
    writer: PackWriter | None = None
    bar = tqdm(desc=f"labkit pack {os.path.basename(os.fspath(dst))}", unit=" samples", disable=not progress)
    try:
        writer = PackWriter(
            dst, list(classes or []), extra_meta={"source": "pack_samples", "skipped": skipped, FIELDS_KEY: columns}
        )
        labels = _Labels(writer.classes, fixed)  # grows the writer's class list where the classes were not given
        for k, sample in enumerate(samples):
            image, label, fields = _unpack(sample, k)
            try:
                data, name = _read(image, k)
                if check:
                    check_decodable(data, max_pixels)
            except (OSError, DecodeError) as error:
                skipped.append(
                    {
                        "path": printable(os.fspath(image)) if isinstance(image, (str, os.PathLike)) else f"sample {k}",
                        "error": str(error),
                    }
                )
                bar.update()
                continue
            writer.add(data, labels.index(label, k), name)
            row = len(writer) - 1
            for key, value in fields.items():
                try:
                    json.dumps(value)
                except (TypeError, ValueError):
                    raise LabkitTypeError(
                        f"sample {k}: field {key!r} is {type(value).__name__}, which JSON cannot "
                        "hold: give numbers, strings, lists or dicts of them"
                    ) from None
                columns.setdefault(str(key), [None] * row).append(value)
            for column in columns.values():
                if len(column) == row:
                    column.append(None)  # a field this sample does not have
            bar.update()
        count = len(writer)
        writer.close()
    except BaseException as error:
        abandon_pack(writer, dst, error)
        raise
    finally:
        bar.close()
    return PackReport(os.fspath(dst), "encoded", count, os.path.getsize(dst), skipped)


class _Labels:
    """Class indices of labels, growing the class names (strings in the order they first appear, ints as
    ``"0"``, ``"1"``, ...) unless they were given."""

    def __init__(self, names: list[str], fixed: bool) -> None:
        self.names, self.fixed = names, fixed
        self.position = {name: k for k, name in enumerate(names)}

    def index(self, label: Any, k: int) -> int:
        if isinstance(label, str):
            if label not in self.position:
                if self.fixed:
                    raise LabkitValueError(
                        f"sample {k}: label {label!r} is not one of the classes given "
                        f"({self.names[:10]}): add it to classes=, or fix the label"
                    )
                self._add(label)
            return self.position[label]
        try:
            index = int(label)
        except (TypeError, ValueError):
            raise LabkitTypeError(f"sample {k}: label {label!r} is neither a class index nor a class name") from None
        if index < 0 or (self.fixed and index >= len(self.names)):
            raise LabkitValueError(f"sample {k}: label {index} is outside the {len(self.names)} classes")
        while len(self.names) <= index:
            self._add(str(len(self.names)))
        return index

    def _add(self, name: str) -> None:
        self.position[name] = len(self.names)
        self.names.append(name)
