"""Collate functions: a list of samples → one batch, for every shape a sample takes (article section 2.3).

``default_collate`` stacks, so it fails as soon as samples differ in shape: detection targets, sequences, graphs.
These collates handle those shapes, name the sample that does not fit, and keep images uint8 across the worker →
main process boundary (4× less to copy than float32). Mixing a batch (MixUp, CutMix) is `labkit.collate.mixing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import default_collate

from labkit.core.errors import LabkitKeyError, LabkitTypeError, LabkitValueError

Batch = tuple[torch.Tensor, torch.Tensor]


def _shape_error(what: str, shapes: Sequence[tuple[int, ...]]) -> ValueError:
    first = shapes[0]
    k = next(i for i, s in enumerate(shapes) if s != first)
    return LabkitValueError(
        f"{what}: sample 0 has shape {first} but sample {k} has {shapes[k]}; resize them to one "
        "size in the dataset, or use pad_collate / detection_collate for variable sizes"
    )


def _rows_of_one_tensor(images: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """``images`` as one batch tensor when they are consecutive rows of one memory block (a
    batched read's output), without copying; else None."""
    first = images[0]
    if not first.is_contiguous():
        return None
    storage, start, step = first.untyped_storage().data_ptr(), first.storage_offset(), first.numel()
    for k, img in enumerate(images):
        if (
            not img.is_contiguous()
            or img.untyped_storage().data_ptr() != storage
            or img.storage_offset() != start + k * step
        ):
            return None
    return first.as_strided((len(images), *first.shape), (step, *first.stride()), start)


def stack_uint8(batch: Sequence[tuple[torch.Tensor, int]]) -> Batch:
    """(uint8 image, label) samples → (uint8 B×C×H×W, int64 labels), in shared memory in a worker.

    Refuses float images: converting in the worker quadruples what crosses to the main
    process. Convert and normalise on the device (`labkit.device.transfer`). Samples that are
    already the rows of one batch tensor (``__getitems__`` reading into `batch_buffer`) are
    passed on as that tensor, without stacking them into a copy.
    """
    images = [sample[0] for sample in batch]
    bad = next((k for k, img in enumerate(images) if img.dtype != torch.uint8), None)
    if bad is not None:
        raise LabkitTypeError(
            f"stack_uint8: sample {bad} is {images[bad].dtype}, not uint8; keep images uint8 in "
            "workers and normalise on the device (labkit.device.transfer.DevicePrefetcher)"
        )
    shapes = [tuple(img.shape) for img in images]
    if len(set(shapes)) > 1:
        raise _shape_error("stack_uint8", shapes)
    stacked = _rows_of_one_tensor(images)
    return (
        default_collate(images) if stacked is None else stacked,
        torch.tensor([int(sample[1]) for sample in batch], dtype=torch.int64),
    )


def stack_samples(batch: Sequence[tuple[torch.Tensor, int]]) -> Batch:
    """(image, label) samples of any dtype → (stacked images, int64 labels): default_collate, named.

    What a DataLoader does by default; the article's versions 1–4 send float images this way.
    """
    shapes = [tuple(sample[0].shape) for sample in batch]
    if len(set(shapes)) > 1:
        raise _shape_error("stack_samples", shapes)
    return default_collate([s[0] for s in batch]), torch.tensor([int(s[1]) for s in batch], dtype=torch.int64)


def list_collate(batch: Sequence[tuple[Any, int]]) -> tuple[list[Any], torch.Tensor]:
    """(item, label) samples of varying sizes (encoded files, say) → (list of items, int64 labels)."""
    return [sample[0] for sample in batch], torch.tensor([int(sample[1]) for sample in batch], dtype=torch.int64)


def detection_collate(
    batch: Sequence[tuple[torch.Tensor, dict[str, torch.Tensor]]],
) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
    """(image, {"boxes": N×4, "labels": N}) samples → (list of images, list of targets).

    Images of different sizes and different numbers of boxes stay separate, which is what
    torchvision's detection models take.
    """
    images, targets = [], []
    for k, (image, target) in enumerate(batch):
        boxes, labels = target.get("boxes"), target.get("labels")
        if boxes is None or labels is None:
            raise LabkitKeyError(
                f"detection_collate: sample {k}'s target needs 'boxes' and 'labels', has {sorted(target)}"
            )
        boxes = (
            torch.as_tensor(boxes, dtype=torch.float32).reshape(-1, 4) if len(boxes) == 0 else torch.as_tensor(boxes)
        )
        if boxes.ndim != 2 or boxes.shape[1] != 4 or len(labels) != len(boxes):
            raise LabkitValueError(
                f"detection_collate: sample {k} has boxes {tuple(boxes.shape)} and {len(labels)} labels; "
                "expected N×4 boxes and N labels"
            )
        images.append(image)
        targets.append({**target, "boxes": boxes, "labels": torch.as_tensor(labels, dtype=torch.int64)})
    return images, targets


def pad_collate(batch: Sequence[Any], padding_value: float = 0) -> dict[str, torch.Tensor]:
    """Variable-length sequences (L_i × ...) → padded B×L_max×..., lengths and a True-where-real mask.

    Samples are tensors, or (tensor, label) pairs; labels are then stacked under "labels".
    """
    has_labels = isinstance(batch[0], (tuple, list))
    sequences = [torch.as_tensor(s[0] if has_labels else s) for s in batch]
    tails = [tuple(s.shape[1:]) for s in sequences]
    if len(set(tails)) > 1:
        raise _shape_error("pad_collate (all but the first dimension must match)", tails)
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.int64)
    padded = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=padding_value)
    mask = torch.arange(padded.shape[1])[None, :] < lengths[:, None]
    out = {"padded": padded, "lengths": lengths, "mask": mask}
    if has_labels:
        out["labels"] = default_collate([s[1] for s in batch])
    return out


def graph_collate(batch: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Small graphs {"x": N_i×F, "edge_index": 2×E_i, "y": label} → one disjoint-union graph.

    Node features are concatenated, edge indices shifted by each graph's first node, and
    ``batch[n]`` says which graph node n came from (the layout PyTorch Geometric uses).
    """
    xs, edges, ys, owner = [], [], [], []
    first_node = 0
    for k, graph in enumerate(batch):
        x, edge_index = torch.as_tensor(graph["x"]), torch.as_tensor(graph["edge_index"], dtype=torch.int64)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise LabkitValueError(f"graph_collate: sample {k}'s edge_index is {tuple(edge_index.shape)}, expected 2×E")
        if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= len(x)):
            raise LabkitValueError(f"graph_collate: sample {k} has an edge to a node outside its {len(x)} nodes")
        xs.append(x)
        edges.append(edge_index + first_node)
        owner.append(torch.full((len(x),), k, dtype=torch.int64))
        if "y" in graph:
            ys.append(graph["y"])
        first_node += len(x)
    out = {
        "x": torch.cat(xs),
        "edge_index": torch.cat(edges, dim=1),
        "batch": torch.cat(owner),
        "num_graphs": torch.tensor(len(batch)),
    }
    if ys:
        out["y"] = default_collate(ys)
    return out
