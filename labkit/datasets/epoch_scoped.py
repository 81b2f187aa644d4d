"""The dataset `make_loader` hands to torch: the user's dataset, fetched inside the epoch its batch was drawn for.

`labkit.samplers.epoch_tagged.EpochTagged` sends each batch as an `labkit.core.epoch_index.EpochBatch` (plain
``int`` indices and the epoch) through torch's index queues. In whichever process fetches it, `EpochScoped` opens
an `labkit.core.epoch_index.epoch_scope` for that epoch and asks the wrapped dataset for the batch as a plain
``list`` of ``int`` (or one plain ``int``), exactly as torch's own fetcher would: through its ``__getitems__``
where it has one, else index by index. So a user's dataset cannot tell the loader from torch's, and labkit's
datasets, however deeply wrapped (a ``Subset``, ``random_split``, ``ConcatDataset``), draw each epoch's crops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.utils.data import Dataset

from labkit.core.epoch_index import EpochIndex, epoch_scope
from labkit.core.pass_through import PassThrough


class EpochScoped(PassThrough, Dataset):
    """``dataset``'s samples, each batch fetched in the `epoch_scope` of the epoch it was drawn for."""

    wraps = "dataset"

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, EpochIndex):
            return self.dataset[index]
        with epoch_scope(index.epoch):
            return self.dataset[int(index)]

    def __getitems__(self, indices: Sequence[Any]) -> list[Any]:
        epoch = getattr(indices, "epoch", None)
        plain = list(indices) if epoch is not None else indices  # the list torch's fetcher would pass
        fetch = getattr(self.dataset, "__getitems__", None)
        with epoch_scope(epoch):
            return fetch(plain) if fetch else [self.dataset[i] for i in plain]
