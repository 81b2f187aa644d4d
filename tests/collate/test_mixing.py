import pickle

import pytest
import torch
from torch.utils.data import DataLoader

from labkit.collate.batching import stack_uint8
from labkit.collate.mixing import CutMixCollate, MixUp, MixUpCollate, mix_batch


@pytest.mark.parametrize("mode", ["mixup", "cutmix"])
def test_mixing_keeps_uint8_and_mixes_labels_consistently(mode, uint8_samples):
    images, labels = stack_uint8(uint8_samples())
    g = torch.Generator().manual_seed(1)
    mixed, soft = mix_batch(images, labels, num_classes=3, mode=mode, alpha=1.0, generator=g)
    assert mixed.dtype == torch.uint8 and mixed.shape == images.shape
    assert soft.shape == (8, 3) and torch.allclose(soft.sum(1), torch.ones(8))
    assert not torch.equal(mixed, images)
    again = mix_batch(images, labels, 3, mode, 1.0, torch.Generator().manual_seed(1))
    assert torch.equal(again[0], mixed) and torch.equal(again[1], soft)


def test_cutmix_label_weight_is_the_pasted_area():
    images = torch.zeros(2, 1, 10, 10, dtype=torch.uint8)
    images[1] = 255
    for seed in range(5):
        mixed, soft = mix_batch(images, torch.tensor([0, 1]), 2, "cutmix", 1.0, torch.Generator().manual_seed(seed))
        pasted = (mixed[0] == 255).float().mean().item()  # share of image 0 now showing image 1
        assert soft[0, 1].item() == pytest.approx(pasted) and soft[0, 0].item() == pytest.approx(1 - pasted)


@pytest.mark.parametrize("collate", [MixUpCollate(3, seed=4), CutMixCollate(3, seed=4)])
def test_mix_collates_pickle_for_workers_and_are_seeded(collate, uint8_samples):
    pickle.loads(pickle.dumps(collate))  # what spawn and forkserver workers need
    data = uint8_samples(16)
    runs = [[b for b in DataLoader(data, batch_size=4, collate_fn=collate, num_workers=2)] for _ in range(2)]
    for (a_img, a_lab), (b_img, b_lab) in zip(*runs):
        assert a_img.dtype == torch.uint8 and torch.equal(a_img, b_img) and torch.equal(a_lab, b_lab)


def test_float_mixup_as_the_seed_does_it(uint8_samples):
    from labkit.collate.batching import stack_samples

    batch = [(img.float() / 255, label) for img, label in uint8_samples(4)]
    images, soft = MixUpCollate(3, seed=0, stack=stack_samples)(batch)
    assert images.dtype == torch.float32 and soft.shape == (4, 3)
    with pytest.raises(TypeError, match="uint8"):
        MixUpCollate(3)(batch)


def test_mixup_is_the_convex_combination_its_labels_claim_and_leaves_the_input_alone():
    images = torch.rand(6, 3, 8, 8)
    before = images.clone()
    mixed, soft = mix_batch(images, torch.arange(6), 6, "mixup", 1.0, torch.Generator().manual_seed(3))
    assert torch.equal(images, before)
    for i in range(6):
        row = soft[i].clone()
        lam = row[i].item()
        row[i] = 0
        partner = int(row.argmax()) if row.max() > 0 else i  # paired with itself: the row is one-hot
        expected = lam * images[i] + (1 - lam) * images[partner] if partner != i else images[i]
        assert torch.allclose(mixed[i], expected, atol=1e-6)


def test_mixup_object_is_mix_batch_with_its_own_seeded_generator(uint8_samples):
    images, labels = stack_uint8(uint8_samples())
    a, b = MixUp(3, alpha=1.0, seed=2), MixUp(3, alpha=1.0, seed=2)
    for _ in range(3):
        mixed, soft = a(images.float(), labels)
        ref = mix_batch(images.float(), labels, 3, "mixup", 1.0, b.generator)
        assert torch.equal(mixed, ref[0]) and torch.equal(soft, ref[1])
    lam, perm = MixUp(3, alpha=1.0, seed=2).draw(8)
    assert 0 <= lam <= 1 and sorted(perm.tolist()) == list(range(8))
    soft = MixUp(3).targets(labels, perm, lam)
    assert torch.allclose(soft.sum(1), torch.ones(8))
    assert torch.allclose(soft[torch.arange(8), labels], torch.where(labels == labels[perm], 1.0, lam))
    with pytest.raises(ValueError, match="alpha"):
        MixUp(3, alpha=0)
