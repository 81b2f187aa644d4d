import os

import pytest
import torch
from conftest import OUT

from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.datasets.sample_errors import SampleError
from labkit.decode.registry import decode_image


def test_decoded_pack_matches_decoding_the_file(photos, decoded_pack):
    folder = ImageFolderDataset(photos, "pil", OUT)
    assert torch.equal(DecodedArrayDataset(decoded_pack)[3][0], folder[3][0])


def test_wrong_pack_kind_or_size_is_a_clear_error(encoded_pack, decoded_pack):
    with pytest.raises(ValueError, match="DecodedArrayDataset"):
        PackedDataset(decoded_pack)
    with pytest.raises(ValueError, match="PackedDataset"):
        DecodedArrayDataset(encoded_pack)
    with pytest.raises(ValueError, match="re-pack"):
        DecodedArrayDataset(decoded_pack, size=OUT * 2)
    with pytest.raises(ValueError, match="on_error"):
        ImageFolderDataset(os.path.dirname(encoded_pack), on_error="ignore")


def test_encoded_pack_dataset_hands_out_the_file_bytes(photos, encoded_pack):
    from labkit.collate.batching import list_collate
    from labkit.datasets.pack_datasets import EncodedPackDataset

    ds = EncodedPackDataset(encoded_pack)
    blob, label = ds[3]
    assert blob.dtype == torch.uint8
    assert bytes(blob.numpy()) == open(os.path.join(photos, ds.reader.paths[3]), "rb").read()
    blobs, labels = list_collate(ds.__getitems__([0, 1, 2]))
    assert len(blobs) == 3 and labels.tolist() == ds.labels[:3].tolist()
    assert torch.equal(decode_image(bytes(blob.numpy()), OUT, "pil"), PackedDataset(encoded_pack, "pil", OUT)[3][0])


def test_a_broken_record_of_a_decoded_pack_is_named_from_a_batch(decoded_pack, tmp_path):
    copy = tmp_path / "copy.pack"
    data = bytearray(open(decoded_pack, "rb").read())
    reader = DecodedArrayDataset(decoded_pack).reader
    offset = int(reader.records["offset"][2])
    data[offset : offset + 16] = bytes(16)  # sample 2's pixels no longer match its checksum
    copy.write_bytes(bytes(data))
    ds = DecodedArrayDataset(str(copy))
    with pytest.raises(SampleError, match=r"sample 2 \("):
        ds.__getitems__([1, 2, 3])
    images = DecodedArrayDataset(str(copy), on_error="skip").__getitems__([1, 2, 3])
    assert torch.equal(images[0][0], DecodedArrayDataset(decoded_pack)[1][0]) and len(images) == 3
