"""The naive versions a lab shows beside the library's: the article's bugs and traps, kept on purpose.

`NaivePathListDataset` holds paths in Python lists (forked workers copy them page by page as they
touch reference counts); `PathTableDataset` is the same dataset with numpy string tables, as labkit's
datasets hold theirs; `NaiveIterableDataset` is the article's section 4.2 stream, which every worker reads
whole. They live in the course, not in the library: nobody should train with the first and the last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Dataset, IterableDataset

from labkit.core.errors import LabkitValueError


class NaivePathListDataset(Dataset):
    """The copy-on-write trap, kept to show it: paths and labels in Python lists, as most tutorials write.

    A list of a million path strings is a million reference-counted objects spread over the heap.
    A forked DataLoader worker shares their pages with the main process until it merely *reads* one:
    taking ``self.paths[i]`` writes that string's reference count, and the kernel copies the whole
    4 KiB page it sits on into the worker. Read every sample once and each worker holds its own copy
    of the list (pytorch/pytorch#13246). `PathTableDataset` holds the same paths in two numpy arrays.

    ``ds[i] -> (path, label)``: the index alone, no file is opened, so an epoch over a million
    entries takes seconds and what a lab measures is the container.
    """

    def __init__(self, paths: Sequence[str], labels: Sequence[int]) -> None:
        if len(paths) != len(labels):
            raise LabkitValueError(f"{len(paths)} paths but {len(labels)} labels: give one label per path")
        self.paths: list[str] = [str(p) for p in paths]
        self.labels: list[int] = [int(label) for label in labels]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[str, int]:
        return self.paths[index], self.labels[index]


class PathTableDataset(Dataset):
    """`NaivePathListDataset`'s paths and labels kept as labkit's datasets keep theirs: a
    `labkit.core.string_table.StringTable` (two numpy arrays, however many paths) and a numpy array of labels.
    Reading a sample writes nothing shared, so forked workers keep sharing every page."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int]) -> None:
        if len(paths) != len(labels):
            raise LabkitValueError(f"{len(paths)} paths but {len(labels)} labels: give one label per path")
        from labkit.core.string_table import StringTable

        self.paths = StringTable.from_strings(paths)
        self.labels = np.asarray(labels, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[str, int]:
        return self.paths[index], int(self.labels[index])


class NaiveIterableDataset(IterableDataset):
    """The bug of article §4.2, on purpose: every worker iterates every record (duplicates ×num_workers)."""

    def __init__(self, records: Callable[[], Iterable[Any]]) -> None:
        self.records = records

    def __iter__(self) -> Iterator[Any]:
        return iter(self.records())
