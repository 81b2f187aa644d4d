import os
import pickle
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import OUT, SMALL
from torch.utils.data import DataLoader, Dataset, SequentialSampler, default_collate

from labkit.bench.synthetic_data import PhotoSpec, make_photos, read_manifest
from labkit.core.epoch_index import EpochIndex
from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.string_table import StringTable
from labkit.datasets.map_style import DecodedArrayDataset, ImageFolderDataset, PackedDataset, SampleError
from labkit.decode.crop_box import crop_resize_flip
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.registry import decode_image
from labkit.measure.process_memory import private_bytes
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.epoch_tagged import EpochTagged
from labkit.workers.shared_slots import SlotLoader


@pytest.fixture(params=["folder", "pack", "decoded"])
def dataset(request, photos, encoded_pack, decoded_pack):
    if request.param == "folder":
        return ImageFolderDataset(photos, "pil-reduced", OUT)
    if request.param == "pack":
        return PackedDataset(encoded_pack, "torchvision", OUT)
    return DecodedArrayDataset(decoded_pack)


def test_one_interface(dataset):
    assert len(dataset) == SMALL.n and len(dataset.classes) == SMALL.classes
    assert dataset.labels.dtype == np.int64 and sorted(set(dataset.labels.tolist())) == [0, 1, 2]
    image, label = dataset[5]
    assert image.shape == (3, OUT, OUT) and image.dtype == torch.uint8
    assert isinstance(label, int) and label == dataset.labels[5]
    batch = dataset.__getitems__([7, 2, 7, 0])
    for (a, la), i in zip(batch, [7, 2, 7, 0]):
        b, lb = dataset[i]
        assert torch.equal(a, b) and la == lb
    with pytest.raises(IndexError):
        dataset[len(dataset)]


def test_folder_and_pack_give_identical_samples(photos, encoded_pack):
    folder = ImageFolderDataset(photos, "pil", OUT)
    pack = PackedDataset(encoded_pack, "pil", OUT)
    assert folder.classes == pack.classes and np.array_equal(folder.labels, pack.labels)
    for i in range(0, len(folder), 5):
        assert torch.equal(folder[i][0], pack[i][0])


def test_decoded_pack_matches_decoding_the_file(photos, decoded_pack):
    folder = ImageFolderDataset(photos, "pil", OUT)
    assert torch.equal(DecodedArrayDataset(decoded_pack)[3][0], folder[3][0])


def test_transform_runs_on_the_uint8_image(photos):
    ds = ImageFolderDataset(photos, "pil", OUT, transform=lambda img: img.flip(-1))
    plain = ImageFolderDataset(photos, "pil", OUT)
    assert torch.equal(ds[0][0], plain[0][0].flip(-1))


def test_wrong_pack_kind_or_size_is_a_clear_error(encoded_pack, decoded_pack):
    with pytest.raises(ValueError, match="DecodedArrayDataset"):
        PackedDataset(decoded_pack)
    with pytest.raises(ValueError, match="PackedDataset"):
        DecodedArrayDataset(encoded_pack)
    with pytest.raises(ValueError, match="re-pack"):
        DecodedArrayDataset(decoded_pack, size=OUT * 2)
    with pytest.raises(ValueError, match="on_error"):
        ImageFolderDataset(os.path.dirname(encoded_pack), on_error="ignore")


def _corrupt_indices(ds, root):
    corrupt = {os.path.join(root, c["path"]) for c in read_manifest(root)["corrupt"]}
    return corrupt, [i for i in range(len(ds)) if ds.sample_path(i) in corrupt]


def test_corrupt_sample_error_names_index_and_path(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT)
    corrupt, indices = _corrupt_indices(ds, corrupt_photos)
    with pytest.raises(SampleError, match=rf"sample {indices[0]} \(.*{os.path.basename(ds.sample_path(indices[0]))}") as e:
        ds[indices[0]]
    assert e.value.index == indices[0] and e.value.path in corrupt


def test_skip_substitutes_counts_and_gathers_from_spawned_workers(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT, on_error="skip")
    corrupt, indices = _corrupt_indices(ds, corrupt_photos)
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
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, persistent_workers=persistent,
                        generator=torch.Generator().manual_seed(0))
    for epoch in range(2):
        mark = ds.skip_mark()
        assert sum(len(labels) for _, labels in loader) == len(ds)
        assert _by_index(ds.skipped_since(mark)) == {i: 1 for i in ADJACENT}, f"epoch {epoch}"
    assert _by_index(ds.skipped) == {i: 2 for i in ADJACENT}


def test_replacements_pass_over_samples_known_to_be_broken(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT, on_error="skip")
    _, broken = _corrupt_indices(ds, corrupt_photos)
    reads = _count_reads(ds)
    for _ in range(2):
        mark = ds.skip_mark()
        for i in range(len(ds)):
            ds[i]
        assert _by_index(ds.skipped_since(mark)) == {i: 1 for i in broken}
    assert {i: reads[i] for i in broken} == {i: 1 for i in broken}


