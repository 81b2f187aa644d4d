import pickle

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from labkit.collate.batching import detection_collate, graph_collate, pad_collate
from labkit.course.ragged_data import OBJECT_CLASSES, RandomGraphDataset, ShapesDetectionDataset, TokenSequenceDataset


def test_detection_samples_differ_in_size_and_boxes_lie_inside_their_image(encoded_pack):
    ds = ShapesDetectionDataset(encoded_pack, min_side=32, max_side=64, max_objects=3)
    samples = [ds[i] for i in range(len(ds))]
    assert len({tuple(img.shape) for img, _ in samples}) > 1
    assert len({len(t["boxes"]) for _, t in samples}) > 1
    for img, target in samples:
        assert img.dtype == torch.uint8 and img.shape[0] == 3 and 32 <= min(img.shape[1:]) <= max(img.shape[1:]) <= 64
        boxes, labels = target["boxes"], target["labels"]
        assert boxes.shape == (len(labels), 4) and 1 <= len(labels) <= 3
        assert (boxes[:, 2] > boxes[:, 0]).all() and (boxes[:, 3] > boxes[:, 1]).all()
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= img.shape[2]).all() and (boxes[:, 3] <= img.shape[1]).all()
        assert set(labels.tolist()) <= set(range(len(OBJECT_CLASSES)))


def test_detection_box_holds_its_drawn_shape(encoded_pack):
    img, target = ShapesDetectionDataset(encoded_pack, min_side=64, max_side=64, max_objects=1)[0]
    x0, y0, x1, y1 = (int(v) for v in target["boxes"][0])
    label = OBJECT_CLASSES[int(target["labels"][0])]
    centre = img[:, (y0 + y1) // 2, (x0 + x1) // 2]
    expected = {"disk": [240, 240, 240], "box": [20, 20, 20], "triangle": [250, 200, 0]}[label]
    assert centre.tolist() == expected


def test_samples_are_the_same_in_workers_as_in_the_main_process(encoded_pack):
    ds = ShapesDetectionDataset(encoded_pack, min_side=32, max_side=48)
    clone = pickle.loads(pickle.dumps(ds))
    for i in (0, 5):
        assert torch.equal(ds[i][0], clone[i][0]) and torch.equal(ds[i][1]["boxes"], clone[i][1]["boxes"])
    images, targets = next(iter(DataLoader(ds, batch_size=4, num_workers=1, collate_fn=detection_collate)))
    assert [tuple(i.shape) for i in images] == [tuple(ds[k][0].shape) for k in range(4)]
    assert all(torch.equal(t["boxes"], ds[k][1]["boxes"]) for k, t in enumerate(targets))


def test_default_collate_cannot_stack_detection_samples(encoded_pack):
    ds = ShapesDetectionDataset(encoded_pack, min_side=32, max_side=64)
    with pytest.raises(RuntimeError):
        default_collate([ds[i] for i in range(4)])


def test_detection_refuses_a_decoded_pack_and_bad_sizes(encoded_pack, decoded_pack):
    with pytest.raises(ValueError, match="encoded pack"):
        ShapesDetectionDataset(decoded_pack)
    with pytest.raises(ValueError, match="min_side"):
        ShapesDetectionDataset(encoded_pack, min_side=100, max_side=50)
    with pytest.raises(IndexError):
        ShapesDetectionDataset(encoded_pack, n=3)[3]


def test_token_sequences_vary_in_length_and_pad_collate_keeps_them():
    ds = TokenSequenceDataset(n=64, min_len=4, max_len=40, seed=1)
    assert ds.lengths.min() >= 4 and ds.lengths.max() <= 40 and len(set(ds.lengths.tolist())) > 5
    assert all(len(ds[i][0]) == ds.lengths[i] and (ds[i][0] > 0).all() for i in range(64))
    batch = pad_collate([ds[i] for i in range(8)])
    assert batch["lengths"].tolist() == ds.lengths[:8].tolist()
    assert batch["padded"].shape == (8, int(ds.lengths[:8].max()))
    assert torch.equal(batch["padded"][batch["mask"]], torch.cat([ds[i][0] for i in range(8)]))
    assert torch.equal(ds[3][0], TokenSequenceDataset(n=64, min_len=4, max_len=40, seed=1)[3][0])


def test_graphs_vary_in_size_are_undirected_and_collate_into_one():
    ds = RandomGraphDataset(n=16, min_nodes=4, max_nodes=12, features=5)
    graphs = [ds[i] for i in range(16)]
    assert len({len(g["x"]) for g in graphs}) > 1
    for g in graphs:
        e = g["edge_index"]
        assert g["x"].shape[1] == 5 and e.min() >= 0 and e.max() < len(g["x"]) and (e[0] != e[1]).all()
        assert set(map(tuple, e.t().tolist())) == set(map(tuple, e.flip(0).t().tolist()))
    merged = graph_collate(graphs[:3])
    assert merged["x"].shape[0] == sum(len(g["x"]) for g in graphs[:3]) and merged["y"].tolist() == [0, 1, 0]


def test_odd_class_graphs_have_more_edges_per_node():
    ds = RandomGraphDataset(n=200, min_nodes=10, max_nodes=20)
    density = [ds[i]["edge_index"].shape[1] / len(ds[i]["x"]) for i in range(200)]
    assert sum(density[1::2]) / 100 > sum(density[0::2]) / 100 + 0.5
