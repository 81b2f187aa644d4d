"""``torch.utils.data.Subset`` (and what ``random_split`` returns) with the epoch of each index kept.

A Subset maps index ``i`` to ``indices[i]`` as a plain int, so the epoch an `labkit.core.epoch_index.EpochIndex`
carried is lost on the way to the dataset, and every epoch would draw epoch 0's crops. `EpochSubset` maps
it to an ``EpochIndex`` of the same epoch. `labkit.workers.loader_factory.make_loader` puts it in place of
a ``Subset`` by itself; the samples are those of the Subset, index for index.
"""

from __future__ import annotations

from typing import Any, List, Sequence

from torch.utils.data import Dataset, Subset

from labkit.core.epoch_index import EpochIndex


def _mapped(index: Any, target: int) -> Any:
    return EpochIndex(target, index.epoch) if isinstance(index, EpochIndex) else target


class EpochSubset(Dataset):
    """``subset``'s samples, each fetched with the epoch its index was drawn for."""

    def __init__(self, subset: Subset) -> None:
        self.dataset, self.indices = subset.dataset, subset.indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: Any) -> Any:
        return self.dataset[_mapped(index, int(self.indices[index]))]

    def __getitems__(self, indices: Sequence[Any]) -> List[Any]:
        targets = [_mapped(i, int(self.indices[i])) for i in indices]
        if hasattr(self.dataset, "__getitems__"):
            return self.dataset.__getitems__(targets)
        return [self.dataset[t] for t in targets]
