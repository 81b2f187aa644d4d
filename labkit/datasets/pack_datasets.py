"""Datasets over one pack file (`labkit pack`): its encoded images decoded by a decoder, its pre-decoded arrays
copied (or cropped) straight into the batch, or its encoded files handed on undecoded for a GPU decoder.

The pack is read through mmap (`labkit.storage.pack_format.PackReader`): a batch's bytes in one slice of the offsets
table, every checksum checked, in file order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from labkit.core.errors import LabkitValueError
from labkit.core.string_table import PathLike
from labkit.datasets.encoded_images import EncodedImages
from labkit.datasets.labeled_images import Crop, LabeledImageDataset, crop_note
from labkit.decode.crop_box import crop_resize_flip
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE, Size, target_hw
from labkit.storage.pack_format import PackReader


class PackBackedDataset(LabeledImageDataset):
    """What the pack datasets share: the reader, labels and classes from its index, paths for messages,
    and batched reads in file order."""

    def __init__(
        self,
        pack_path: PathLike,
        transform: Callable[[torch.Tensor], Any] | None,
        on_error: str,
        check_crc: bool,
        kind: str,
        wrong_kind: str,
        crop: Crop | None = None,
        decode_threads: int | None = None,
    ) -> None:
        super().__init__(transform, on_error, crop, decode_threads)
        self.reader = PackReader(pack_path, check_crc=check_crc)
        if self.reader.kind != kind:
            raise LabkitValueError(f"{self.reader.path}: {wrong_kind}")
        self.classes = self.reader.classes
        self.labels = self.reader.labels

    def sample_path(self, index: int) -> str:
        return f"{self.reader.path}:{self.reader.paths[index]}"

    def storage_order(self, indices: list[int]) -> np.ndarray:
        return self.reader.records["offset"][indices]


class PackedDataset(EncodedImages, PackBackedDataset):
    """Encoded images from one pack file (`labkit pack`), read through mmap and decoded by ``decoder``
    (default: the fastest installed)."""

    fills_batches = True

    def __init__(
        self,
        pack_path: PathLike,
        decoder: str | None = None,
        size: Size = OUTPUT_SIZE,
        transform: Callable[[torch.Tensor], Any] | None = None,
        on_error: str = "raise",
        max_pixels: int = MAX_PIXELS,
        check_crc: bool = True,
        crop: Crop | None = None,
        decode_threads: int | None = None,
    ) -> None:
        super().__init__(
            pack_path,
            transform,
            on_error,
            check_crc,
            "encoded",
            "holds decoded arrays; open it with DecodedArrayDataset",
            crop,
            decode_threads,
        )
        self.use_decoder(decoder, size, crop, max_pixels)

    def read_raw(self, index: int) -> bytes:
        return self.reader.read(index)

    def batch_sources(self, indices: np.ndarray) -> list[bytes]:
        return self.reader.read_many(indices)

    def __repr__(self) -> str:
        return (
            f"PackedDataset({self.reader.path!r}, {len(self)} images, {len(self.classes)} classes, "
            f"decoder={self.decoder!r}, size={self.size}{crop_note(self.crop, self.decoder)})"
        )


class DecodedArrayDataset(PackBackedDataset):
    """Pre-decoded, pre-resized uint8 images from a pack made with ``labkit pack --decoded N``.

    No decode at all: the bound FFCV's RAW mode reaches. A batch is copied out of the mapping into one
    array in one call (with ``crop=``, each sample's crop into its row).
    """

    fills_batches = True

    def __init__(
        self,
        pack_path: PathLike,
        transform: Callable[[torch.Tensor], Any] | None = None,
        on_error: str = "raise",
        size: Size = None,
        check_crc: bool = True,
        crop: Crop | None = None,
        decode_threads: int | None = None,
    ) -> None:
        super().__init__(
            pack_path,
            transform,
            on_error,
            check_crc,
            "decoded",
            "holds encoded images; open it with PackedDataset, or make a decoded pack with "
            "`labkit pack --decoded SIZE`",
            crop,
            decode_threads,
        )
        stored = tuple(self.reader.decoded_shape[-2:])
        if size is not None and target_hw(size) != stored:
            raise LabkitValueError(
                f"{self.reader.path}: images are stored at {stored[0]}x{stored[1]}, not {size}; "
                "re-pack with `labkit pack --decoded` at the size you need"
            )
        self.stored_hw: tuple[int, int] = (int(stored[0]), int(stored[1]))
        self.size = self.stored_hw if crop is None else crop.output_hw

    def read_raw(self, index: int) -> np.ndarray:
        return self.reader.read_decoded([index])[0]

    def decode_raw(self, raw: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(raw)

    def crop_raw(self, raw: np.ndarray, index: int, epoch: int) -> torch.Tensor:
        """The crop taken from the stored image: its box is drawn for the stored size."""
        box = self.crop.draw(*self.stored_hw, index, epoch)  # type: ignore[union-attr]
        return crop_resize_flip(torch.from_numpy(raw), box, self.size)

    def read_stored_batch(self, indices: np.ndarray, batch: torch.Tensor) -> bool:
        """The batch's stored arrays copied out of the mapping into ``batch`` in one call (every checksum checked)."""
        self.reader.read_decoded(indices, out=batch.numpy())
        return True

    def __repr__(self) -> str:
        crop = "" if self.crop is None else f", crops {self.crop.output_hw[0]}x{self.crop.output_hw[1]} from them"
        return f"DecodedArrayDataset({self.reader.path!r}, {len(self)} images of {self.reader.decoded_shape}{crop})"


class EncodedPackDataset(PackBackedDataset):
    """The encoded files of a pack, undecoded, as uint8 byte tensors: for decoding on the GPU.

    Workers only read; `labkit.decode.torch_decoders.decode_jpeg_batch` decodes a whole batch on the device.
    Collate with `labkit.collate.batching.list_collate` (files differ in length).
    """

    def __init__(self, pack_path: PathLike, on_error: str = "raise", check_crc: bool = True) -> None:
        super().__init__(
            pack_path, None, on_error, check_crc, "encoded", "holds decoded arrays, there is nothing left to decode"
        )

    def read_raw(self, index: int) -> bytes:
        return self.reader.read(index)

    def decode_raw(self, raw: bytes) -> torch.Tensor:
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8)