def test_error_surfaces_through_worker_with_its_type(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "pil", OUT)
    _, indices = _corrupt_indices(ds, corrupt_photos)
    loader = DataLoader(ds, batch_size=1, sampler=[indices[0]], num_workers=1)
    with pytest.raises(SampleError, match=f"sample {indices[0]}"):
        next(iter(loader))


def test_spawn_workers_read_every_dataset(dataset):
    loader = DataLoader(dataset, batch_size=5, shuffle=True, num_workers=2, multiprocessing_context="spawn")
    labels = torch.cat([batch[1] for batch in loader])
    assert sorted(labels.tolist()) == sorted(dataset.labels.tolist())


def test_datasets_pickle_small(photos, encoded_pack):
    assert len(pickle.dumps(PackedDataset(encoded_pack))) < 2000
    assert pickle.loads(pickle.dumps(ImageFolderDataset(photos)))[0][1] == 0


# -- copy-on-write: Python lists of paths grow in every forked worker, numpy storage does not -----------

class _TouchPaths(Dataset):
    """Reads the path of every index it is asked for; index -1 only reports memory."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitems__(self, indices):
        if indices != [-1]:
            total = sum(len(self.paths[i]) for i in indices)
            assert total > 0
        return [private_bytes()]


def _worker_private_memory(paths, epochs=3, batch=20_000):
    """Private bytes of one forked worker before it touches any path, then after each epoch."""
    chunks = [list(range(s, min(s + batch, len(paths)))) for s in range(0, len(paths), batch)]
    loader = DataLoader(_TouchPaths(paths), batch_sampler=[[-1]] + chunks + [[-1]], num_workers=1,
                        collate_fn=default_collate, persistent_workers=True, multiprocessing_context="fork")
    before, after = None, []
    for _ in range(epochs):
        reports = [int(b[0]) for b in loader]
        before = reports[0] if before is None else before
        after.append(reports[-1])
    return before, after


@pytest.mark.skipif(not hasattr(os, "fork"), reason="copy-on-write growth is a fork phenomenon")
def test_worker_memory_python_list_grows_numpy_storage_does_not():
    paths = [f"/datasets/photos/class_{i % 100:03d}/image_{i:09d}.jpg" for i in range(300_000)]
    list_before, list_after = _worker_private_memory(paths)
    table_before, table_after = _worker_private_memory(StringTable.from_strings(paths))
    mb = lambda b: round(b / 2**20, 1)  # noqa: E731
    print(f"worker private MB, before and after each epoch: list {mb(list_before)} -> {list(map(mb, list_after))}, "
          f"numpy {mb(table_before)} -> {list(map(mb, table_after))}")
    # Both workers allocate the same working memory; the list's worker also copies every str it touched.
    list_growth, table_growth = list_after[-1] - list_before, table_after[-1] - table_before
    assert list_growth - table_growth > 15 * 2**20
    assert max(table_after) - min(table_after) < 4 * 2**20  # and numpy storage stays flat epoch after epoch


def test_encoded_pack_dataset_hands_out_the_file_bytes(photos, encoded_pack):
    from labkit.collate.batching import list_collate
    from labkit.datasets.map_style import EncodedPackDataset

    ds = EncodedPackDataset(encoded_pack)
    blob, label = ds[3]
    assert blob.dtype == torch.uint8
    assert bytes(blob.numpy()) == open(os.path.join(photos, ds.reader.paths[3]), "rb").read()
    blobs, labels = list_collate(ds.__getitems__([0, 1, 2]))
    assert len(blobs) == 3 and labels.tolist() == ds.labels[:3].tolist()
    assert torch.equal(decode_image(bytes(blob.numpy()), OUT, "pil"), PackedDataset(encoded_pack, "pil", OUT)[3][0])


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


# Random-resized crops drawn per sample (labkit.decode.random_crop), through every dataset and loader.

CROP = RandomResizedCrop(24, seed=11)


def _crop_datasets(photos, encoded_pack, decoded_pack):
    return {"folder": ImageFolderDataset(photos, "pil-reduced", crop=CROP),
            "pack": PackedDataset(encoded_pack, "pil-reduced", crop=CROP),
            "decoded pack": DecodedArrayDataset(decoded_pack, crop=CROP)}


def _expected_crop(ds, index, epoch):
    raw = ds.read_raw(index)
    if isinstance(ds, DecodedArrayDataset):
        return crop_resize_flip(torch.from_numpy(raw), CROP.draw(OUT, OUT, index, epoch), (24, 24))
    return CROP.decode(raw, index, epoch)


@pytest.mark.parametrize("kind", ["folder", "pack", "decoded pack"])
def test_each_dataset_gives_each_sample_its_own_crop_for_the_epoch(kind, photos, encoded_pack, decoded_pack):
    ds = _crop_datasets(photos, encoded_pack, decoded_pack)[kind]
    assert ds.size == (24, 24) and "crop" in repr(ds)
    image, label = ds[3]
    assert image.shape == (3, 24, 24) and image.dtype == torch.uint8 and label == int(ds.labels[3])
    assert torch.equal(image, _expected_crop(ds, 3, 0))
    assert torch.equal(ds[EpochIndex(3, 5)][0], _expected_crop(ds, 3, 5))  # the index's own epoch
    assert not torch.equal(_expected_crop(ds, 3, 5), _expected_crop(ds, 3, 0))
    ds.set_epoch(5)
    assert torch.equal(ds[3][0], _expected_crop(ds, 3, 5))
    batch = ds.__getitems__([EpochIndex(4, 1), EpochIndex(2, 1)])
    assert [torch.equal(img, _expected_crop(ds, i, 1)) for (img, _), i in zip(batch, (4, 2))] == [True, True]


@pytest.mark.parametrize("kind", ["folder", "decoded pack"])
def test_persistent_workers_draw_the_crops_a_single_process_draws(kind, photos, encoded_pack, decoded_pack):
    ds = _crop_datasets(photos, encoded_pack, decoded_pack)[kind]

    def epochs(num_workers):
        sampler = EpochTagged(BlockShuffleSampler(len(ds), block_size=4, seed=2))
        loader = DataLoader(ds, batch_size=5, sampler=sampler, num_workers=num_workers,
                            persistent_workers=num_workers > 0)
        return [torch.cat([images for images, _ in loader]) for _ in range(2)]

    single, workers = epochs(0), epochs(2)
    assert all(torch.equal(a, b) for a, b in zip(single, workers))
    assert not torch.equal(single[0], single[1])  # a new epoch, new boxes


def test_a_resumed_run_draws_the_boxes_the_uninterrupted_one_drew(encoded_pack):
    ds = PackedDataset(encoded_pack, "pil-reduced", crop=CROP)

    def run(sampler, batches=None):
        out = []
        for k, (images, _) in enumerate(DataLoader(ds, batch_size=4, sampler=sampler)):
            if batches is not None and k == batches:
                break
            out.append(images)
        return out

    whole = run(EpochTagged(BlockShuffleSampler(len(ds), block_size=4, seed=3)))
    first = EpochTagged(BlockShuffleSampler(len(ds), block_size=4, seed=3))
    head = run(first, batches=2)
    resumed = EpochTagged(BlockShuffleSampler(len(ds), block_size=4, seed=3))
    resumed.load_state_dict(first.state_dict(consumed=8))
    assert all(torch.equal(a, b) for a, b in zip(head + run(resumed), whole))


def test_the_slot_loader_carries_the_epoch_to_its_workers(decoded_pack):
    ds = DecodedArrayDataset(decoded_pack, crop=CROP)
    loader = SlotLoader(ds, batch_size=6, sampler=EpochTagged(SequentialSampler(range(len(ds)))), num_workers=2)
    for epoch in range(2):
        images = torch.cat([images.clone() for images, _ in loader])
        assert torch.equal(images, torch.stack([_expected_crop(ds, i, epoch) for i in range(len(ds))]))


def test_a_torchvision_transform_passed_as_crop_is_refused_with_where_it_goes(photos):
    from torchvision.transforms import v2

    with pytest.raises(LabkitError, match="transform="):
        ImageFolderDataset(photos, crop=v2.RandomResizedCrop(24))


def test_a_list_of_files_with_names_or_indices_as_labels(photos):
    from labkit.datasets.map_style import ImageFilesDataset

    folder = ImageFolderDataset(photos, decoder="pil", size=OUT)
    files = [folder.sample_path(k) for k in range(len(folder))]
    names = [folder.classes[y] for y in folder.labels]
    by_name = ImageFilesDataset(files, names, decoder="pil", size=OUT)
    by_index = ImageFilesDataset(files, folder.labels.tolist(), classes=folder.classes, decoder="pil", size=OUT)
    for dataset in (by_name, by_index):
        assert dataset.classes == folder.classes and dataset.labels.tolist() == folder.labels.tolist()
        assert torch.equal(dataset[4][0], folder[4][0])
    relative = ImageFilesDataset([os.path.relpath(f, photos) for f in files], names, root=photos, size=OUT)
    assert relative.sample_path(0) == files[0] and len(relative) == len(files)
    assert ImageFilesDataset(files[:3], [0, 2, 2]).classes == ["0", "1", "2"]


def test_a_file_list_s_mistakes_are_named(photos):
    from labkit.datasets.map_style import ImageFilesDataset

    with pytest.raises(LabkitValueError, match="3 files but 2 labels"):
        ImageFilesDataset(["a", "b", "c"], [0, 1])
    with pytest.raises(LabkitTypeError, match="is one path: give a list of image files"):
        ImageFilesDataset(photos, [0])
    with pytest.raises(LabkitValueError, match="label 'cow' is not one of the classes"):
        ImageFilesDataset(["a", "b"], ["cat", "cow"], classes=["cat", "dog"])
    with pytest.raises(LabkitValueError, match="sample 1 has label 5, outside the 2 classes"):
        ImageFilesDataset(["a", "b"], [0, 5], classes=["cat", "dog"])
