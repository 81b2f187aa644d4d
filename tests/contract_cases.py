"""Datasets for the DataLoader contract (tests/workers/test_dataloader_contract.py), in a module of their own so
that workers started with spawn can import them."""

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class Named(Dataset):
    """Builds keys and names from its index, as users' datasets do (``f"{root}/{i}.jpg"``, ``names[str(i)]``)."""

    def __init__(self, n: int = 10) -> None:
        self.n = n
        self.names = {str(i): f"file-{i:03d}" for i in range(n)}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return {
            "x": torch.full((2,), float(i)),
            "y": int(i),
            "name": f"s{i}",
            "key": self.names[str(i)],
            "repr": repr(i),
            "type": type(i).__name__,
        }


class Tuples(Dataset):
    def __len__(self) -> int:
        return 9

    def __getitem__(self, i):
        return torch.tensor([i, i * i]), np.arange(3, dtype=np.int64) + i, f"t{i}"


class Batched(Named):
    """A dataset with its own ``__getitems__``: it must receive a plain list of ints."""

    def __getitems__(self, indices):
        assert type(indices) is list and all(type(i) is int for i in indices), type(indices)
        return [self[i] for i in indices]


class SelfSplitting(IterableDataset):
    """A stream that splits itself across workers by get_worker_info(), as torch's docs show."""

    def __init__(self, n: int = 12) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def names_collate(samples):
    """A custom collate_fn: what it receives is what the dataset returned."""
    return [f"{s['name']}|{s['key']}|{s['repr']}|{s['type']}" for s in samples]
