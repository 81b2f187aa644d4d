import pickle

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from labkit.collate.collate_fns import (CutMixCollate, MixUp, MixUpCollate, detection_collate, graph_collate, mix_batch,
                                        pad_collate, stack_uint8)
from labkit.core.host_buffers import batch_buffer


def _images(n=8, size=(3, 16, 16)):
    g = torch.Generator().manual_seed(0)
    return [(torch.randint(0, 256, size, dtype=torch.uint8, generator=g), k % 3) for k in range(n)]


def test_stack_uint8_keeps_dtype_and_labels():
    images, labels = stack_uint8(_images())
    assert images.shape == (8, 3, 16, 16) and images.dtype == torch.uint8
    assert labels.tolist() == [0, 1, 2, 0, 1, 2, 0, 1] and labels.dtype == torch.int64


def test_stack_uint8_refuses_float_and_names_mismatched_sample():
    batch = _images(3)
    with pytest.raises(TypeError, match="sample 1 is torch.float32"):
        stack_uint8([batch[0], (batch[1][0].float(), 0)])
    with pytest.raises(ValueError, match="sample 2 has"):
        stack_uint8(batch[:2] + [(torch.zeros(3, 8, 8, dtype=torch.uint8), 0)])


def _detection_batch():
    return [(torch.zeros(3, 20, 30), {"boxes": torch.tensor([[1.0, 2, 10, 12]]), "labels": torch.tensor([4])}),
            (torch.zeros(3, 25, 15), {"boxes": torch.tensor([[0.0, 0, 5, 5], [2, 2, 9, 9]]),
                                      "labels": torch.tensor([1, 2])}),
            (torch.zeros(3, 10, 10), {"boxes": torch.zeros(0, 4), "labels": torch.zeros(0)})]


def test_default_collate_fails_on_detection_and_ours_keeps_each_sample():
    with pytest.raises(RuntimeError):
        default_collate(_detection_batch())
    images, targets = detection_collate(_detection_batch())
    assert [tuple(i.shape) for i in images] == [(3, 20, 30), (3, 25, 15), (3, 10, 10)]
    assert [len(t["boxes"]) for t in targets] == [1, 2, 0] and targets[2]["labels"].dtype == torch.int64


def test_detection_collate_names_bad_sample():
    bad = _detection_batch()
    bad[1][1]["labels"] = torch.tensor([1])
    with pytest.raises(ValueError, match="sample 1"):
        detection_collate(bad)


def test_pad_collate_pads_and_masks():
    batch = [(torch.arange(3), 0), (torch.arange(5), 1), (torch.arange(1), 2)]
    with pytest.raises(RuntimeError):
        default_collate(batch)
    out = pad_collate(batch, padding_value=-1)
    assert out["padded"].shape == (3, 5) and out["lengths"].tolist() == [3, 5, 1]
    assert out["padded"][2].tolist() == [0, -1, -1, -1, -1]
    assert out["mask"].sum(1).tolist() == [3, 5, 1] and out["labels"].tolist() == [0, 1, 2]
    features = pad_collate([torch.ones(2, 4), torch.ones(3, 4)])
    assert features["padded"].shape == (2, 3, 4)
    with pytest.raises(ValueError, match="sample 1"):
        pad_collate([torch.ones(2, 4), torch.ones(3, 5)])


def test_graph_collate_builds_a_disjoint_union():
    graphs = [{"x": torch.ones(3, 2), "edge_index": torch.tensor([[0, 1], [1, 2]]), "y": 0},
              {"x": torch.zeros(2, 2), "edge_index": torch.tensor([[0], [1]]), "y": 1}]
    with pytest.raises(RuntimeError):
        default_collate(graphs)
    out = graph_collate(graphs)
    assert out["x"].shape == (5, 2) and out["batch"].tolist() == [0, 0, 0, 1, 1]
    assert out["edge_index"].tolist() == [[0, 1, 3], [1, 2, 4]] and out["y"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="sample 0"):
        graph_collate([{"x": torch.ones(2, 2), "edge_index": torch.tensor([[0], [5]])}])


@pytest.mark.parametrize("mode", ["mixup", "cutmix"])
def test_mixing_keeps_uint8_and_mixes_labels_consistently(mode):
    images, labels = stack_uint8(_images())
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
def test_mix_collates_pickle_for_workers_and_are_seeded(collate):
    pickle.loads(pickle.dumps(collate))  # what spawn and forkserver workers need
    data = _images(16)
    runs = [[b for b in DataLoader(data, batch_size=4, collate_fn=collate, num_workers=2)] for _ in range(2)]
    for (a_img, a_lab), (b_img, b_lab) in zip(*runs):
        assert a_img.dtype == torch.uint8 and torch.equal(a_img, b_img) and torch.equal(a_lab, b_lab)


def test_float_mixup_as_the_seed_does_it():
    from labkit.collate.collate_fns import stack_samples

    batch = [(img.float() / 255, label) for img, label in _images(4)]
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


def test_stack_uint8_passes_a_batched_read_through_and_copies_anything_else():
    base = torch.arange(4 * 12, dtype=torch.uint8).view(4, 3, 2, 2)
    rows = [(img, k) for k, img in enumerate(base)]
    for samples in (rows, rows[1:]):  # consecutive rows of one block: already a batch
        passed = stack_uint8(samples)[0]
        assert passed.data_ptr() == samples[0][0].data_ptr() and torch.equal(passed, base[4 - len(samples):])
    for samples in (rows[::-1], rows[::2], [(img.clone(), k) for img, k in rows]):
        stacked = stack_uint8(samples)[0]
        assert stacked.data_ptr() != base.data_ptr() and torch.equal(stacked, torch.stack([s[0] for s in samples]))


class _SharedProbe(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return batch_buffer((2, 3)).is_shared()


def test_batch_buffer_is_in_shared_memory_only_inside_workers():
    assert not batch_buffer((2, 3)).is_shared()
    assert list(DataLoader(_SharedProbe(), batch_size=None, num_workers=1)) == [True, True]


def test_mixup_object_is_mix_batch_with_its_own_seeded_generator():
    images, labels = stack_uint8(_images())
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
