import os

import pytest
import torch

from labkit.harness.synthetic_data import read_manifest
from labkit.storage.image_folder import scan_image_folder
from labkit.storage.pack_format import PackReader
from labkit.storage.packing import pack_folder, read_file


def test_packs_every_file_in_folder_order(photos, encoded_pack):
    r = PackReader(encoded_pack)
    assert r.meta["skipped"] == [] and r.meta["source"] == "photos"
    for i in range(len(r)):
        assert r.read(i) == open(os.path.join(photos, r.paths[i]), "rb").read()


def test_reports_files_it_could_not_pack_and_packs_the_rest(corrupt_photos, tmp_path):
    corrupt = {c["path"] for c in read_manifest(corrupt_photos)["corrupt"]}
    report = pack_folder(corrupt_photos, str(tmp_path / "c.pack"), workers=2, progress=False)
    assert {s["path"] for s in report.skipped} == corrupt
    assert all(s["path"] in str(report) for s in report.skipped)
    r = PackReader(report.path)
    assert len(r) == 30 - len(corrupt) and not corrupt & set(r.paths)
    assert {s["path"] for s in r.meta["skipped"]} == corrupt  # the pack remembers what it left out


def test_unchecked_pack_keeps_even_corrupt_bytes(corrupt_photos, tmp_path):
    report = pack_folder(corrupt_photos, str(tmp_path / "raw.pack"), check=False, workers=1, progress=False)
    assert report.count == 30 and report.skipped == []


def test_decoded_pack_metadata(decoded_pack):
    r = PackReader(decoded_pack)
    assert r.meta["decoded_by"] == "pil" and r.meta["decoded"]["layout"] == "CHW"
    assert all(int(o) % 64 == 0 for o in r.records["offset"])


def test_bad_decoder_name_fails_before_work(photos, tmp_path):
    with pytest.raises(ValueError, match="unknown decoder"):
        pack_folder(photos, str(tmp_path / "x.pack"), decoded_size=8, decoder="nope", progress=False)
    assert not os.path.exists(tmp_path / "x.pack")


@pytest.mark.timeout(60)
def test_pool_after_openmp_in_the_parent_does_not_hang(photos, tmp_path):
    # The parent first does what the seed's baseline does: decode and normalise 256x256 images
    # in-process. Its OpenMP threads then exist, and a forked pool worker that runs a parallel
    # torch op would wait for them forever (GNU libgomp is not fork-safe).
    from torch.utils.data import DataLoader

    from labkit.device.transfer import normalize_uint8

    pack_folder(photos, str(tmp_path / "first.pack"), decoded_size=16, workers=2, progress=False)
    batch = next(
        iter(DataLoader([(normalize_uint8(torch.zeros(3, 256, 256, dtype=torch.uint8)), 0)] * 8, batch_size=8))
    )
    assert batch[0].shape == (8, 3, 256, 256)
    report = pack_folder(photos, str(tmp_path / "second.pack"), decoded_size=256, workers=2, progress=False)
    assert report.count == 24


@pytest.mark.parametrize(
    "options", [{"check": False}, {"check": True}, {"decoded_size": 16}], ids=["unchecked", "checked", "decoded"]
)
def test_a_pack_is_the_same_bytes_at_any_worker_count(photos, tmp_path, options):
    """Workers write runs of files into the pack, each in its turn: the result must not depend on how
    many there were, and nothing else may be left in the folder."""
    packs = [tmp_path / f"{workers}.pack" for workers in (1, 2, 3)]
    for workers, pack in zip((1, 2, 3), packs):
        report = pack_folder(photos, pack, workers=workers, progress=False, **options)
        assert report.count == len(scan_image_folder(photos))
    assert packs[0].read_bytes() == packs[1].read_bytes() == packs[2].read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.pack", "2.pack", "3.pack"]


def test_a_failed_pack_leaves_nothing_behind(photos, tmp_path, monkeypatch):
    from labkit.storage import packing

    def broken_write(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(packing, "_write_at", broken_write)  # forked workers inherit it
    for workers in (1, 2):
        with pytest.raises(OSError, match="simulated"):
            pack_folder(photos, tmp_path / "out.pack", workers=workers, progress=False)
        assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size", [0, 1, 3_000_001])
def test_read_file_gives_every_byte(tmp_path, size):
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(size))
    assert read_file(os.fsencode(path)) == path.read_bytes()
    with pytest.raises(FileNotFoundError):
        read_file(os.fsencode(tmp_path / "missing.jpg"))


@pytest.mark.timeout(60)
def test_a_packing_process_that_dies_fails_the_pack_instead_of_hanging_it(photos, tmp_path, monkeypatch):
    import signal

    from labkit.storage import packing

    sample_bytes = packing.sample_bytes

    def crash_on_one_file(run, path):  # as a decoder crashing on a crafted file would
        if path.endswith(b"/000009.jpg"):
            os.kill(os.getpid(), signal.SIGKILL)
        return sample_bytes(run, path)

    monkeypatch.setattr(packing, "sample_bytes", crash_on_one_file)  # forked workers inherit it
    with pytest.raises(RuntimeError, match="a packing process died .* dmesg"):
        pack_folder(photos, tmp_path / "out.pack", workers=2, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_packing_in_this_process_leaves_its_torch_threads_alone(photos, tmp_path):
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        pack_folder(photos, tmp_path / "one.pack", workers=1, progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
