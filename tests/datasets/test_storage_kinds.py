"""One way to open a set of images stored as a folder, a pack, a decoded pack or an encoded pack."""

import pytest
import torch
from conftest import OUT

from labkit.core.errors import LabkitError
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, EncodedPackDataset, PackedDataset
from labkit.datasets.storage_kinds import DECODED_PACK, ENCODED_PACK, FOLDER, PACK, STORAGE_KINDS, open_images


def test_each_kind_opens_as_its_dataset_at_the_size_asked(photos, encoded_pack, decoded_pack):
    opened = {
        FOLDER: open_images(FOLDER, photos, "pil", OUT),
        PACK: open_images(PACK, encoded_pack, "pil", OUT),
        DECODED_PACK: open_images(DECODED_PACK, decoded_pack, size=OUT),
    }
    assert isinstance(opened[FOLDER], ImageFolderDataset) and isinstance(opened[PACK], PackedDataset)
    assert isinstance(opened[DECODED_PACK], DecodedArrayDataset)
    for kind, dataset in opened.items():
        image, label = dataset[0]
        assert image.dtype == torch.uint8 and tuple(image.shape) == (3, OUT, OUT), kind
    assert torch.equal(opened[FOLDER][0][0], opened[PACK][0][0])  # the same image, decoded the same way
    blob, _ = open_images(ENCODED_PACK, encoded_pack)[0]
    assert isinstance(open_images(ENCODED_PACK, encoded_pack), EncodedPackDataset) and blob.dtype == torch.uint8


def test_what_a_kind_cannot_honour_is_refused_not_ignored(decoded_pack, encoded_pack):
    with pytest.raises(LabkitError, match=f"not {OUT * 2}"):
        open_images(DECODED_PACK, decoded_pack, size=OUT * 2)  # stored at OUT: a decoded pack is not resized
    with pytest.raises(LabkitError, match="undecoded bytes"):
        open_images(ENCODED_PACK, encoded_pack, transform=lambda image: image)
    with pytest.raises(LabkitError, match="one of " + ", ".join(STORAGE_KINDS)):
        open_images("decoded", decoded_pack)
