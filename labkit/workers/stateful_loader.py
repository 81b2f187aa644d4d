"""A loader that keeps its own place: ``state_dict()`` / ``load_state_dict()``, as torchdata's
``StatefulDataLoader`` has them, so that resuming a killed run is two lines.

Why the loader and not the sampler: DataLoader workers take indices ahead of the loop
(``prefetch_factor × num_workers`` batches), so the sampler's own position is not where training stands.
`StatefulLoader` counts the batches the loop has taken and saves the sampler's state at that point:
its seed, the epoch and the position in it. Resumed with any ``num_workers``, the rest of the epoch comes
in the same order, each sample once; every per-sample random draw seeded by (seed, epoch, index), as
labkit's crops are, repeats as well, because the sampler is wrapped in
`labkit.samplers.epoch_tagged.EpochTagged` and the epoch reaches every worker with each index,
persistent workers included.

A pass the loop leaves early (``break``) still ends its epoch: the next ``iter()`` starts the next one,
as a DataLoader's would, instead of replaying the same order. ``len()`` is torch's (the whole epoch's
batches); `StatefulLoader.batches_left` is what a progress bar of a resumed pass needs.

Trainers read a loader's attributes (``dataset``, ``batch_size``, ``sampler``...): those of
`labkit.workers.loader_factory.make_loader`'s loader are the ones a DataLoader given the same arguments has.
Lightning and accelerate rebuild a ``DataLoader`` from them to insert a distributed sampler; Lightning leaves
a loader that is not a ``DataLoader`` as it is, so under more than one rank an order that is not split by rank
is warned about once, naming the fix.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from labkit.core.environment import rank_and_world
from labkit.core.errors import LabkitTypeError, LabkitValueError, LabkitWarning
from labkit.core.pass_through import PassThrough
from labkit.samplers.resumable import ResumableSampler

STATE_VERSION = 1


class StatefulLoader(PassThrough):
    """``loader``'s batches, with the place of the loop in ``sampler``'s order as a state dict.

    ``sampler`` is the resumable sampler that ``loader`` draws from (as its ``sampler``, or its
    ``batch_sampler`` when ``batch_size`` is ``None``: its positions then count batches), or ``None`` for a
    loader whose order cannot be saved (an IterableDataset, a sampler from outside labkit):
    `state_dict` then says what to use instead. ``owns_seed`` lets `load_state_dict` adopt the saved seed:
    true when the sampler was made by `labkit.workers.loader_factory.make_loader` from a seed the user
    never chose. ``attributes`` are the DataLoader attributes to show (``dataset``, ``batch_size``...) where they
    differ from ``loader``'s own.
    """

    wraps = "loader"

    def __init__(
        self,
        loader: Iterable,
        sampler: ResumableSampler | None,
        batch_size: int | None,
        owns_seed: bool = False,
        unsaved: str = "",
        attributes: dict[str, Any] | None = None,
    ) -> None:
        self.__dict__.update(attributes or {})
        self.loader, self._order, self._counted = loader, sampler, batch_size
        self._owns_seed, self._unsaved = owns_seed, unsaved
        self._warned_ranks = False
        self._in_pass = False  # between the first batch asked for and the end of the pass
        self._epoch: int | None = None  # the epoch of the pass in progress (or left early)
        self._start = self._steps = 0  # where that pass began in the order, and the batches taken since
        self._resumed = False

    @property
    def epoch(self) -> int:
        """The epoch of the pass in progress, else of the next one."""
        if self._epoch is not None:
            return self._epoch
        return self._sampler("epoch").next_start[0]

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order for the next pass (the sampler's ``set_epoch``)."""
        self._sampler("set_epoch").set_epoch(epoch)
        self._epoch, self._resumed, self._in_pass = None, True, False

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    @property
    def batches_left(self) -> int:
        """The batches still to come in the pass in progress (or left early), else in the next pass: after a
        mid-epoch resume, the rest of that epoch (``len()`` stays the whole epoch's, as torch defines it)."""
        if self._order is None:
            return len(self) - (self._steps if self._in_pass else 0)
        start, taken = (self._start, self._steps) if self._in_pass else (self._order.next_start[1], 0)
        remaining = len(self._order) - start
        if self._counted is not None:
            drop_last = bool(getattr(self, "drop_last", False))
            remaining = remaining // self._counted if drop_last else math.ceil(remaining / self._counted)
        return max(0, remaining - taken)

    def _check_split(self) -> None:
        """Under several ranks, an order that every rank reads whole is said once (Lightning does not split it)."""
        if self._warned_ranks:
            return
        _, world = rank_and_world()
        order = self._order if self._order is not None else getattr(self, "sampler", None)
        if world > 1 and order is not None and not hasattr(order, "num_replicas"):
            self._warned_ranks = True
            warnings.warn(
                f"{world} ranks each read this loader's whole order ({type(order).__name__}): every rank "
                "sees every sample. To split it, pass sampler=DistributedBlockSampler(dataset) to "
                "make_loader, or use labkit.workers.lightning_datamodule.LabkitDataModule under Lightning "
                "(which does not split a loader that is not a DataLoader); keep it whole only for an "
                "evaluation every rank runs in full",
                LabkitWarning,
                stacklevel=3,
            )

    def __iter__(self) -> Iterator[Any]:
        self._check_split()
        self._steps, self._in_pass = 0, True
        if self._order is None:
            for batch in self.loader:
                self._steps += 1
                yield batch
            self._in_pass = False
            return
        if self._epoch is not None and not self._resumed:  # the last pass was left early: that epoch is over
            self._order.set_epoch(self._epoch + 1)
        self._resumed = False
        self._epoch, self._start = self._order.next_start
        for batch in self.loader:
            self._steps += 1
            yield batch
        self._epoch, self._in_pass = None, False

    def state_dict(self) -> dict[str, Any]:
        """Where the loop stands: the sampler's seed, the epoch and how far into it the loop has taken batches."""
        sampler = self._sampler("state_dict")
        state = sampler.state_dict()
        if self._epoch is None:
            state["epoch"], state["position"] = sampler.next_start
        else:
            taken = self._steps if self._counted is None else self._steps * self._counted
            state["epoch"], state["position"] = self._epoch, min(self._start + taken, len(sampler))
        return {"version": STATE_VERSION, "sampler": state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where the run that saved ``state`` stood; the next ``iter()`` starts there."""
        sampler = self._sampler("load_state_dict")
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or "sampler" not in state:
            raise LabkitValueError(
                "this is not a state saved by StatefulLoader.state_dict() (no 'version': "
                f"{STATE_VERSION} and 'sampler'): pass what loader.state_dict() returned"
            )
        saved = state["sampler"]
        if self._owns_seed and saved.get("sampler") == type(sampler).__name__:
            sampler.seed = int(saved["seed"])  # the seed make_loader drew: the run being resumed drew another
        sampler.load_state_dict(saved)
        self._epoch, self._resumed, self._in_pass = None, True, False

    def _sampler(self, what: str) -> ResumableSampler:
        if self._order is None:
            raise LabkitTypeError(f"this loader cannot {what.replace('_', ' ')}: {self._unsaved}")
        return self._order
