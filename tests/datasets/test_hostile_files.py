"""Every dataset, `labkit pack` and `labkit verify` against the inputs real data sets contain."""

import os

import pytest
import torch
from torch.utils.data import DataLoader

from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.datasets.sample_errors import SampleError
from labkit.harness.synthetic_data import make_hostile
from labkit.storage.pack_format import verify_pack
from labkit.storage.packing import pack_folder
from labkit.tools.cli import main


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hostile") / "data")
    cases = make_hostile(root)
    yield root, {c.relpath: c for c in cases}
    os.chmod(os.path.join(root, "b", "unreadable.jpg"), 0o644)


def _expected(cases, outcome):
    return {rel for rel, c in cases.items() if c.expect == outcome}


@pytest.mark.parametrize("decoder", ["pil", "pil-reduced", "torchvision"])
def test_folder_dataset_loads_or_names_each_case(hostile, decoder):
    root, cases = hostile
    ds = ImageFolderDataset(root, decoder, 64)
    seen = set()
    for i in range(len(ds)):
        rel = os.path.relpath(ds.sample_path(i), root)
        seen.add(rel)
        if cases[rel].expect == "load":
            image, _ = ds[i]
            assert image.shape == (3, 64, 64) and image.dtype == torch.uint8, rel
        else:
            with pytest.raises(SampleError, match=f"sample {i} ") as e:
                ds[i]
            assert "object at 0x" not in str(e.value), str(e.value)  # Pillow's BytesIO repr is run-to-run noise
    assert seen == _expected(cases, "load") | _expected(cases, "error")  # the folder named .jpg is no sample


def test_rotated_photo_comes_out_rotated(hostile):
    root, _ = hostile
    ds = ImageFolderDataset(root, "pil", None)
    index = {os.path.relpath(ds.sample_path(i), root): i for i in range(len(ds))}
    assert ds[index["b/rotated.jpg"]][0].shape == (3, 160, 120)  # stored 160x120, displayed upright
    assert ds[index["a/photo.jpg"]][0].shape == (3, 120, 160)


def test_skip_completes_the_epoch_and_reports_exactly_the_broken_files(hostile):
    root, cases = hostile
    ds = ImageFolderDataset(root, "pil", 32, on_error="skip")
    seen = sum(len(labels) for _, labels in DataLoader(ds, batch_size=4, num_workers=2))
    assert seen == len(ds)
    assert {os.path.relpath(r.path, root) for r in ds.skipped} == _expected(cases, "error")


@pytest.mark.parametrize("decoded", [None, 32])
def test_pack_reports_what_it_could_not_pack_and_verify_passes(hostile, tmp_path, decoded):
    root, cases = hostile
    report = pack_folder(root, str(tmp_path / "h.pack"), decoded_size=decoded, workers=2, progress=False)
    assert {s["path"] for s in report.skipped} == _expected(cases, "error")
    assert "object at 0x" not in str(report) and "bytes" in str(report)
    assert report.count == len(_expected(cases, "load"))
    assert verify_pack(report.path).count == report.count
    ds = DecodedArrayDataset(report.path) if decoded else PackedDataset(report.path, "pil", 32)
    assert all(ds[i][0].shape == (3, 32, 32) for i in range(len(ds)))


def test_cli_writes_the_hostile_set(tmp_path, capsys):
    assert main(["data", "--hostile", "--out", str(tmp_path / "h")]) == 0
    out = capsys.readouterr().out
    assert "symlink loop" in out and "30000x30000" in out
    os.chmod(tmp_path / "h" / "b" / "unreadable.jpg", 0o644)
