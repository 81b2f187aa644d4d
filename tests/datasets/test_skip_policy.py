import os
from collections import Counter

import pytest
import torch
from conftest import OUT, corrupt_indices
from torch.utils.data import DataLoader

from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.sample_errors import SampleError, SkipRecord
from labkit.datasets.skip_policy import SkipPolicy, probe_stride
from labkit.decode.decoder_contract import DecodeError
from labkit.harness.synthetic_data import PhotoSpec, make_photos


def test_skip_substitutes_counts_and_gathers_from_spawned_workers(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT, on_error="skip")
    corrupt, indices = corrupt_indices(ds, corrupt_photos)
    loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    seen = sum(len(labels) for _, labels in loader)
    assert seen == len(ds)
    assert {r.path for r in ds.skipped} == corrupt
    assert {r.index for r in ds.skipped} == set(indices)
    assert all(r.error for r in ds.skipped)
    ds.clear_skipped()
    assert ds.skipped == []


DECODER_NAMES = ["pil", "pil-reduced", "torchvision"]


ADJACENT = list(range(16, 20))


@pytest.fixture(scope="module")
def adjacent_broken(tmp_path_factory) -> str:
    """20 samples: 16 photos, then 4 broken files side by side (indices 16-19)."""
    root = str(tmp_path_factory.mktemp("adjacent") / "photos")
    make_photos(root, PhotoSpec(n=16, classes=2, width=64, height=48, seed=5), workers=1, progress=False)
    last = os.path.join(root, sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))[-1])
    good = open(os.path.join(last, sorted(os.listdir(last))[0]), "rb").read()
    for k, data in enumerate([b"", b"<!DOCTYPE html>", good[: len(good) // 3], b"\xff\xd8\xff" + b"\0" * 40]):
        open(os.path.join(last, f"zz-broken-{k}.jpg"), "wb").write(data)
    return root


def _by_index(report):
    return {r.index: r.substitutions for r in report}


def _count_reads(ds):
    reads = Counter()
    read_raw = ds.read_raw

    def counting(index):
        reads[index] += 1
        return read_raw(index)

    ds.read_raw = counting
    return reads


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_adjacent_broken_samples_are_reported_once_per_epoch_and_decoded_once(adjacent_broken, decoder):
    ds = ImageFolderDataset(adjacent_broken, decoder, OUT, on_error="skip")
    assert [i for i in range(len(ds)) if "zz-broken" in ds.sample_path(i)] == ADJACENT
    reads = _count_reads(ds)
    substitutes = {}
    for epoch in range(2):
        mark = ds.skip_mark()
        images = {i: ds[i][0] for i in range(len(ds))}
        report = ds.skipped_since(mark)
        assert _by_index(report) == {i: 1 for i in ADJACENT}, f"epoch {epoch}: {report}"
        assert all("zz-broken" in r.path and r.error for r in report)
        for i in ADJACENT:
            assert torch.equal(images[i], substitutes.setdefault(i, images[i]))  # the same substitute every epoch
    assert _by_index(ds.skipped) == {i: 2 for i in ADJACENT}  # the running total
    assert {i: reads[i] for i in ADJACENT} == {i: 1 for i in ADJACENT}  # a known-broken file is not read again
    fresh = ImageFolderDataset(adjacent_broken, decoder, OUT, on_error="skip")
    assert all(torch.equal(fresh[i][0], substitutes[i]) for i in ADJACENT)  # a new run substitutes the same


@pytest.mark.parametrize("decoder,persistent", [(d, False) for d in DECODER_NAMES] + [("pil", True)])
def test_adjacent_broken_samples_with_two_workers_over_two_epochs(adjacent_broken, decoder, persistent):
    ds = ImageFolderDataset(adjacent_broken, decoder, OUT, on_error="skip")
    loader = DataLoader(
        ds,
        batch_size=4,
        shuffle=True,
        num_workers=2,
        persistent_workers=persistent,
        generator=torch.Generator().manual_seed(0),
    )
    for epoch in range(2):
        mark = ds.skip_mark()
        assert sum(len(labels) for _, labels in loader) == len(ds)
        assert _by_index(ds.skipped_since(mark)) == {i: 1 for i in ADJACENT}, f"epoch {epoch}"
    assert _by_index(ds.skipped) == {i: 2 for i in ADJACENT}


def test_replacements_pass_over_samples_known_to_be_broken(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT, on_error="skip")
    _, broken = corrupt_indices(ds, corrupt_photos)
    reads = _count_reads(ds)
    for _ in range(2):
        mark = ds.skip_mark()
        for i in range(len(ds)):
            ds[i]
        assert _by_index(ds.skipped_since(mark)) == {i: 1 for i in broken}
    assert {i: reads[i] for i in broken} == {i: 1 for i in broken}


def test_a_failed_read_that_may_succeed_later_is_not_remembered_as_broken(photos, monkeypatch):
    ds = ImageFolderDataset(photos, "pil", OUT, on_error="skip")
    read_raw, failing = ds.read_raw, {3}

    def flaky(index):
        if index in failing:
            raise OSError(5, "Input/output error")  # EIO: the disk, not the file
        return read_raw(index)

    ds.read_raw = flaky
    substitute = ds[3][0]
    failing.clear()
    assert not torch.equal(ds[3][0], substitute)  # read again, and this time it loads
    assert _by_index(ds.skipped) == {3: 1}


def test_when_every_sample_is_broken_no_substitution_is_counted(tmp_path):
    root = tmp_path / "broken"
    (root / "a").mkdir(parents=True)
    for k in range(3):
        (root / "a" / f"{k}.jpg").write_bytes(b"not a jpeg")
    ds = ImageFolderDataset(str(root), "pil", OUT, on_error="skip")
    with pytest.raises(SampleError, match="every one of the 3"):
        ds[0]
    assert _by_index(ds.skipped) == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize("n", [1, 2, 3, 10, 97, 100, 256])
def test_the_probe_visits_every_sample_once_the_first_steps_far_away(n):
    stride = probe_stride(n)
    assert sorted((5 + k * stride) % n for k in range(n)) == list(range(n))
    if n >= 10:
        assert 0.5 * n < stride < 0.8 * n


def test_the_policy_substitutes_the_first_loadable_sample_of_the_probe_and_logs_each_broken_one():
    broken = {4, 1}  # the probe from 4 in 10 samples steps by 7: 4, 1, 8, ...
    loads = Counter()

    def load(index):
        loads[index] += 1
        if index in broken:
            raise SampleError(f"sample {index}", index) from DecodeError("truncated")
        return index

    policy = SkipPolicy()
    assert probe_stride(10) == 7 and policy.fetch(4, 10, load, lambda i: f"f{i}") == 8
    assert policy.fetch(4, 10, load, lambda i: f"f{i}") == 8  # the same substitute, without decoding 4 or 1 again
    assert loads == {4: 1, 1: 1, 8: 2}
    assert policy.since(0) == [SkipRecord(4, "f4", "truncated", 2), SkipRecord(1, "f1", "truncated", 0)]
    mark = policy.mark()
    assert policy.fetch(2, 10, load, lambda i: f"f{i}") == 2 and policy.since(mark) == []
    policy.clear()
    assert policy.since(0) == []
