"""collate functions: a list of samples → one batch (seed sections 2.3 and 5.4).

``default_collate`` stacks, so it fails as soon as samples differ in shape: detection
targets, sequences, graphs. These collates handle those shapes, keep images uint8 across
the worker → main process boundary (4× less to copy than float32), and mix batches
(MixUp, CutMix) where the seed puts augmentation: in collate, with the whole batch in view.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from labkit.core.errors import LabkitKeyError, LabkitTypeError, LabkitValueError
from labkit.core.host_buffers import HostBuffers

Batch = Tuple[torch.Tensor, torch.Tensor]


def _shape_error(what: str, shapes: Sequence[Tuple[int, ...]]) -> ValueError:
    first = shapes[0]
    k = next(i for i, s in enumerate(shapes) if s != first)
    return LabkitValueError(f"{what}: sample 0 has shape {first} but sample {k} has {shapes[k]}; resize them to one "
                      "size in the dataset, or use pad_collate / detection_collate for variable sizes")


def _rows_of_one_tensor(images: Sequence[torch.Tensor]) -> Optional[torch.Tensor]:
    """``images`` as one batch tensor when they are consecutive rows of one memory block (a
    batched read's output), without copying; else None."""
    first = images[0]
    if not first.is_contiguous():
        return None
    storage, start, step = first.untyped_storage().data_ptr(), first.storage_offset(), first.numel()
    for k, img in enumerate(images):
        if (not img.is_contiguous() or img.untyped_storage().data_ptr() != storage
                or img.storage_offset() != start + k * step):
            return None
    return first.as_strided((len(images), *first.shape), (step, *first.stride()), start)


def stack_uint8(batch: Sequence[Tuple[torch.Tensor, int]]) -> Batch:
    """(uint8 image, label) samples → (uint8 B×C×H×W, int64 labels), in shared memory in a worker.

    Refuses float images: converting in the worker quadruples what crosses to the main
    process. Convert and normalise on the device (`labkit.device.transfer`). Samples that are
    already the rows of one batch tensor (``__getitems__`` reading into `batch_buffer`) are
    passed on as that tensor, without stacking them into a copy.
    """
    images = [sample[0] for sample in batch]
    bad = next((k for k, img in enumerate(images) if img.dtype != torch.uint8), None)
    if bad is not None:
        raise LabkitTypeError(f"stack_uint8: sample {bad} is {images[bad].dtype}, not uint8; keep images uint8 in "
                        "workers and normalise on the device (labkit.device.transfer.DevicePrefetcher)")
    shapes = [tuple(img.shape) for img in images]
    if len(set(shapes)) > 1:
        raise _shape_error("stack_uint8", shapes)
    stacked = _rows_of_one_tensor(images)
    return (default_collate(images) if stacked is None else stacked,
            torch.tensor([int(sample[1]) for sample in batch], dtype=torch.int64))


def stack_samples(batch: Sequence[Tuple[torch.Tensor, int]]) -> Batch:
    """(image, label) samples of any dtype → (stacked images, int64 labels): default_collate, named.

    What a DataLoader does by default; the seed's versions 1–4 send float images this way.
    """
    shapes = [tuple(sample[0].shape) for sample in batch]
    if len(set(shapes)) > 1:
        raise _shape_error("stack_samples", shapes)
    return default_collate([s[0] for s in batch]), torch.tensor([int(s[1]) for s in batch], dtype=torch.int64)


def list_collate(batch: Sequence[Tuple[Any, int]]) -> Tuple[List[Any], torch.Tensor]:
    """(item, label) samples of varying sizes (encoded files, say) → (list of items, int64 labels)."""
    return [sample[0] for sample in batch], torch.tensor([int(sample[1]) for sample in batch], dtype=torch.int64)


def detection_collate(batch: Sequence[Tuple[torch.Tensor, Dict[str, torch.Tensor]]]
                      ) -> Tuple[List[torch.Tensor], List[Dict[str, torch.Tensor]]]:
    """(image, {"boxes": N×4, "labels": N}) samples → (list of images, list of targets).

    Images of different sizes and different numbers of boxes stay separate, which is what
    torchvision's detection models take.
    """
    images, targets = [], []
    for k, (image, target) in enumerate(batch):
        boxes, labels = target.get("boxes"), target.get("labels")
        if boxes is None or labels is None:
            raise LabkitKeyError(f"detection_collate: sample {k}'s target needs 'boxes' and 'labels', has {sorted(target)}")
        boxes = torch.as_tensor(boxes, dtype=torch.float32).reshape(-1, 4) if len(boxes) == 0 else torch.as_tensor(boxes)
        if boxes.ndim != 2 or boxes.shape[1] != 4 or len(labels) != len(boxes):
            raise LabkitValueError(f"detection_collate: sample {k} has boxes {tuple(boxes.shape)} and {len(labels)} labels; "
                             "expected N×4 boxes and N labels")
        images.append(image)
        targets.append({**target, "boxes": boxes, "labels": torch.as_tensor(labels, dtype=torch.int64)})
    return images, targets


def pad_collate(batch: Sequence[Any], padding_value: float = 0) -> Dict[str, torch.Tensor]:
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


def graph_collate(batch: Sequence[Dict[str, torch.Tensor]]) -> Dict[str, torch.Tensor]:
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
    out = {"x": torch.cat(xs), "edge_index": torch.cat(edges, dim=1), "batch": torch.cat(owner),
           "num_graphs": torch.tensor(len(batch))}
    if ys:
        out["y"] = default_collate(ys)
    return out


# -- batch mixing ----------------------------------------------------------------------------------------

def one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(labels.long(), num_classes).to(torch.float32)


def draw_mix(batch_size: int, alpha: float, generator: torch.Generator) -> Tuple[float, torch.Tensor]:
    """A mixing weight ``lam ~ Beta(alpha, alpha)`` and the partner permutation, as `mix_batch` draws them."""
    lam = float(np.random.default_rng(int(torch.randint(2**62, (1,), generator=generator))).beta(alpha, alpha))
    return lam, torch.randperm(batch_size, generator=generator)


def mixed_targets(labels: torch.Tensor, perm: torch.Tensor, lam: float, num_classes: int) -> torch.Tensor:
    """Soft labels of a mixed batch: ``lam·onehot(y) + (1−lam)·onehot(y[perm])``."""
    targets = one_hot(labels, num_classes)
    return targets * lam + targets[perm.to(targets.device)] * (1 - lam)


def mix_batch(images: torch.Tensor, labels: torch.Tensor, num_classes: int, mode: str = "mixup",
              alpha: float = 0.2, generator: Optional[torch.Generator] = None,
              buffers: Optional[HostBuffers] = None) -> Batch:
    """MixUp or CutMix a batch: images mixed with a shuffled copy, labels become mixed one-hots.

    Works on any device and keeps the image dtype: uint8 images are mixed in float and
    rounded back (at most half a grey level lost), so they can still cross processes as uint8.
    ``buffers``: where a float MixUp writes its result (reused CPU memory, `labkit.core.host_buffers`).
    The input is never modified.
    """
    if mode not in ("mixup", "cutmix"):
        raise LabkitValueError(f"mode must be 'mixup' or 'cutmix', got {mode!r}")
    if generator is None:
        generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,))))
    lam, perm = draw_mix(len(images), alpha, generator)
    perm = perm.to(images.device)
    if mode == "mixup":
        work = images.to(torch.float32) if not images.is_floating_point() else images
        partner = None if buffers is None else buffers.empty(work.shape, work.dtype, work.device)
        mixed = torch.index_select(work, 0, perm, out=partner).lerp_(work, lam)  # lam·x + (1−lam)·x[perm]
        if not images.is_floating_point():
            mixed = mixed.round_().clamp_(0, 255).to(images.dtype)
    else:
        h, w = images.shape[-2:]
        cut_h, cut_w = int(h * math.sqrt(1 - lam)), int(w * math.sqrt(1 - lam))
        cy, cx = (torch.randint(h, (1,), generator=generator).item(), torch.randint(w, (1,), generator=generator).item())
        y0, y1 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, h)
        x0, x1 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, w)
        mixed = images.clone()
        mixed[..., y0:y1, x0:x1] = images.index_select(0, perm)[..., y0:y1, x0:x1]
        lam = 1 - (y1 - y0) * (x1 - x0) / (h * w)
    return mixed, mixed_targets(labels.to(images.device), perm, lam, num_classes)


