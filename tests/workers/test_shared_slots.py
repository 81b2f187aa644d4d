"""SlotLoader: the batches a DataLoader would give, written into reused shared-memory slots, never
overwritten while anything still refers to them."""

import time

import pytest
import torch
from torch.utils.data import Dataset, SequentialSampler

from labkit.workers.shared_slots import SlotLoader


class Numbered(Dataset):
    """Image i is filled with i (mod 256), label i mod 3; ``bad`` is the index of a wrong-sized one."""

    def __init__(self, n: int, bad: int = -1) -> None:
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        side = 9 if i == self.bad else 8
        return torch.full((3, side, side), i % 256, dtype=torch.uint8), i % 3


def expected(indices):
    return (
        torch.stack([torch.full((3, 8, 8), i % 256, dtype=torch.uint8) for i in indices]),
        torch.tensor([i % 3 for i in indices]),
    )


def batches_of(n, batch_size):
    return [list(range(s, min(n, s + batch_size))) for s in range(0, n, batch_size)]


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_the_samples_in_order_epoch_after_epoch(workers):
    dataset = Numbered(22)
    loader = SlotLoader(dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=workers)
    assert len(loader) == 6
    for _ in range(3):
        got = [(images.clone(), labels) for images, labels in loader]
        assert len(got) == 6 and got[-1][0].shape == (2, 3, 8, 8)  # the last batch is short
        for (images, labels), indices in zip(got, batches_of(22, 4)):
            want_images, want_labels = expected(indices)
            assert torch.equal(images, want_images) and torch.equal(labels, want_labels)


def test_shuffled_epochs_each_give_every_sample_once_unharmed():
    dataset = Numbered(50)
    loader = SlotLoader(dataset, batch_size=4, num_workers=2, generator=torch.Generator().manual_seed(0))
    orders = []
    for _ in range(3):
        seen = []
        for images, labels in loader:
            values = images.flatten(1)
            assert torch.equal(values.min(1).values, values.max(1).values)  # each image one value: not torn
            assert torch.equal(values[:, 0].long() % 3, labels)  # and the label of that sample
            seen += values[:, 0].tolist()
        assert sorted(seen) == list(range(50))
        orders.append(seen)
    assert orders[0] != orders[1]


def test_too_few_slots_or_an_image_that_is_not_a_tensor_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="pass at least 6"):
        SlotLoader(Numbered(8), batch_size=4, num_workers=2, prefetch_factor=2, slots=5)

    class NumpyImages(Numbered):
        def __getitem__(self, i):
            image, label = super().__getitem__(i)
            return image.numpy(), label

    loader = SlotLoader(NumpyImages(8), batch_size=4, num_workers=0, image_shape=(3, 8, 8))
    with pytest.raises(TypeError, match="sample .: the image is a ndarray"):
        next(iter(loader))


def test_the_workers_send_back_slot_numbers_not_images():
    dataset = Numbered(8)
    loader = SlotLoader(dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=1)
    slot, n, labels = next(iter(loader.loader))
    assert isinstance(slot, int) and n == 4 and labels == [0, 1, 2, 0]


def test_a_kept_batch_is_never_overwritten():
    dataset = Numbered(40)
    loader = SlotLoader(
        dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=2, prefetch_factor=2, slots=16
    )
    kept = list(loader)  # 10 batches, all held: 10 of the 16 slots stay taken
    first_row = kept[0][0][0]  # a view of a view still holds its slot
    del kept[0]
    for _ in loader:  # another epoch while they are held
        pass
    assert torch.equal(first_row, torch.zeros(3, 8, 8, dtype=torch.uint8))
    for (images, _labels), indices in zip(kept, batches_of(40, 4)[1:]):
        assert torch.equal(images, expected(indices)[0])


def test_keeping_more_batches_than_there_are_slots_raises_instead_of_overwriting():
    dataset = Numbered(40)
    loader = SlotLoader(
        dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=2, prefetch_factor=2, slots=7
    )
    with pytest.raises(RuntimeError, match="all 7 batch slots are in use"):
        list(loader)


class SlowNumbered(Numbered):
    def __getitem__(self, i):
        time.sleep(0.005)  # so that tasks of the epoch cut short are still being written when the next starts
        return super().__getitem__(i)


def test_an_epoch_cut_short_leaves_no_stale_write_behind():
    dataset = SlowNumbered(64)
    loader = SlotLoader(dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=2)
    for _ in loader:
        break  # workers are still filling the slots of the batches after it
    got = [(images.clone(), labels) for images, labels in loader]
    for (images, labels), indices in zip(got, batches_of(64, 4)):
        assert torch.equal(images, expected(indices)[0]) and torch.equal(labels, expected(indices)[1])


def test_a_sample_of_another_shape_is_named():
    dataset = Numbered(8, bad=5)
    loader = SlotLoader(dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=0)
    with pytest.raises(ValueError, match=r"sample 5 is a torch.uint8 image of shape \(3, 9, 9\)"):
        list(loader)


@pytest.mark.cuda
def test_pinned_batches_are_copies_that_free_their_slot_at_once():
    dataset = Numbered(40)
    loader = SlotLoader(
        dataset, batch_size=4, sampler=SequentialSampler(dataset), num_workers=2, pin_memory=True, slots=6
    )  # 4 in flight + 2: keeping all 10 batches fits only if they are copies
    kept = list(loader)
    assert all(images.is_pinned() for images, _ in kept)
    for (images, _labels), indices in zip(kept, batches_of(40, 4)):
        assert torch.equal(images, expected(indices)[0])
