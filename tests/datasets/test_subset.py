"""labkit.datasets.subset: a Subset (random_split's too) given to make_loader keeps each index's epoch, so the
crops change every epoch and a resumed run draws the same ones."""

import torch
from torch.utils.data import Subset, random_split

from labkit.datasets.map_style import ImageFolderDataset
from labkit.datasets.subset import EpochSubset
from labkit.decode.random_crop import RandomResizedCrop
from labkit.workers.loader_factory import make_loader


def test_a_subset_s_crops_follow_the_epoch_as_the_dataset_s_do(photos):
    dataset = ImageFolderDataset(photos, decoder="pil", crop=RandomResizedCrop(16, seed=4))
    part = Subset(dataset, [5, 2, 9, 11])
    loader = make_loader(part, batch_size=4, shuffle=False, num_workers=2)
    epochs = [next(iter(loader))[0] for _ in range(2)]
    for epoch, images in enumerate(epochs):
        dataset.set_epoch(epoch)
        expected = torch.stack([dataset[i][0] for i in part.indices])
        assert torch.equal(images, expected)
    assert not torch.equal(epochs[0], epochs[1])


def test_random_split_parts_load_as_their_subsets(photos):
    dataset = ImageFolderDataset(photos, decoder="pil", size=16)
    train, val = random_split(dataset, [0.75, 0.25], generator=torch.Generator().manual_seed(0))
    view = EpochSubset(val)
    assert len(view) == len(val) and torch.equal(view[1][0], val[1][0]) and view[1][1] == val[1][1]
    batch = next(iter(make_loader(val, batch_size=len(val), shuffle=False, num_workers=0)))
    assert batch[0].dtype == torch.uint8 and batch[1].tolist() == [val[k][1] for k in range(len(val))]
