"""The copy-on-write lab's pair of datasets: the same paths in Python lists and in numpy arrays."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from torch.utils.data import DataLoader

from labkit.core.string_table import StringTable
from labkit.harness.naive_datasets import NaivePathListDataset, PathTableDataset

PATHS = ["a/0.jpg", "b/1.jpg", "caf\udce9/2.jpg", "d/" + "x" * 300 + ".jpg"]
LABELS = [0, 1, 1, 2]


@pytest.mark.parametrize("cls", [NaivePathListDataset, PathTableDataset])
def test_items_are_the_path_and_label_given(cls):
    ds = cls(PATHS, LABELS)
    assert len(ds) == 4
    assert [ds[i] for i in range(4)] == list(zip(PATHS, LABELS))
    assert ds[-1] == (PATHS[-1], 2)
    assert all(type(label) is int for _, label in (ds[i] for i in range(4)))


def test_storage_is_what_each_demonstrates():
    naive, table = NaivePathListDataset(PATHS, LABELS), PathTableDataset(PATHS, LABELS)
    assert type(naive.paths) is list and all(type(p) is str for p in naive.paths)
    assert isinstance(table.paths, StringTable) and table.labels.dtype == np.int64


@pytest.mark.parametrize("cls", [NaivePathListDataset, PathTableDataset])
def test_one_label_per_path_or_a_clear_error(cls):
    with pytest.raises(ValueError, match="3 paths but 2 labels"):
        cls(PATHS[:3], LABELS[:2])


@pytest.mark.parametrize("cls", [NaivePathListDataset, PathTableDataset])
def test_pickles_and_loads_through_workers(cls):
    ds = pickle.loads(pickle.dumps(cls(PATHS, LABELS)))
    paths, labels = [], []
    for batch_paths, batch_labels in DataLoader(ds, batch_size=2, num_workers=2):
        paths += list(batch_paths)
        labels += batch_labels.tolist()
    assert paths == PATHS and labels == LABELS
