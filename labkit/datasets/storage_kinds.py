"""The ways the kit stores one set of images, and the one way to open each as a dataset.

The ablation's versions, the loader panels and the autotuner all ask for "these images, stored so, decoded by
this decoder, at this size": one function answers, so a kind added or changed is changed once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.string_table import PathLike
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.labeled_images import Crop, LabeledImageDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, EncodedPackDataset, PackedDataset
from labkit.decode.decoder_contract import OUTPUT_SIZE, Size

FOLDER = "folder"  # one file per image, class folders (ImageFolder)
PACK = "pack"  # the encoded files in one pack (`labkit pack`)
DECODED_PACK = "decoded pack"  # pre-decoded uint8 arrays in one pack (`labkit pack --decoded N`)
ENCODED_PACK = "encoded pack"  # a pack's encoded files as byte tensors, left for the GPU to decode
STORAGE_KINDS = (FOLDER, PACK, DECODED_PACK, ENCODED_PACK)


def open_images(
    kind: str,
    path: PathLike,
    decoder: str | None = None,
    size: Size = OUTPUT_SIZE,
    *,
    transform: Callable[[torch.Tensor], Any] | None = None,
    crop: Crop | None = None,
    check_crc: bool = True,
) -> LabeledImageDataset:
    """The images at ``path``, stored as ``kind`` (one of `STORAGE_KINDS`), as a labkit dataset: decoded by
    ``decoder`` (default: the fastest installed) to ``size``, each image through ``transform``, cropped by
    ``crop``; ``check_crc`` checks each pack record as it is read. A decoded pack was decoded when it was made
    (``size`` is checked against what it holds, ``decoder`` is not used); an encoded pack is not decoded here."""
    if kind == FOLDER:
        return ImageFolderDataset(path, decoder, size, transform=transform, crop=crop)
    if kind == PACK:
        return PackedDataset(path, decoder, size, transform=transform, check_crc=check_crc, crop=crop)
    if kind == DECODED_PACK:
        return DecodedArrayDataset(path, transform=transform, size=size, check_crc=check_crc, crop=crop)
    if kind == ENCODED_PACK:
        if transform is not None or crop is not None:
            raise LabkitValueError(
                f"{path}: an encoded pack hands out undecoded bytes; a transform or a crop "
                "belongs after the decode on the GPU"
            )
        return EncodedPackDataset(path, check_crc=check_crc)
    raise LabkitValueError(f"storage kind {kind!r}: one of {', '.join(STORAGE_KINDS)}")
