"""labkit.datasets.epoch_scoped: the dataset make_loader hands torch. The user's dataset sees plain ints and
plain lists, as under torch's DataLoader; a labkit dataset however wrapped (Subset, random_split, ConcatDataset, a
wrapper of the user's) draws each epoch's crops."""

import pickle

import pytest
import torch
from torch.utils.data import ConcatDataset, Dataset, Subset, random_split

from labkit.core.epoch_index import EpochBatch, EpochIndex
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.epoch_scoped import EpochScoped
from labkit.decode.random_crop import RandomResizedCrop
from labkit.workers.loader_factory import make_loader


class Recording(Dataset):
    """Records the type of every index and index list it is given."""

    def __init__(self, batched: bool) -> None:
        self.seen = []
        if batched:
            self.__getitems__ = self._getitems

    def __len__(self):
        return 10

    def __getitem__(self, index):
        self.seen.append(type(index))
        return f"{index}"

    def _getitems(self, indices):
        self.seen.append(type(indices))
        return [f"{i}" for i in indices]


@pytest.mark.parametrize("batched", [False, True])
def test_the_wrapped_dataset_sees_plain_ints_and_lists(batched):
    inner = Recording(batched)
    scoped = EpochScoped(inner)
    assert scoped.__getitems__(EpochBatch([3, 1], epoch=4)) == ["3", "1"]
    assert scoped[EpochIndex(7, 2)] == "7"
    assert set(inner.seen) <= {int, list} and inner.seen


def test_an_epoch_batch_pickles_with_its_epoch_and_prints_as_a_list():
    batch = pickle.loads(pickle.dumps(EpochBatch([2, 5], 3)))
    assert batch == [2, 5] and batch.epoch == 3 and str(batch) == "[2, 5]"
    assert all(type(i) is int for i in batch)


def _crops(dataset, indices, epoch):
    dataset.set_epoch(epoch)
    try:
        return torch.stack([dataset[i][0] for i in indices])
    finally:
        dataset.set_epoch(0)


def test_a_subset_s_crops_follow_the_epoch_as_the_dataset_s_do(photos):
    dataset = ImageFolderDataset(photos, decoder="pil", crop=RandomResizedCrop(16, seed=4))
    part = Subset(dataset, [5, 2, 9, 11])
    loader = make_loader(part, batch_size=4, shuffle=False, num_workers=2)
    assert loader.dataset is part
    epochs = [next(iter(loader))[0] for _ in range(2)]
    for epoch, images in enumerate(epochs):
        assert torch.equal(images, _crops(dataset, part.indices, epoch))
    assert not torch.equal(epochs[0], epochs[1])


def test_a_concat_dataset_and_a_user_wrapper_draw_each_epoch_s_crops(photos):
    dataset = ImageFolderDataset(photos, decoder="pil", crop=RandomResizedCrop(16, seed=4))

    class Wrapper(Dataset):
        def __len__(self):
            return len(dataset)

        def __getitem__(self, i):
            image, label = dataset[i]
            return {"image": image, "label": label, "name": f"s{i}"}

    for wrapped, images_of in [(ConcatDataset([dataset, dataset]), lambda b: b[0]), (Wrapper(), lambda b: b["image"])]:
        loader = make_loader(wrapped, batch_size=3, shuffle=False, num_workers=0)
        for epoch in range(2):
            assert torch.equal(images_of(next(iter(loader))), _crops(dataset, [0, 1, 2], epoch))
    assert next(iter(make_loader(Wrapper(), batch_size=3, shuffle=False, num_workers=0)))["name"] == ["s0", "s1", "s2"]


def test_random_split_parts_load_as_their_subsets(photos):
    dataset = ImageFolderDataset(photos, decoder="pil", size=16)
    train, val = random_split(dataset, [0.75, 0.25], generator=torch.Generator().manual_seed(0))
    batch = next(iter(make_loader(val, batch_size=len(val), shuffle=False, num_workers=0)))
    assert batch[0].dtype == torch.uint8 and batch[1].tolist() == [val[k][1] for k in range(len(val))]
