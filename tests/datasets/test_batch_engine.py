"""The engine every image dataset fetches through: a batch is the samples one at a time as rows of one tensor, in
any thread count, with seeded crops that depend on neither batch size, workers nor threads, a broken image named
(or skipped alone), and the Python calls per sample counted."""

import numpy as np
import pytest
import torch
from conftest import OUT

from labkit.collate.batching import stack_uint8
from labkit.core.epoch_index import EpochIndex
from labkit.core.errors import LabkitError
from labkit.datasets.encoded_images import EncodedImages, ImageFolderDataset
from labkit.datasets.labeled_images import LabeledImageDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.datasets.sample_errors import SampleError
from labkit.decode.center_crop import CenterCrop
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE
from labkit.decode.random_crop import RandomResizedCrop
from labkit.measure.python_calls import count_python_calls
from labkit.workers.loader_factory import make_loader

CROP = RandomResizedCrop(24, seed=3)


INDICES = [9, 0, 23, 4, 4, 17, 1, 15]


def _datasets(photos, encoded_pack, decoded_pack, threads):
    return {
        "folder simplejpeg": ImageFolderDataset(photos, "simplejpeg", OUT, decode_threads=threads),
        "pack pil-reduced": PackedDataset(encoded_pack, "pil-reduced", OUT, decode_threads=threads),
        "pack crops": PackedDataset(encoded_pack, "simplejpeg", crop=CROP, decode_threads=threads),
        "folder centre crops": ImageFolderDataset(
            photos, "simplejpeg", crop=CenterCrop(OUT, resize=OUT + 8), decode_threads=threads
        ),
        "decoded pack crops": DecodedArrayDataset(decoded_pack, crop=CROP, decode_threads=threads),
    }


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(
    "kind", ["folder simplejpeg", "pack pil-reduced", "pack crops", "folder centre crops", "decoded pack crops"]
)
def test_a_batch_is_the_samples_one_at_a_time_as_rows_of_one_tensor(kind, threads, photos, encoded_pack, decoded_pack):
    ds = _datasets(photos, encoded_pack, decoded_pack, threads)[kind]
    batch = ds.__getitems__(INDICES)
    first = batch[0][0]
    for _k, ((image, label), index) in enumerate(zip(batch, INDICES)):
        one, one_label = ds[index]
        assert torch.equal(image, one) and label == one_label == int(ds.labels[index])
        assert image.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()  # one block
    images, labels = stack_uint8(batch)
    assert images.data_ptr() == first.data_ptr() and images.shape == (len(INDICES), *first.shape)  # no copy
    assert labels.tolist() == [int(ds.labels[i]) for i in INDICES]


def test_crops_come_from_each_indexs_own_epoch_in_a_batch(encoded_pack):
    ds = PackedDataset(encoded_pack, "simplejpeg", crop=CROP, decode_threads=2)
    batch = ds.__getitems__([EpochIndex(5, 0), EpochIndex(5, 1), EpochIndex(6, 1)])
    expected = [CROP.decode(ds.read_raw(i), i, e, "simplejpeg") for i, e in ((5, 0), (5, 1), (6, 1))]
    assert all(torch.equal(img, want) for (img, _), want in zip(batch, expected))
    assert not torch.equal(expected[0], expected[1])


def test_a_transform_or_mixed_sizes_go_sample_by_sample(photos):
    flipped = ImageFolderDataset(photos, "pil", OUT, transform=lambda img: img.flip(-1))
    batch = flipped.__getitems__([0, 1])
    assert batch[0][0].untyped_storage().data_ptr() != batch[1][0].untyped_storage().data_ptr()
    native = ImageFolderDataset(photos, "pil", None)
    assert [img.shape for img, _ in native.__getitems__([0, 1])] == [native[0][0].shape, native[1][0].shape]


def _fails(ds, index) -> bool:
    try:
        ds[index]
    except SampleError:
        return True
    return False


def test_a_broken_image_in_a_batch_is_named(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "simplejpeg", OUT, decode_threads=2)
    broken = next(i for i in range(len(ds)) if _fails(ds, i))
    with pytest.raises(SampleError, match=rf"sample {broken} \(.*\): ") as error:
        ds.__getitems__([j for j in range(len(ds)) if j != broken][:3] + [broken])
    assert error.value.index == broken


def test_skip_replaces_only_the_broken_image_of_a_batch(corrupt_photos):
    ds = ImageFolderDataset(corrupt_photos, "simplejpeg", OUT, on_error="skip", decode_threads=2)
    broken = [i for i in range(len(ds)) if _fails(ImageFolderDataset(corrupt_photos, "simplejpeg", OUT), i)]
    good = [i for i in range(len(ds)) if i not in broken][:3]
    batch = ds.__getitems__(good + broken[:1])
    for (image, label), index in zip(batch[:3], good):
        assert torch.equal(image, ds[index][0]) and label == int(ds.labels[index])
    substitute, label = batch[3]
    assert substitute.shape == (3, OUT, OUT) and [r.index for r in ds.skipped if r.substitutions] == broken[:1]


def test_a_batch_is_decoded_into_the_tensor_it_is_given(encoded_pack):
    ds = PackedDataset(encoded_pack, "simplejpeg", crop=CROP, decode_threads=2)
    slot = torch.zeros(6, 3, 24, 24, dtype=torch.uint8)
    batch = ds.__getitems__([3, 1, 4, 1], out=slot[:4])
    assert all(img.data_ptr() == slot[k].data_ptr() for k, (img, _) in enumerate(batch))
    assert all(torch.equal(slot[k], ds[i][0]) for k, i in enumerate([3, 1, 4, 1])) and not slot[4:].any()
    with pytest.raises(LabkitError, match=r"this batch needs uint8 \(2, 3, 24, 24\)"):
        ds.__getitems__([0, 1], out=slot[:3])


