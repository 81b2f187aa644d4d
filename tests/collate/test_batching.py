import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from labkit.collate.batching import detection_collate, graph_collate, pad_collate, stack_uint8
from labkit.core.host_buffers import batch_buffer


def test_stack_uint8_keeps_dtype_and_labels(uint8_samples):
    images, labels = stack_uint8(uint8_samples())
    assert images.shape == (8, 3, 16, 16) and images.dtype == torch.uint8
    assert labels.tolist() == [0, 1, 2, 0, 1, 2, 0, 1] and labels.dtype == torch.int64


def test_stack_uint8_refuses_float_and_names_mismatched_sample(uint8_samples):
    batch = uint8_samples(3)
    with pytest.raises(TypeError, match="sample 1 is torch.float32"):
        stack_uint8([batch[0], (batch[1][0].float(), 0)])
    with pytest.raises(ValueError, match="sample 2 has"):
        stack_uint8(batch[:2] + [(torch.zeros(3, 8, 8, dtype=torch.uint8), 0)])


def _detection_batch():
    return [
        (torch.zeros(3, 20, 30), {"boxes": torch.tensor([[1.0, 2, 10, 12]]), "labels": torch.tensor([4])}),
        (
            torch.zeros(3, 25, 15),
            {"boxes": torch.tensor([[0.0, 0, 5, 5], [2, 2, 9, 9]]), "labels": torch.tensor([1, 2])},
        ),
        (torch.zeros(3, 10, 10), {"boxes": torch.zeros(0, 4), "labels": torch.zeros(0)}),
    ]


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
    graphs = [
        {"x": torch.ones(3, 2), "edge_index": torch.tensor([[0, 1], [1, 2]]), "y": 0},
        {"x": torch.zeros(2, 2), "edge_index": torch.tensor([[0], [1]]), "y": 1},
    ]
    with pytest.raises(RuntimeError):
        default_collate(graphs)
    out = graph_collate(graphs)
    assert out["x"].shape == (5, 2) and out["batch"].tolist() == [0, 0, 0, 1, 1]
    assert out["edge_index"].tolist() == [[0, 1, 3], [1, 2, 4]] and out["y"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="sample 0"):
        graph_collate([{"x": torch.ones(2, 2), "edge_index": torch.tensor([[0], [5]])}])


def test_stack_uint8_passes_a_batched_read_through_and_copies_anything_else():
    base = torch.arange(4 * 12, dtype=torch.uint8).view(4, 3, 2, 2)
    rows = [(img, k) for k, img in enumerate(base)]
    for samples in (rows, rows[1:]):  # consecutive rows of one block: already a batch
        passed = stack_uint8(samples)[0]
        assert passed.data_ptr() == samples[0][0].data_ptr() and torch.equal(passed, base[4 - len(samples) :])
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
