"""labkit's decoders, crops, samplers and batch engine on top of the storage engines people keep data in:
MosaicML Streaming (MDS), LitData, WebDataset, a Hugging Face dataset.

labkit has no remote format of its own. Data that has outgrown one machine's disk stays in an engine that
already streams it from object storage; labkit reads each sample's *bytes* from that engine and does the
rest itself: the decode at the DCT scale the output needs, the crop found before the decode, the batch
decoded by threads into one tensor, the resumable samplers and the loader's state.

* `RecordDataset` wraps any map-style dataset whose samples are dicts or tuples holding the encoded image
  and its label: ``streaming.StreamingDataset`` (write the image column as ``"bytes"``: a ``"jpeg"``
  column is decoded to a PIL image by Streaming itself, which this refuses, naming the fix),
  ``litdata.StreamingDataset``, ``datasets.Dataset`` with the image cast to ``Image(decode=False)``.
  Labels are read from the samples as they are decoded; pass ``classes=`` to skip reading them all once
  up front to find the classes.
* `decode_stream` maps the samples of an iterable engine (``webdataset.WebDataset``) to labkit's decoded
  tensors, one at a time; its crops are seeded by each sample's key, so they do not depend on the order
  the stream is read in.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from labkit.core.errors import LabkitKeyError, LabkitTypeError
from labkit.datasets.encoded_images import EncodedImages
from labkit.datasets.labeled_images import Crop, LabeledImageDataset, output_hw
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE, Size
from labkit.decode.registry import get_decoder, preferred_decoder

Key = str | int


def record_bytes(value: Any, where: str) -> bytes:
    """An engine's stored image as the encoded bytes labkit decodes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return value.tobytes()
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):  # datasets' Image(decode=False)
        return bytes(value["bytes"])
    raise LabkitTypeError(
        f"{where} holds a {type(value).__name__}, not the encoded image: store the file's bytes "
        "(MDS: a 'bytes' column, not 'jpeg'; Hugging Face: cast_column(name, Image(decode=False)); "
        "WebDataset: no .decode()), so labkit's decoder decodes it"
    )


def _field(record: Any, key: Key, where: str) -> Any:
    try:
        return record[key]
    except (KeyError, IndexError, TypeError):
        keys = list(record.keys()) if isinstance(record, dict) else f"{len(record)} fields"
        raise LabkitKeyError(
            f"{where} has no field {key!r} (it has {keys}): pass image_key= and label_key= with "
            "the names its writer used"
        ) from None


class _RecordLabels:
    """The labels of a `RecordDataset`, read from each record when its image is: no pass over the data."""

    def __init__(self, dataset: RecordDataset, known: np.ndarray | None = None) -> None:
        self.dataset = dataset
        self.values = np.full(len(dataset.records), -1, dtype=np.int64) if known is None else known

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> int:
        if self.values[index] < 0:
            self.dataset.read_raw(int(index))  # sets it
        return int(self.values[index])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        for index in np.flatnonzero(self.values < 0):
            self.dataset.read_raw(int(index))
        return self.values if dtype is None else self.values.astype(dtype)

    def tolist(self) -> list[int]:
        return np.asarray(self).tolist()


class RecordDataset(EncodedImages, LabeledImageDataset):
    """The samples of another engine's map-style dataset (``records[i]`` a dict or tuple holding the encoded
    image under ``image_key`` and its class index under ``label_key``), decoded by ``decoder`` (default: the
    fastest installed) to ``size`` or to ``crop``'s boxes, a batch at a time by threads into one tensor.

    ``classes``: the class names, in the order of the indices. Without them, every record's label is read
    once here to count the classes (a pass over the data, which a remote engine downloads)."""

    fills_batches = True

    def __init__(
        self,
        records: Any,
        image_key: Key = "image",
        label_key: Key = "label",
        classes: Sequence[str] | None = None,
        decoder: str | None = None,
        size: Size = OUTPUT_SIZE,
        transform: Callable[[torch.Tensor], Any] | None = None,
        on_error: str = "raise",
        max_pixels: int = MAX_PIXELS,
        crop: Crop | None = None,
        decode_threads: int | None = None,
    ) -> None:
        super().__init__(transform, on_error, crop, decode_threads)
        if not (hasattr(records, "__len__") and hasattr(records, "__getitem__")):
            raise LabkitTypeError(
                f"{type(records).__name__} has no length or no random access: a stream "
                "(webdataset.WebDataset) goes through decode_stream instead"
            )
        self.records, self.image_key, self.label_key = records, image_key, label_key
        self.labels = _RecordLabels(self)  # type: ignore[assignment]
        if classes is None:
            count = int(np.asarray(self.labels).max(initial=-1)) + 1
            classes = [str(k) for k in range(count)]
        self.classes = [str(c) for c in classes]
        self.use_decoder(decoder, size, crop, max_pixels)

    def __len__(self) -> int:
        return len(self.records)

    def sample_path(self, index: int) -> str:
        return f"{type(self.records).__name__}[{index}]"

    def read_raw(self, index: int) -> bytes:
        record = self.records[index]
        where = f"sample {index} of {type(self.records).__name__}"
        self.labels.values[index] = int(_field(record, self.label_key, where))  # type: ignore[attr-defined]
        return record_bytes(_field(record, self.image_key, where), f"{where}[{self.image_key!r}]")

    def __repr__(self) -> str:
        return (
            f"RecordDataset({type(self.records).__name__}, {len(self)} samples, {len(self.classes)} classes, "
            f"decoder={self.decoder!r}, size={self.size})"
        )


def stream_key(sample: Any, position: int) -> int:
    """The index a stream's sample is known by for its crop's draws: its key (WebDataset's ``__key__``)
    hashed, else its position in the stream."""
    key = sample.get("__key__") if isinstance(sample, dict) else None
    return zlib.crc32(str(key).encode()) if key is not None else position


def decode_stream(
    samples: Iterable[Any],
    image_key: Key = "jpg",
    label_key: Key = "cls",
    decoder: str | None = None,
    size: Size = OUTPUT_SIZE,
    crop: Crop | None = None,
    epoch: int = 0,
    max_pixels: int = MAX_PIXELS,
) -> Iterator[tuple[torch.Tensor, int]]:
    """Each sample of a stream as (uint8 C×H×W image, label), decoded by labkit: ``crop``'s box drawn from
    (its seed, ``epoch``, the sample's key), else resized to ``size``. Labels may be stored as text
    (WebDataset's ``.cls`` files hold ``b"3"``)."""
    name = preferred_decoder() if decoder is None else decoder
    decode, hw = get_decoder(name), output_hw(size, 256, crop)
    for position, sample in enumerate(samples):
        where = f"sample {position} of the stream" + (
            f" ({sample['__key__']})" if isinstance(sample, dict) and "__key__" in sample else ""
        )
        data = record_bytes(_field(sample, image_key, where), f"{where}[{image_key!r}]")
        label = _field(sample, label_key, where)
        label = int(label.decode() if isinstance(label, (bytes, bytearray)) else label)
        if crop is None:
            yield decode(data, hw, max_pixels), label
        else:
            yield crop.decode(data, stream_key(sample, position), epoch, name, max_pixels), label
