"""What every labkit sampler is: an order in which samples are read (article sections 2.2, 4.1 and 4.4), resumable.

Every sampler here derives an epoch's whole order from ``(seed, epoch)`` alone, so:

* the order changes every epoch by itself (forgetting ``set_epoch``, which gives seed 6.2's symptom, "shuffle=True
  but every epoch is the same", through ``DistributedSampler`` (4.4), cannot happen; an explicit ``set_epoch``
  still wins);
* its state is three numbers — seed, epoch, position — and resuming from ``state_dict()``
  yields exactly the rest of the epoch, however many DataLoader workers either run used;
* it plugs into torchdata's ``StatefulDataLoader``, which calls ``state_dict()`` at the right
  moment itself.

With a plain ``DataLoader`` and workers, the loader pulls indices ahead of your loop
(``prefetch_factor × num_workers`` batches), so pass what the loop really consumed:
``sampler.state_dict(consumed=steps_done * batch_size)``.

The orders, one module per family (as FFCV's ``traversal_order/``): `labkit.samplers.every_sample` (a random
permutation, a random offset, in order), `labkit.samplers.block_shuffle` (locality-aware, and split across ranks),
`labkit.samplers.class_balanced`, `labkit.samplers.grouped`. How random and how local an order is (class mix,
displacement, pages per batch) is scored in `labkit.samplers.order_scores`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from labkit.core.errors import LabkitTypeError, LabkitValueError

Item = int | list[int]
#: What the samplers count: a number of samples, or (as torch's samplers take) the dataset itself.
SampleCount = int | Sized


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The random generator of ``epoch``'s order: from (seed, epoch) alone, so any run can rebuild it."""
    return np.random.default_rng([seed, epoch])


def sample_count(n: SampleCount, sampler: str) -> int:
    """How many samples ``n`` stands for: an int as is, a dataset (or any sized object) by its length."""
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool):
        count = int(n)
    elif hasattr(n, "__len__"):
        count = len(n)
    else:
        raise LabkitTypeError(
            f"{sampler} takes the number of samples or the dataset, got {type(n).__name__}: "
            f"pass len(dataset) or the dataset"
        )
    if count < 0:
        raise LabkitValueError(f"{sampler} needs a number of samples >= 0, got {count}")
    return count


class ResumableSampler(Sampler):
    """Base class: an order per epoch, derived from (seed, epoch); state = (seed, epoch, position)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self.epoch = 0
        self._resume_at = 0  # position the next iteration starts from
        self._iter_epoch: int | None = None  # epoch of the iteration in progress (or last finished)
        self._yielded = 0

    def order(self, epoch: int) -> list[Item]:
        """Everything the sampler yields in ``epoch``, in order."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.order(self.epoch))

    def __iter__(self) -> Iterator[Item]:
        epoch, start = self.epoch, self._resume_at
        self._resume_at = 0
        self._iter_epoch, self._yielded = epoch, start
        items = self.order(epoch)
        for item in items[start:]:
            self._yielded += 1
            yield item
        if self.epoch == epoch:  # nobody called set_epoch meanwhile: move on by ourselves
            self.epoch = epoch + 1

    @property
    def next_start(self) -> tuple[int, int]:
        """The epoch and the position in it that the next pass starts from."""
        return self.epoch, self._resume_at

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order next. A pending resume in that same epoch is kept."""
        if epoch != self.epoch:
            self._resume_at = 0
        self.epoch = int(epoch)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Where the order stands; ``consumed`` overrides the count of items handed out so far."""
        if self._iter_epoch is None:
            epoch, position = self.epoch, self._resume_at
        else:
            epoch, position = self._iter_epoch, self._yielded
        if consumed is not None:
            position = int(consumed)
        return {"sampler": type(self).__name__, "seed": self.seed, "epoch": epoch, "position": position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("sampler") != type(self).__name__ or state.get("seed") != self.seed:
            raise LabkitValueError(
                f"state of {state.get('sampler')} with seed {state.get('seed')} cannot resume "
                f"{type(self).__name__} with seed {self.seed}: build the sampler as the run that saved it"
            )
        epoch, position = int(state["epoch"]), int(state["position"])
        length = len(self.order(epoch))
        if not 0 <= position <= length:
            raise LabkitValueError(f"position {position} is outside epoch {epoch} of {length} items")
        if position == length:
            epoch, position = epoch + 1, 0
        self.epoch, self._resume_at, self._iter_epoch = epoch, position, None


class EverySampleOnce(ResumableSampler):
    """Base of the samplers that yield each of ``n`` samples once an epoch, in an order of their own."""

    def __init__(self, n: SampleCount, seed: int = 0) -> None:
        super().__init__(seed)
        self.n = sample_count(n, type(self).__name__)

    def __len__(self) -> int:
        return self.n