class MixUp:
    """MixUp of whole batches on the device: the ``mix`` to give `labkit.device.transfer.DevicePrefetcher`.

    Called as ``mixup(images, labels)`` it is `mix_batch` with its own seeded generator.
    The prefetcher recognises it and mixes uint8 batches while normalising them, in one
    pass (normalisation is affine, so mixing before or after it gives the same batch):
    on a 2-core CPU, 12–15 ms a 64×3×256×256 batch against 21–29 ms for normalising and then
    mixing into reused buffers. ``buffers``: where a float MixUp writes.
    """

    def __init__(self, num_classes: int, alpha: float = 0.2, seed: int = 0,
                 buffers: Optional[HostBuffers] = None) -> None:
        if alpha <= 0:
            raise LabkitValueError(f"MixUp alpha must be > 0, got {alpha}")
        self.num_classes, self.alpha, self.buffers = num_classes, alpha, buffers
        self.generator = torch.Generator().manual_seed(seed)

    def draw(self, batch_size: int) -> Tuple[float, torch.Tensor]:
        """The next batch's weight and partner permutation."""
        return draw_mix(batch_size, self.alpha, self.generator)

    def targets(self, labels: torch.Tensor, perm: torch.Tensor, lam: float) -> torch.Tensor:
        return mixed_targets(labels, perm, lam, self.num_classes)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> Batch:
        return mix_batch(images, labels, self.num_classes, "mixup", self.alpha, self.generator, self.buffers)

    def state_dict(self) -> Dict[str, Any]:
        """The generator's place, so that a resumed run mixes the batches it redoes as the first run did."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])


class MixCollate:
    """collate_fn that stacks the batch (`stack_uint8` unless told otherwise), then MixUps or CutMixes it.

    Seeded: batch k of worker w is mixed by a generator seeded with (seed, w, k), so a run
    with the same seed, workers and order mixes the same way.
    """

    def __init__(self, num_classes: int, mode: str = "mixup", alpha: float = 0.2, seed: int = 0,
                 stack: Callable[[Sequence[Tuple[torch.Tensor, int]]], Batch] = stack_uint8) -> None:
        if mode not in ("mixup", "cutmix"):
            raise LabkitValueError(f"mode must be 'mixup' or 'cutmix', got {mode!r}")
        self.num_classes, self.mode, self.alpha, self.seed, self.stack = num_classes, mode, alpha, seed, stack
        self._calls = 0

    def __call__(self, batch: Sequence[Tuple[torch.Tensor, int]]) -> Batch:
        images, labels = self.stack(batch)
        info = get_worker_info()
        generator = torch.Generator().manual_seed(
            int(np.random.default_rng([self.seed, info.id if info else 0, self._calls]).integers(2**62)))
        self._calls += 1
        return mix_batch(images, labels, self.num_classes, self.mode, self.alpha, generator)


class MixUpCollate(MixCollate):
    """MixUp in collate (the seed's version 4 passes ``stack=stack_samples`` for its float images)."""

    def __init__(self, num_classes: int, alpha: float = 0.2, seed: int = 0,
                 stack: Callable[[Sequence[Tuple[torch.Tensor, int]]], Batch] = stack_uint8) -> None:
        super().__init__(num_classes, "mixup", alpha, seed, stack)


class CutMixCollate(MixCollate):
    """CutMix in collate: a box of one image pasted into another, labels mixed by its area."""

    def __init__(self, num_classes: int, alpha: float = 1.0, seed: int = 0) -> None:
        super().__init__(num_classes, "cutmix", alpha, seed)