def test_the_slot_loader_gets_batches_decoded_in_its_slots(encoded_pack, monkeypatch):
    from labkit.workers.shared_slots import SlotLoader

    ds = PackedDataset(encoded_pack, "simplejpeg", crop=CROP)
    asked = []
    real = PackedDataset.__getitems__
    monkeypatch.setattr(
        PackedDataset, "__getitems__", lambda self, i, out=None: asked.append(out is not None) or real(self, i, out)
    )
    loader = SlotLoader(ds, batch_size=5, shuffle=False, num_workers=0, image_shape=(3, 24, 24))
    images = torch.cat([b.clone() for b, _ in loader])
    assert asked and all(asked)
    assert torch.equal(images, torch.stack([ds[i][0] for i in range(len(ds))]))


# Python calls per sample of a batch of 64 (the article's), counted in every thread (the decode helpers too): about
# 80 before the engine, which plans the batch's boxes at once, reads it in one call and decodes it in each thread's
# own loop. What remains a sample: the resize's two wrappers; the rest is per share of the batch.
CALLS_PER_SAMPLE = 10


@pytest.mark.parametrize("storage", ["pack", "folder"])
@pytest.mark.parametrize(
    "crop", [RandomResizedCrop(OUT, seed=1), CenterCrop(OUT, resize=OUT)], ids=["random", "centre"]
)
def test_the_python_calls_per_sample_of_a_batch_stay_counted(photos, encoded_pack, storage, crop):
    ds = (
        PackedDataset(encoded_pack, "simplejpeg", crop=crop, decode_threads=2)
        if storage == "pack"
        else ImageFolderDataset(photos, "simplejpeg", crop=crop, decode_threads=2)
    )
    batch = [k % len(ds) for k in range(64)]
    ds.__getitems__(batch)  # first use: imports and caches are not the batch's work
    counted = count_python_calls(lambda: ds.__getitems__(batch))
    assert counted.per(len(batch)) <= CALLS_PER_SAMPLE, counted.top(20)


def test_the_crops_drawn_do_not_depend_on_batch_size_workers_or_threads(encoded_pack):
    ds = PackedDataset(encoded_pack, "simplejpeg", crop=RandomResizedCrop(OUT, seed=9), decode_threads=1)
    reference = torch.stack([ds[i][0] for i in range(len(ds))])
    for batch_size, workers, threads in [(5, 0, 1), (8, 2, 2), (24, 0, 3)]:
        ds.decode_threads = threads
        context = {"multiprocessing_context": "fork"} if workers else {}
        images = torch.cat(
            [b for b, _ in make_loader(ds, batch_size=batch_size, shuffle=False, num_workers=workers, **context)]
        )
        assert torch.equal(images, reference), (batch_size, workers, threads)


class _BytesInMemory(EncodedImages, LabeledImageDataset):
    """A storage kind as a user adds one: where its samples are and how to read one; the engine does the rest."""

    fills_batches = True

    def __init__(self, blobs, labels, on_error="raise"):
        super().__init__(None, on_error, crop=CROP, decode_threads=2)
        self.blobs, self.labels, self.classes = blobs, np.asarray(labels, dtype=np.int64), ["a", "b"]
        self.use_decoder("simplejpeg", OUTPUT_SIZE, CROP, MAX_PIXELS)

    def read_raw(self, index):
        return self.blobs[index]

    def sample_path(self, index):
        return f"blob {index}"


def test_a_storage_kind_is_a_reader_and_a_small_class_and_gets_the_whole_engine(encoded_pack):
    pack = PackedDataset(encoded_pack, "simplejpeg", crop=CROP)
    blobs = [pack.read_raw(i) for i in range(8)]
    mine = _BytesInMemory(blobs, pack.labels[:8])
    batch = mine.__getitems__([EpochIndex(3, 1), 0, 7])
    assert [torch.equal(img, pack[i][0]) for (img, _), i in zip(batch, [EpochIndex(3, 1), 0, 7])] == [True] * 3
    assert batch[0][0].untyped_storage().data_ptr() == batch[2][0].untyped_storage().data_ptr()  # one tensor
    broken = _BytesInMemory(blobs[:5] + [b"\xff\xd8\xff" + bytes(40)] + blobs[6:], pack.labels[:8])
    with pytest.raises(SampleError, match=r"sample 5 \('blob 5'\)"):
        broken.__getitems__([4, 5, 6])
    skipping = _BytesInMemory(broken.blobs, pack.labels[:8], on_error="skip")
    images = skipping.__getitems__([4, 5, 6])
    assert torch.equal(images[0][0], pack[4][0]) and torch.equal(images[2][0], pack[6][0])
    assert [(r.index, r.path, r.substitutions) for r in skipping.skipped] == [(5, "blob 5", 1)]
    assert repr(skipping.engine) == "BatchEngine(on_error='skip', threads=2)"


def test_an_index_out_of_range_is_named_with_the_dataset_s_size(encoded_pack):
    ds = PackedDataset(encoded_pack, "simplejpeg", crop=CROP)
    with pytest.raises(IndexError, match=f"sample index {len(ds)} out of range for a dataset of {len(ds)} samples"):
        ds.__getitems__([0, len(ds)])
    assert torch.equal(ds[-1][0], ds[len(ds) - 1][0])
