"""Datasets of encoded images: files named in a list, an ImageFolder tree, and what every dataset of encoded images
shares (its decoder, the size it decodes to, the decode and crop of one sample's bytes).

A folder's batch is planned and decoded by the engine (`labkit.datasets.batch_engine`); its files are read by the
threads that decode them, so the reads overlap.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.string_table import PathLike, StringTable
from labkit.datasets.labeled_images import Crop, LabeledImageDataset, class_labels, crop_note, output_hw
from labkit.datasets.sample_errors import check_on_error
from labkit.decode.batch_crop import ShareCropper
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE, Size
from labkit.decode.registry import decoder_info, get_decoder, preferred_decoder
from labkit.storage.image_folder import scan_image_folder


class EncodedImages:
    """What the datasets of encoded images share: their decoder, the size they decode to, and the decode and crop
    of one sample's bytes. Mixed in before `LabeledImageDataset`."""

    crop: Crop | None

    def use_decoder(self, decoder: str | None, size: Size, crop: Crop | None, max_pixels: int) -> None:
        """Decode with ``decoder`` (None: the fastest installed, `preferred_decoder`) to ``size`` or ``crop``'s."""
        self.decoder = preferred_decoder() if decoder is None else decoder
        self._decode = get_decoder(self.decoder)
        self.size = output_hw(size, 256, crop)
        self.max_pixels = max_pixels

    @property
    def crop_share(self) -> ShareCropper | None:
        """The decoder's own loop over a share of a batch, where its record has one."""
        return decoder_info(self.decoder).crop_share

    def decode_raw(self, raw: bytes) -> torch.Tensor:
        """The sample's bytes decoded to ``size``."""
        return self._decode(raw, self.size, self.max_pixels)

    def crop_raw(self, raw: bytes, index: int, epoch: int) -> torch.Tensor:
        """The sample's bytes decoded to its crop in ``epoch`` (``crop.decode``'s work, its box drawn for this
        sample: the crop's own draw, given the sample and the epoch)."""
        draw = functools.partial(self.crop.draw, index=index, epoch=epoch)  # type: ignore[union-attr]
        return decoder_info(self.decoder).crop(raw, draw, self.size, self.max_pixels)


class ImageFilesDataset(EncodedImages, LabeledImageDataset):
    """Image files named in a list, each with its label (a class index or a class name), decoded by
    ``decoder`` (default: the fastest installed, `labkit.decode.registry.preferred_decoder`) to ``size``:
    a CSV of labels, a list of files, anything that is not laid out as an ImageFolder. Relative paths are
    taken from ``root``. The files are only read; a missing one is named when it is read (``on_error``)."""

    fills_batches = True

    def __init__(
        self,
        files: Sequence[PathLike],
        labels: Sequence[Any],
        classes: Sequence[str] | None = None,
        decoder: str | None = None,
        size: Size = OUTPUT_SIZE,
        transform: Callable[[torch.Tensor], Any] | None = None,
        on_error: str = "raise",
        max_pixels: int = MAX_PIXELS,
        crop: Crop | None = None,
        decode_threads: int | None = None,
        root: PathLike = "",
    ) -> None:
        super().__init__(transform, on_error, crop, decode_threads)
        if isinstance(files, (str, bytes, os.PathLike)):
            raise LabkitTypeError(
                f"files={files!r} is one path: give a list of image files (an ImageFolder goes "
                "to ImageFolderDataset, a pack to PackedDataset)"
            )
        if len(files) != len(labels):
            raise LabkitValueError(f"{len(files)} files but {len(labels)} labels: one label per file")
        self.root = os.fspath(root)
        self.relpaths = files if isinstance(files, StringTable) else StringTable.from_strings(files)
        self.labels, self.classes = class_labels(labels, classes, "ImageFilesDataset")
        self.use_decoder(decoder, size, crop, max_pixels)

    def sample_path(self, index: int) -> str:
        return os.path.join(self.root, self.relpaths[index])

    def read_raw(self, index: int) -> bytes:
        with open(self.sample_path(index), "rb") as f:
            return f.read()

    def batch_sources(self, indices: np.ndarray) -> list[str]:
        paths = self.relpaths.strings(indices)
        if os.name != "posix" or not self.root:
            return [os.path.join(self.root, path) for path in paths]
        prefix = os.path.join(self.root, "")  # os.path.join's result, without its Python calls per path
        return [path if path[:1] == "/" else prefix + path for path in paths]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.root!r}, {len(self)} images, {len(self.classes)} classes, "
            f"decoder={self.decoder!r}, size={self.size}{crop_note(self.crop, self.decoder)})"
        )


class ImageFolderDataset(ImageFilesDataset):
    """Images in an ImageFolder tree (``root/<class>/<file>``), decoded by ``decoder`` (default: the fastest
    installed, `labkit.decode.registry.preferred_decoder`) to ``size``."""

    def __init__(
        self,
        root: PathLike,
        decoder: str | None = None,
        size: Size = OUTPUT_SIZE,
        transform: Callable[[torch.Tensor], Any] | None = None,
        on_error: str = "raise",
        max_pixels: int = MAX_PIXELS,
        crop: Crop | None = None,
        decode_threads: int | None = None,
    ) -> None:
        check_on_error(on_error)  # before the scan, which may take minutes on a large folder
        index = scan_image_folder(root)
        super().__init__(
            index.relpaths,
            index.labels,
            index.classes,
            decoder,
            size,
            transform,
            on_error,
            max_pixels,
            crop,
            decode_threads,
            root=index.root,
        )
