"""What each self-checked exercise of the course expects, computed from the run it checks — kept here, out of the
learner's view, so that a check cell shows the question and the learner's answer, never the answer itself.

A notebook's check cell is ``check_exercise("05.4", ANSWER_4)`` (with what this run measured where the answer
depends on it: ``check_exercise("01.3", ANSWER_3, per_entry=per_entry)``). Each entry computes the expected value
with the same library calls a learner would use; the hint is shown only after a wrong answer.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit.core.errors import LabkitError, LabkitKeyError
from labkit.course.exercises import check_answer


@dataclass(frozen=True)
class Exercise:
    """One self-checked answer: what it is, how this run's expected value is computed, and the hint."""

    what: str
    expected: Callable[..., Any]
    rel: float = 0.0
    hint: str = ""


def _shm_mib_8_workers() -> float:
    from labkit.diagnose.doctor import LoaderPlan

    plan = LoaderPlan(num_workers=8, prefetch_factor=4, batch_size=64, image=(3, 256, 256), bytes_per_value=4)
    return plan.shm_bytes / 2**20


def _shm_gib_prefetch_8(workers: int) -> float:
    from labkit.diagnose.doctor import LoaderPlan

    return LoaderPlan(num_workers=workers, prefetch_factor=8, batch_size=128).shm_bytes / 2**30


def _padded_shares() -> list[list[int]]:
    from torch.utils.data import DistributedSampler

    return [list(DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=True, seed=0)) for r in range(4)]


def _named_sample(same_size: Any) -> int | None:
    from labkit.collate.batching import detection_collate

    broken = [same_size[i] for i in range(4)]
    broken[2] = (broken[2][0], {**broken[2][1], "boxes": broken[2][1]["boxes"][:, :3]})
    try:
        detection_collate(broken)
    except LabkitError as error:
        return next(int(k) for k in re.findall(r"sample (\d+)", str(error)))
    return None


def _stream_plan(shards: list[str], ranks: int, workers: int, balance: str = "hold_back") -> Any:
    from labkit.datasets.iterable import ShardedIterableDataset

    dataset = ShardedIterableDataset(shards, seed=0, rank=0, world_size=ranks, balance=balance)
    return dataset.epoch_plan(workers)


def _block_halves() -> list[list[int]]:
    from labkit.samplers.block_shuffle import DistributedBlockSampler

    return [list(DistributedBlockSampler(255, num_replicas=2, rank=r, seed=0, block_size=32, window=2)) for r in (0, 1)]


def _left_out(samples: int, epoch: int) -> set[int]:
    from labkit.samplers.block_shuffle import DistributedBlockSampler

    taken: set[int] = set()
    for r in range(5):
        sampler = DistributedBlockSampler(samples, num_replicas=5, rank=r, seed=0, drop_last=True)
        sampler.set_epoch(epoch)
        taken |= set(sampler)
    return set(range(samples)) - taken


def _largest_step(by_id: dict[str, dict[str, float]], ids: list[str]) -> str:
    gains = {f"{a} -> {b}": by_id[b]["images_per_s"] / by_id[a]["images_per_s"] for a, b in zip(ids, ids[1:])}
    return max(gains, key=gains.__getitem__)


def _largest_batch(small: Any) -> int:
    from labkit.diagnose.doctor import LoaderPlan, check_shared_memory

    fits = [
        b
        for b in range(1, 64)
        if check_shared_memory(LoaderPlan(num_workers=2, prefetch_factor=2, batch_size=b), small).level != "fail"
    ]
    return max(fits)


EXERCISES: dict[str, Exercise] = {
    "00.1": Exercise(
        "exercise 1: MiB of /dev/shm", _shm_mib_8_workers, 0.02, "count the batches in flight, and two more"
    ),
    "01.3": Exercise(
        "exercise 3: GiB over 64 workers",
        lambda per_entry: per_entry * 1.28e6 * 8 * 8 / 2**30,
        0.05,
        "every worker of every GPU holds its own copy of the whole list",
    ),
    "02.2.per_rank": Exercise(
        "exercise 2: samples per rank", lambda: len(_padded_shares()[0]), hint="DistributedSampler pads to equal shares"
    ),
    "02.2.twice": Exercise(
        "exercise 2: indices read twice",
        lambda: {i for i in range(10) if sum(p.count(i) for p in _padded_shares()) > 1},
        hint="the padding repeats the start of the shuffled order (seed=0)",
    ),
    "03.4": Exercise("exercise 4: the sample the error names", _named_sample),
    "04.3": Exercise(
        "exercise 3: GiB of /dev/shm", _shm_gib_prefetch_8, 0.02, "count the batches in flight, and two more"
    ),
    "05.4": Exercise(
        "exercise 4: pages in one batch",
        lambda: -(-64 * 3 * 256 * 256 // mmap.PAGESIZE),
        hint="a page is mmap.PAGESIZE bytes; a part of a page is a whole page",
    ),
    "06.1.each": Exercise(
        "exercise 1: records per consumer",
        lambda shards, ranks: _stream_plan(shards, ranks, 4).per_consumer,
        hint="ranks × workers consumers share them",
    ),
    "06.1.held": Exercise(
        "exercise 1: records held back", lambda shards, ranks: len(_stream_plan(shards, ranks, 4).held_back)
    ),
    "06.2": Exercise(
        "exercise 2: records yielded twice",
        lambda shards, ranks: _stream_plan(shards, ranks, 3, balance="repeat").repeated,
        hint="every consumer is filled up to the largest share",
    ),
    "08.1": Exercise(
        "exercise 1: disjoint shares",
        lambda: len(sum(_block_halves(), [])) == len(set(sum(_block_halves(), []))),
        hint="255 does not divide by 2, and drop_last=False pads",
    ),
    "08.2": Exercise(
        "exercise 2: steps per rank",
        lambda shards: 2 * -(-_stream_plan(shards, 2, 2).per_consumer // 8),
        hint="each worker batches its own share",
    ),
    "08.4.left_out": Exercise("exercise 4: samples left out an epoch", lambda samples: len(_left_out(samples, 0))),
    "08.4.same_next_epoch": Exercise(
        "exercise 4: the same ones next epoch", lambda samples: _left_out(samples, 0) == _left_out(samples, 1)
    ),
    "09.3": Exercise(
        "exercise 3: the largest single step", _largest_step, hint="compare consecutive versions' images/s"
    ),
    "10.1": Exercise(
        "exercise 1: largest batch", _largest_batch, hint="the doctor's own check, one batch size at a time"
    ),
}


def check_exercise(key: str, answer: Any, **context: Any) -> None:
    """`labkit.course.exercises.check_answer` for exercise ``key`` (``"05.4"``): the expected value computed now
    from ``context`` (what the notebook measured), the hint shown only after a wrong answer."""
    try:
        exercise = EXERCISES[key]
    except KeyError:
        raise LabkitKeyError(f"no self-checked exercise {key!r}; the course has {', '.join(EXERCISES)}") from None
    expected = exercise.expected(**context) if answer is not None else None
    check_answer(answer, expected, exercise.what, rel=exercise.rel, hint=exercise.hint)
