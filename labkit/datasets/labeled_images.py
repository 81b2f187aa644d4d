"""What every labkit image dataset is (article section 2.1), and the few things a storage kind must say.

All share one interface, so a lab swaps storage without touching anything else:
``len(ds)``, ``ds[i] -> (uint8 C×H×W tensor, int label)``, ``ds.__getitems__(indices)``
(batched reads, in storage order), ``ds.labels`` (numpy int64), ``ds.classes``.

What they guarantee beyond ``torchvision.datasets.ImageFolder``:

* Paths and index tables live in numpy arrays (`labkit.core.string_table.StringTable`), so worker
  memory does not creep up epoch after epoch through copy-on-write of Python objects.
* A sample that cannot be read raises `SampleError` naming its index and path. With
  ``on_error="skip"`` a readable sample is returned in its place, and ``ds.skipped`` lists each
  broken sample once, with how many times it was substituted — gathered from every DataLoader
  worker, not just the main process.
* Images come out as uint8; float conversion and normalisation belong on the device.
* ``crop=RandomResizedCrop(224)`` (`labkit.decode.random_crop`) gives the training pipeline: each
  sample's random-resized crop and flip drawn from (seed, epoch, index) and taken inside the decode, or from the
  stored array (a decoded pack). The epoch is the one the batch was drawn for, from the fetch's
  `labkit.core.epoch_index.epoch_scope` (`make_loader` opens it in every worker, persistent ones included), else
  from `LabeledImageDataset.set_epoch` (which reaches workers only as they start).

A storage kind is one reader and one small subclass: it sets ``labels``, ``classes`` and ``size`` and says how to
read a sample (``read_raw``), decode it (``decode_raw``, ``crop_raw``), name it (``sample_path``) and, where the
storage can, read a batch at once (``batch_sources``, ``read_stored_batch``). The thread pool, the skip policy and
its log, and the batch's shared memory belong to the engine (`labkit.datasets.batch_engine`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.datasets.batch_engine import BatchEngine
from labkit.datasets.sample_errors import SkipRecord
from labkit.decode.batch_crop import ShareCropper, Source
from labkit.decode.center_crop import CenterCrop
from labkit.decode.decoder_contract import Size, target_hw
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.registry import crops_in_decode

#: A crop found before the decode: random-resized for training, central for evaluation.
Crop = RandomResizedCrop | CenterCrop
#: One sample as a dataset hands it out: the image (after the transform) and its class index.
Sample = tuple[Any, int]


def output_hw(size: Size, default: Size, crop: Crop | None) -> tuple[int, int] | None:
    """The size a dataset's samples come out at: ``size``, or the crop's own, never both without a word."""
    if crop is None:
        return target_hw(size)
    if size != default:
        raise LabkitValueError(
            f"size={size!r} and crop={crop!r}: the crop's size ({crop.size}) is the output; "
            "leave size= out (or give the crop the size you want)"
        )
    return crop.output_hw


def crop_note(crop: Crop | None, decoder: str) -> str:
    """How a dataset's repr says what its crop does: ``", random-resized crops inside the decode"``; "" with none."""
    if crop is None:
        return ""
    where = "inside the decode" if crops_in_decode(decoder) else "after a full decode"
    kind = "centre crops" if isinstance(crop, CenterCrop) else "random-resized crops"
    return f", {kind} {where}"


def class_labels(labels: Sequence[Any], classes: Sequence[str] | None, where: str) -> tuple[np.ndarray, list[str]]:
    """Labels as class indices, and the class names: names are looked up in ``classes`` (sorted, as an
    ImageFolder's, when not given); indices must be below ``len(classes)`` (default: the largest + 1)."""
    if len(labels) and isinstance(labels[0], str):
        names = sorted(set(labels)) if classes is None else [str(c) for c in classes]
        position = {name: k for k, name in enumerate(names)}
        unknown = next((y for y in labels if y not in position), None)
        if unknown is not None:
            raise LabkitValueError(
                f"{where}: label {unknown!r} is not one of the classes {names[:10]}: add it to "
                "classes=, or fix the label"
            )
        return np.fromiter((position[y] for y in labels), np.int64, len(labels)), names
    try:
        indices = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise LabkitTypeError(
            f"{where}: labels must be class indices (ints) or class names (strings), not {type(labels[0]).__name__}"
        ) from None
    names = (
        [str(c) for c in classes] if classes is not None else [str(k) for k in range(int(indices.max(initial=-1)) + 1)]
    )
    bad = np.flatnonzero((indices < 0) | (indices >= len(names)))
    if len(bad):
        raise LabkitValueError(
            f"{where}: sample {int(bad[0])} has label {int(indices[bad[0]])}, outside the "
            f"{len(names)} classes: labels are 0..{len(names) - 1}"
        )
    return indices, names


