"""The resumable samplers: the order in which samples are read (seed sections 2.2, 4.1 and 4.4).

Every sampler here derives an epoch's whole order from ``(seed, epoch)`` alone, so:

* the order changes every epoch by itself (forgetting ``set_epoch`` — seed 6.2's "shuffle=True
  but every epoch is the same" — cannot happen; an explicit ``set_epoch`` still wins);
* its state is three numbers — seed, epoch, position — and resuming from ``state_dict()``
  yields exactly the rest of the epoch, however many DataLoader workers either run used;
* it plugs into torchdata's ``StatefulDataLoader``, which calls ``state_dict()`` at the right
  moment itself.

With a plain ``DataLoader`` and workers, the loader pulls indices ahead of your loop
(``prefetch_factor × num_workers`` batches), so pass what the loop really consumed:
``sampler.state_dict(consumed=steps_done * batch_size)``.

How random and how local an order is (class mix, displacement, pages per batch) is scored in
`labkit.samplers.order_scores`, which imports the samplers from here, never the other way.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Sized, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Sampler, WeightedRandomSampler

from labkit.core.environment import rank_and_world
from labkit.core.errors import LabkitTypeError, LabkitValueError

Item = Union[int, List[int]]
#: What the samplers count: a number of samples, or (as torch's samplers take) the dataset itself.
SampleCount = Union[int, Sized]


def _rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch])


def sample_count(n: SampleCount, sampler: str) -> int:
    """How many samples ``n`` stands for: an int as is, a dataset (or any sized object) by its length."""
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool):
        count = int(n)
    elif hasattr(n, "__len__"):
        count = len(n)
    else:
        raise LabkitTypeError(f"{sampler} takes the number of samples or the dataset, got {type(n).__name__}: "
                              f"pass len(dataset) or the dataset")
    if count < 0:
        raise LabkitValueError(f"{sampler} needs a number of samples >= 0, got {count}")
    return count


class ResumableSampler(Sampler):
    """Base class: an order per epoch, derived from (seed, epoch); state = (seed, epoch, position)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self.epoch = 0
        self._resume_at = 0  # position the next iteration starts from
        self._iter_epoch: Optional[int] = None  # epoch of the iteration in progress (or last finished)
        self._yielded = 0

    def order(self, epoch: int) -> List[Item]:
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
    def next_start(self) -> Tuple[int, int]:
        """The epoch and the position in it that the next pass starts from."""
        return self.epoch, self._resume_at

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order next. A pending resume in that same epoch is kept."""
        if epoch != self.epoch:
            self._resume_at = 0
        self.epoch = int(epoch)

    def state_dict(self, consumed: Optional[int] = None) -> Dict[str, Any]:
        """Where the order stands; ``consumed`` overrides the count of items handed out so far."""
        if self._iter_epoch is None:
            epoch, position = self.epoch, self._resume_at
        else:
            epoch, position = self._iter_epoch, self._yielded
        if consumed is not None:
            position = int(consumed)
        return {"sampler": type(self).__name__, "seed": self.seed, "epoch": epoch, "position": position}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if state.get("sampler") != type(self).__name__ or state.get("seed") != self.seed:
            raise LabkitValueError(f"state of {state.get('sampler')} with seed {state.get('seed')} cannot resume "
                             f"{type(self).__name__} with seed {self.seed}: build the sampler as the run that saved it")
        epoch, position = int(state["epoch"]), int(state["position"])
        length = len(self.order(epoch))
        if not 0 <= position <= length:
            raise LabkitValueError(f"position {position} is outside epoch {epoch} of {length} items")
        if position == length:
            epoch, position = epoch + 1, 0
        self.epoch, self._resume_at, self._iter_epoch = epoch, position, None


def block_shuffle_order(n: int, block_size: int, window: int, rng: np.random.Generator) -> np.ndarray:
    """Shuffle the order of contiguous blocks, then shuffle samples within each window of blocks."""
    if block_size < 1 or window < 1:
        raise LabkitValueError(f"block_size and window must be >= 1, got {block_size}, {window}")
    n_blocks = max(1, math.ceil(n / block_size))
    block_rank = np.empty(n_blocks, dtype=np.int64)
    block_rank[rng.permutation(n_blocks)] = np.arange(n_blocks)
    window_of = block_rank[np.arange(n) // block_size] // window
    return np.lexsort((rng.random(n), window_of))


class BlockShuffleSampler(ResumableSampler):
    """Locality-aware shuffle (seed 4.1): reads stay inside ``window`` contiguous blocks at a time.

    With ``block_size × window`` samples in flight, a batch read from a pack touches one
    region of the file instead of the whole file, while the order still changes every
    epoch. ``window=ceil(n / block_size)`` is a full shuffle; ``window=1`` shuffles only
    within blocks. `labkit.samplers.order_scores` measures what the trade costs.
    """

    def __init__(self, n: SampleCount, block_size: int = 1024, window: int = 4, seed: int = 0) -> None:
        super().__init__(seed)
        if block_size < 1 or window < 1:
            raise LabkitValueError(f"block_size and window must be >= 1, got {block_size}, {window}")
        self.n, self.block_size, self.window = sample_count(n, type(self).__name__), int(block_size), int(window)

    @classmethod
    def for_batches(cls, n: SampleCount, batch_size: int, seed: int = 0) -> "BlockShuffleSampler":
        """The layout the ablation and the autotuner use: blocks of n/16 samples but never less than a
        batch, shuffled 4 at a time, so a batch is read from at most 4 contiguous runs of the file
        (8 where windows meet). With fewer than 5 blocks (n < 5 batches) it is a plain shuffle."""
        n = sample_count(n, cls.__name__)
        return cls(n, block_size=max(batch_size, n // 16), window=4, seed=seed)

    def __len__(self) -> int:
        return self.n

    def order(self, epoch: int) -> List[int]:
        return block_shuffle_order(self.n, self.block_size, self.window, _rng(self.seed, epoch)).tolist()


class DistributedBlockSampler(ResumableSampler):
    """Block shuffle split across ranks: rank r reads one contiguous slice of the epoch's order.

    Across ranks every index appears exactly once per epoch when ``n`` divides evenly. When
    it does not: ``drop_last=True`` leaves out the last ``n % num_replicas`` samples of the
    shuffled order (different ones each epoch); ``drop_last=False`` pads by repeating the
    first samples of the order so that every rank gets ``ceil(n / num_replicas)`` — the
    same rule as ``torch.utils.data.DistributedSampler``.
    """

    def __init__(self, n: SampleCount, num_replicas: Optional[int] = None, rank: Optional[int] = None, seed: int = 0,
                 drop_last: bool = False, block_size: int = 1024, window: int = 4) -> None:
        super().__init__(seed)
        n = sample_count(n, type(self).__name__)
        self.n, self.block_size, self.window, self.drop_last = int(n), int(block_size), int(window), drop_last
        self.rank, self.num_replicas = rank_and_world(rank, num_replicas, required=True)
        if drop_last:
            self.per_rank = self.n // self.num_replicas
        else:
            self.per_rank = math.ceil(self.n / self.num_replicas)

    def __len__(self) -> int:
        return self.per_rank

    def order(self, epoch: int) -> List[int]:
        full = block_shuffle_order(self.n, self.block_size, self.window, _rng(self.seed, epoch))
        total = self.per_rank * self.num_replicas
        if total > len(full):
            full = np.concatenate([full, np.resize(full, total - len(full))])
        return full[self.rank * self.per_rank : (self.rank + 1) * self.per_rank].tolist()


class ClassBalancedSampler(ResumableSampler):
    """Draws classes equally often, whatever their frequencies (seed 2.2: class imbalance).

    Each sample is weighted by 1 / (size of its class) and drawn with replacement through
    ``torch.utils.data.WeightedRandomSampler``, seeded per epoch so the draw is resumable.
    """

    def __init__(self, labels: Sequence[int], num_samples: Optional[int] = None, seed: int = 0) -> None:
        super().__init__(seed)
        labels = np.asarray(labels, dtype=np.int64)
        if labels.ndim != 1 or len(labels) == 0 or labels.min() < 0:
            raise LabkitValueError("labels must be a non-empty 1-D sequence of non-negative class indices")
        counts = np.bincount(labels)
        self.weights = torch.from_numpy(1.0 / counts[labels])
        self.num_samples = int(num_samples or len(labels))

    def __len__(self) -> int:
        return self.num_samples

    def order(self, epoch: int) -> List[int]:
        generator = torch.Generator().manual_seed(int(_rng(self.seed, epoch).integers(2**62)))
        return list(WeightedRandomSampler(self.weights, self.num_samples, replacement=True, generator=generator))


class GroupedBatchSampler(ResumableSampler):
    """A batch sampler that never splits a group (seed 2.2: frames of one video in one batch).

    Groups are shuffled each epoch and packed whole into batches of at most ``batch_size``;
    a batch closes early when the next group does not fit. Pass it as ``batch_sampler=``;
    its position counts batches, not samples.
    """

    def __init__(self, groups: Sequence[Any], batch_size: int, seed: int = 0, shuffle: bool = True) -> None:
        super().__init__(seed)
        groups = np.asarray(groups)
        keys, inverse = np.unique(groups, return_inverse=True)
        self.members = [np.flatnonzero(inverse == g).tolist() for g in range(len(keys))]
        too_big = [(keys.tolist()[g], len(m)) for g, m in enumerate(self.members) if len(m) > batch_size]
        if too_big:
            raise LabkitValueError(f"group {too_big[0][0]!r} has {too_big[0][1]} samples, more than batch_size="
                             f"{batch_size}; raise batch_size or split the group")
        self.batch_size, self.shuffle = int(batch_size), shuffle

    def order(self, epoch: int) -> List[List[int]]:
        sequence = _rng(self.seed, epoch).permutation(len(self.members)) if self.shuffle else range(len(self.members))
        batches: List[List[int]] = []
        current: List[int] = []
        for g in sequence:
            if len(current) + len(self.members[g]) > self.batch_size:
                batches.append(current)
                current = []
            current.extend(self.members[g])
        if current:
            batches.append(current)
        return batches


class EverySampleOnce(ResumableSampler):
    """Base of the samplers that yield each of ``n`` samples once an epoch, in an order of their own."""

    def __init__(self, n: SampleCount, seed: int = 0) -> None:
        super().__init__(seed)
        self.n = sample_count(n, type(self).__name__)

    def __len__(self) -> int:
        return self.n


class RandomOffsetSequentialSampler(EverySampleOnce):
    """In order, from a random start that changes each epoch, wrapping around (seed 2.2: sequences)."""

    def order(self, epoch: int) -> List[int]:
        start = int(_rng(self.seed, epoch).integers(self.n)) if self.n else 0
        return np.roll(np.arange(self.n), -start).tolist()


class RandomPermutationSampler(EverySampleOnce):
    """A fresh random permutation each epoch (what ``shuffle=True`` gives), resumable: `make_loader`'s default."""

    def order(self, epoch: int) -> List[int]:
        return _rng(self.seed, epoch).permutation(self.n).tolist()


class InOrderSampler(EverySampleOnce):
    """0, 1, ..., n-1 every epoch (what ``shuffle=False`` gives), resumable mid-epoch."""

    def __init__(self, n: SampleCount) -> None:
        super().__init__(n, seed=0)

    def order(self, epoch: int) -> List[int]:
        return list(range(self.n))
