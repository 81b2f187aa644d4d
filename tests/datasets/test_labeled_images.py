import os
import pickle

import numpy as np
import pytest
import torch
from conftest import OUT, SMALL
from torch.utils.data import DataLoader, Dataset, SequentialSampler, default_collate

from labkit.core.epoch_index import EpochIndex
from labkit.core.errors import LabkitError
from labkit.core.string_table import StringTable
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.decode.crop_box import crop_resize_flip
from labkit.decode.random_crop import RandomResizedCrop
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


def test_transform_runs_on_the_uint8_image(photos):
    ds = ImageFolderDataset(photos, "pil", OUT, transform=lambda img: img.flip(-1))
    plain = ImageFolderDataset(photos, "pil", OUT)
    assert torch.equal(ds[0][0], plain[0][0].flip(-1))


def test_spawn_workers_read_every_dataset(dataset):
    loader = DataLoader(dataset, batch_size=5, shuffle=True, num_workers=2, multiprocessing_context="spawn")
    labels = torch.cat([batch[1] for batch in loader])
    assert sorted(labels.tolist()) == sorted(dataset.labels.tolist())


def test_datasets_pickle_small(photos, encoded_pack):
    assert len(pickle.dumps(PackedDataset(encoded_pack))) < 2000
    assert pickle.loads(pickle.dumps(ImageFolderDataset(photos)))[0][1] == 0


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
    loader = DataLoader(
        _TouchPaths(paths),
        batch_sampler=[[-1]] + chunks + [[-1]],
        num_workers=1,
        collate_fn=default_collate,
        persistent_workers=True,
        multiprocessing_context="fork",
    )
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
    print(
        f"worker private MB, before and after each epoch: list {mb(list_before)} -> {list(map(mb, list_after))}, "
        f"numpy {mb(table_before)} -> {list(map(mb, table_after))}"
    )
    # Both workers allocate the same working memory; the list's worker also copies every str it touched.
    list_growth, table_growth = list_after[-1] - list_before, table_after[-1] - table_before
    assert list_growth - table_growth > 15 * 2**20
    assert max(table_after) - min(table_after) < 4 * 2**20  # and numpy storage stays flat epoch after epoch


CROP = RandomResizedCrop(24, seed=11)


def _crop_datasets(photos, encoded_pack, decoded_pack):
    return {
        "folder": ImageFolderDataset(photos, "pil-reduced", crop=CROP),
        "pack": PackedDataset(encoded_pack, "pil-reduced", crop=CROP),
        "decoded pack": DecodedArrayDataset(decoded_pack, crop=CROP),
    }


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
        loader = DataLoader(
            ds, batch_size=5, sampler=sampler, num_workers=num_workers, persistent_workers=num_workers > 0
        )
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