class LabeledImageDataset(Dataset):
    """The shared behaviour of labkit's image datasets: indexing, labels, errors and skips, and batches
    decoded by threads straight into one tensor, all through the dataset's `BatchEngine` (``engine``)."""

    labels: np.ndarray
    classes: list[str]
    size: tuple[int, int] | None = None  #: every image's (height, width); None where they differ
    fills_batches = False  #: whether `__getitems__` can decode a batch into one tensor (images of one shape)
    max_pixels: int  #: the largest image a decoder accepts (datasets that decode set it)

    def __init__(
        self,
        transform: Callable[[torch.Tensor], Any] | None,
        on_error: str,
        crop: Crop | None = None,
        decode_threads: int | None = None,
    ) -> None:
        self.engine = BatchEngine(on_error, decode_threads)
        if crop is not None and not isinstance(crop, (RandomResizedCrop, CenterCrop)):
            raise LabkitTypeError(
                f"crop={crop!r}: pass a labkit RandomResizedCrop (training) or CenterCrop "
                "(evaluation), whose box is found before the decode; a torchvision transform goes "
                "in transform="
            )
        self.transform = transform
        self.crop = crop
        self.epoch = 0  # the epoch of an index fetched outside any epoch scope

    @property
    def on_error(self) -> str:
        """``"raise"`` (a `SampleError` naming the sample) or ``"skip"`` (a substitute, recorded in `skipped`)."""
        return self.engine.on_error

    @property
    def decode_threads(self) -> int | None:
        """Threads that decode a batch in each process that fetches one; None: its share of the cores."""
        return self.engine.threads

    @decode_threads.setter
    def decode_threads(self, threads: int | None) -> None:
        self.engine.threads = threads

    # What a storage kind says. Read and decode are separate so that a profiler can time them apart
    # (labkit.measure.step_profile).
    def read_raw(self, index: int) -> Any:
        """Sample ``index`` as stored: encoded bytes, or a decoded array."""
        raise NotImplementedError

    def decode_raw(self, raw: Any) -> torch.Tensor:
        """What `read_raw` returned → uint8 C×H×W image."""
        raise NotImplementedError

    def crop_raw(self, raw: Any, index: int, epoch: int) -> torch.Tensor:
        """What `read_raw` returned → sample ``index``'s random-resized crop in ``epoch`` (``self.crop``)."""
        raise LabkitTypeError(f"{type(self).__name__} does not decode, so it cannot crop: crop on the device")

    def sample_path(self, index: int) -> str:
        """Where sample ``index`` comes from, for error messages and reports."""
        raise NotImplementedError

    def batch_sources(self, indices: np.ndarray) -> list[Source] | None:
        """Samples ``indices`` (checked) for a batch, in one call: their bytes where the storage reads a batch at once
        (a pack: one slice of its offsets, every checksum checked), or their files' paths, each read by the thread
        that decodes it (the reads then overlap); None where the storage has neither (one `read_raw` a sample)."""
        return None

    def read_stored_batch(self, indices: np.ndarray, batch: torch.Tensor) -> bool:
        """Samples ``indices``' stored pixels copied straight into the rows of ``batch``, where the storage holds
        them decoded at the output size (a decoded pack, no crop); False where they must be decoded."""
        return False

    def storage_order(self, indices: list[int]) -> np.ndarray:
        """A key that sorts ``indices`` into the order the storage holds them (a batch is read in that order)."""
        return np.asarray(indices)

    @property
    def crop_share(self) -> ShareCropper | None:
        """The decoder's own loop over a share of a batch (`labkit.decode.batch_crop`), or None (a call a sample)."""
        return None

    def load_raw(self, raw: Any, index: int, epoch: int) -> torch.Tensor:
        """What `read_raw` returned → sample ``index``'s image: decoded, or its crop in ``epoch``."""
        return self.decode_raw(raw) if self.crop is None else self.crop_raw(raw, index, epoch)

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose crops indices fetched outside an epoch scope draw. Workers see it only when they start
        (persistent workers never again): `labkit.workers.loader_factory.make_loader` hands every worker the
        epoch with each batch instead (`labkit.datasets.epoch_scoped`)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Sample:
        return self.engine.sample(self, index)

    def __getitems__(self, indices: Sequence[int], out: torch.Tensor | None = None) -> list[Sample]:
        """A batch of samples, read in storage order (better locality), returned in the order asked
        (`labkit.datasets.batch_engine.BatchEngine.batch`): where every image has one shape and there is no
        ``transform``, the rows of one uint8 tensor, ``out`` if given (a batch slot: `labkit.workers.shared_slots`)."""
        return self.engine.batch(self, indices, out)

    @property
    def skipped(self) -> list[SkipRecord]:
        """The running total under ``on_error="skip"``: each broken sample found so far (by any process,
        in any epoch, since the dataset was made or `clear_skipped`), once, with its substitutions added up.

        For one epoch's report, take ``mark = ds.skip_mark()`` before the epoch and call
        ``ds.skipped_since(mark)`` after it.
        """
        return self.engine.skipped_since(0)

    def skip_mark(self) -> int:
        """A point in the skip log; `skipped_since` reports only what happened after it."""
        return self.engine.skip_mark()

    def skipped_since(self, mark: int) -> list[SkipRecord]:
        """Broken samples met after ``mark`` (from `skip_mark`), once each, with the substitutions made since."""
        return self.engine.skipped_since(mark)

    def clear_skipped(self) -> None:
        """Empty the report. Processes still remember which samples they found broken."""
        self.engine.clear_skipped()
