"""labkit.storage.sample_writer: a pack from any iterable of (path or bytes, label, fields)."""

import errno
import io
import os

import pytest
import torch
from PIL import Image

from labkit.core.disk_space import DiskFullError
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.datasets.encoded_images import ImageFilesDataset
from labkit.datasets.pack_datasets import PackedDataset
from labkit.storage import pack_format
from labkit.storage.pack_format import PackReader
from labkit.storage.sample_writer import pack_samples


def _jpeg(shade):
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (shade, 255 - shade, 90)).save(buf, "JPEG")
    return buf.getvalue()


def test_paths_bytes_names_and_fields_in_one_pack(photos, tmp_path):
    files = sorted(os.path.join(root, f) for root, _, names in os.walk(photos) for f in names if f.endswith(".jpg"))
    samples = [(files[0], "cat", {"id": 7, "box": [1, 2, 3, 4]}), (_jpeg(10), "dog"), (files[1], "cat", {"id": 9})]
    report = pack_samples(samples, tmp_path / "mixed.pack", progress=False)
    assert report.count == 3 and not report.skipped
    reader = PackReader(tmp_path / "mixed.pack")
    assert reader.classes == ["cat", "dog"] and reader.labels.tolist() == [0, 1, 0]
    assert reader.fields == {"id": [7, None, 9], "box": [[1, 2, 3, 4], None, None]}
    assert reader.read(1) == _jpeg(10) and reader.read(0) == open(files[0], "rb").read()
    assert reader.paths[0] == files[0] and reader.paths[1] == "00000001"
    images, labels = PackedDataset(tmp_path / "mixed.pack", size=32)[1]
    assert images.shape == (3, 32, 32) and labels == 1


def test_the_same_pack_as_a_list_of_files_gives_the_same_images(photos, tmp_path):
    files = sorted(os.path.join(root, f) for root, _, names in os.walk(photos) for f in names if f.endswith(".jpg"))
    labels = [os.path.basename(os.path.dirname(f)) for f in files]
    pack_samples(zip(files, labels), tmp_path / "list.pack", progress=False)
    packed = PackedDataset(tmp_path / "list.pack", decoder="pil", size=24)
    listed = ImageFilesDataset(files, labels, decoder="pil", size=24)
    assert packed.classes == sorted(set(labels)) == listed.classes
    for k in (0, 5, len(files) - 1):
        assert torch.equal(packed[k][0], listed[k][0]) and packed[k][1] == listed[k][1]


def test_undecodable_samples_are_left_out_and_listed(tmp_path):
    report = pack_samples(
        [(_jpeg(1), 0), (b"not an image", 1), (tmp_path / "missing.jpg", 0), (_jpeg(2), 1)],
        tmp_path / "p.pack",
        progress=False,
    )
    assert report.count == 2 and [s["path"] for s in report.skipped] == ["sample 1", str(tmp_path / "missing.jpg")]
    assert PackReader(tmp_path / "p.pack").classes == ["0", "1"]


def test_bad_samples_stop_the_pack_by_name_and_leave_nothing(tmp_path):
    target = tmp_path / "bad.pack"
    for samples, error, text in [
        ([(_jpeg(1), "cat"), (_jpeg(2), "cow")], LabkitValueError, "sample 1: label 'cow'"),
        ([(_jpeg(1),)], LabkitTypeError, "sample 0 is tuple"),
        ([(Image.new("RGB", (2, 2)), 0)], LabkitTypeError, "save it to bytes first"),
        ([(_jpeg(1), 0, {"x": object()})], LabkitTypeError, "field 'x' is object"),
    ]:
        with pytest.raises(error, match=text):
            pack_samples(samples, target, classes=["cat", "dog"] if "cow" in text else None, progress=False)
        assert os.listdir(tmp_path) == []


def test_a_full_disk_is_one_error_and_leaves_nothing(tmp_path, monkeypatch):
    real_add = pack_format.PackWriter.add

    def add(self, *args):
        if len(self) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_add(self, *args)

    monkeypatch.setattr(pack_format.PackWriter, "add", add)
    with pytest.raises(DiskFullError, match="the disk filled up"):
        pack_samples([(_jpeg(k), 0) for k in range(5)], tmp_path / "full.pack", progress=False)
    assert os.listdir(tmp_path) == []
