"""The one path every labkit image dataset's samples take, alone or a batch at a time.

A dataset says what a record is and how to read it (`labkit.datasets.labeled_images.LabeledImageDataset`'s hooks);
the engine does the rest, the same for every storage kind:

* **a batch planned once**: its indices checked and put in storage order, their epochs
  (`labkit.core.epoch_index`), and every crop's random draws made for the whole batch
  (`labkit.decode.crop_box.counter_uniforms`), so they depend on neither batch size, worker count nor thread order;
* **read once**: one call into the storage for the batch (``batch_sources``), or the stored pixels copied straight
  into the batch (``read_stored_batch``, a decoded pack);
* **decoded by threads** (`labkit.datasets.batch_decode.BatchDecoder`) into the rows of one uint8 tensor — a batch
  slot in shared memory where the loader gives one (``out``), else `labkit.core.host_buffers.batch_buffer` — by the
  decoder's own loop over each thread's share where it has one (``crop_share``), else one call a sample;
* **a sample that fails** fetched again on its own, so it is named in a `SampleError`, or substituted and recorded
  under ``on_error="skip"`` (`labkit.datasets.skip_policy`), exactly as ``ds[i]`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from labkit.core.epoch_index import epoch_of, epochs_of
from labkit.core.errors import LabkitIndexError
from labkit.core.indices import wrap_indices
from labkit.datasets.batch_decode import BatchDecoder, batch_tensor
from labkit.datasets.sample_errors import LOAD_ERRORS, SampleError, SkipRecord, check_on_error
from labkit.datasets.skip_policy import SkipPolicy
from labkit.decode.batch_crop import BoxesFor
from labkit.decode.crop_box import whole_images

if TYPE_CHECKING:
    from labkit.datasets.labeled_images import LabeledImageDataset, Sample


class BatchEngine:
    """Fetches a dataset's samples: its decode threads (``threads``), its ``on_error`` policy and the skip log."""

    def __init__(self, on_error: str = "raise", threads: int | None = None) -> None:
        check_on_error(on_error)
        self.on_error = on_error
        self.skips = SkipPolicy() if on_error == "skip" else None
        self.decoder = BatchDecoder(threads)

    def __repr__(self) -> str:
        return (
            f"BatchEngine(on_error={self.on_error!r}, threads={self.threads if self.threads is not None else 'auto'})"
        )

    @property
    def threads(self) -> int | None:
        """Threads that decode a batch in each process that fetches one; None: its share of the cores."""
        return self.decoder.threads

    @threads.setter
    def threads(self, threads: int | None) -> None:
        self.decoder.threads = threads

    @staticmethod
    def check_index(dataset: LabeledImageDataset, index: int) -> int:
        """``index`` (negative from the end) as a position in ``dataset``; a clear error where it is out of range."""
        n = len(dataset)
        if not -n <= index < n:
            raise LabkitIndexError(f"sample index {index} out of range for a dataset of {n} samples")
        return int(index) % n

    def check_indices(self, dataset: LabeledImageDataset, indices: Sequence[int]) -> list[int]:
        """`check_index` of a whole batch, at once."""
        return wrap_indices(indices, len(dataset), lambda i: self.check_index(dataset, i)).tolist()

    def load(self, dataset: LabeledImageDataset, index: int, epoch: int) -> Sample:
        """Sample ``index`` (checked) in ``epoch`` through the dataset's transform, with its label; a `SampleError`
        naming it where it cannot be read or decoded."""
        try:
            image = dataset.load_raw(dataset.read_raw(index), index, epoch)
        except LOAD_ERRORS as e:
            path = dataset.sample_path(index)
            raise SampleError(
                f"sample {index} ({path!r}): {e}. Remove or replace the file, or pass on_error='skip' "
                "to substitute another sample and record it in .skipped",
                index,
                path,
            ) from e
        if dataset.transform is not None:
            image = dataset.transform(image)
        return image, int(dataset.labels[index])

    def sample(self, dataset: LabeledImageDataset, index: int) -> Sample:
        """``dataset[index]``: in the epoch of the fetch's scope (else the dataset's), substituted under ``skip``."""
        epoch = epoch_of(index, dataset.epoch)
        index = self.check_index(dataset, index)
        if self.skips is None:
            return self.load(dataset, index, epoch)
        return self.skips.fetch(index, len(dataset), lambda i: self.load(dataset, i, epoch), dataset.sample_path)

    def batch(
        self, dataset: LabeledImageDataset, indices: Sequence[int], out: torch.Tensor | None = None
    ) -> list[Sample]:
        """``dataset.__getitems__(indices)``: samples in the order asked, read in storage order; the images the rows of
        one uint8 tensor (``out`` where given) where every image has one shape and there is no ``transform``."""
        checked = self.check_indices(dataset, indices)
        order = np.argsort(dataset.storage_order(checked), kind="stable").tolist()
        if not (dataset.fills_batches and dataset.transform is None and dataset.size is not None and checked):
            samples: list[Sample] = [None] * len(checked)  # type: ignore[list-item]
            for k in order:
                samples[k] = self.sample(dataset, indices[k])  # as it came, in this thread's epoch scope
            return samples
        batch = batch_tensor(len(checked), (3, *dataset.size), out)
        rows = np.asarray(checked, dtype=np.int64)
        labels = [int(dataset.labels[i]) for i in checked]
        if dataset.crop is None:
            try:
                if dataset.read_stored_batch(rows, batch):
                    return list(zip(batch, labels))
            except LOAD_ERRORS:  # one cannot be read: each is read again below, so that one is named or skipped
                pass
        epochs = np.asarray(epochs_of(indices, dataset.epoch), dtype=np.int64)
        for k in self._decode_rows(dataset, batch, order, rows, epochs):
            image, labels[k] = self.sample(dataset, indices[k])  # raises SampleError naming it, or its substitute
            batch[k].copy_(image)
        return list(zip(batch, labels))

    def _decode_rows(
        self, dataset: LabeledImageDataset, batch: torch.Tensor, order: list[int], rows: np.ndarray, epochs: np.ndarray
    ) -> list[int]:
        """Rows ``order`` of ``batch`` decoded from samples ``rows`` in ``epochs``: read once, decoded by each thread's
        share; the rows that failed."""
        try:
            sources = dataset.batch_sources(rows)
        except LOAD_ERRORS:  # one cannot be read: each is read again on its own, so that one is named or skipped
            sources = None
        crop_share = dataset.crop_share if sources is not None else None
        if crop_share is not None:
            left = self.decoder.crop_rows(
                batch, order, sources, self._boxes_for(dataset, rows, epochs), crop_share, dataset.max_pixels
            )
            failed, apart = left.failed, left.handed_back
        else:
            failed, apart = [], order
        if not apart:
            return failed

        def load(k: int) -> torch.Tensor:
            source = None if sources is None else sources[k]
            index = int(rows[k])
            raw = dataset.read_raw(index) if source is None or isinstance(source, str) else source
            return dataset.load_raw(raw, index, int(epochs[k]))

        return sorted(failed + self.decoder.load_rows(batch, apart, load, LOAD_ERRORS))

    @staticmethod
    def _boxes_for(dataset: LabeledImageDataset, rows: np.ndarray, epochs: np.ndarray) -> BoxesFor:
        """The batch's plan for a share of it: its rows' crop boxes (or whole images, for a plain resize), drawn
        together from their indices and epochs."""
        crop = dataset.crop
        if crop is None:
            return lambda share, image_hw: whole_images(image_hw)
        return lambda share, image_hw: crop.draw_many(image_hw, rows[share], epochs[share])

    def skipped_since(self, mark: int) -> list[SkipRecord]:
        """Broken samples met after ``mark`` (from `skip_mark`); none where ``on_error`` is not ``skip``."""
        return self.skips.since(mark) if self.skips is not None else []

    def skip_mark(self) -> int:
        """A point in the skip log; `skipped_since` reports only what happened after it."""
        return self.skips.mark() if self.skips is not None else 0

    def clear_skipped(self) -> None:
        """Empty the skip log. Processes still remember which samples they found broken."""
        if self.skips is not None:
            self.skips.clear()
