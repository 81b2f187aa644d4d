"""FetchLoggedDataset: samples pass through unchanged, and every fetch is logged from the process that made it."""

import os
import pickle

import pytest
from torch.utils.data import DataLoader, Dataset

from labkit.core.shared_log import SharedLog
from labkit.datasets.fetch_log import FetchLoggedDataset


class Squares(Dataset):
    labels = [0, 1, 0, 1]

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 3:
            raise ValueError("sample 3 is broken")
        return i * i


class Batched(Squares):
    def __getitems__(self, indices):
        return [("batched", i) for i in indices]


def test_samples_pass_through_and_each_fetch_is_logged_start_then_end():
    log = SharedLog("labkit-test-fetchlog-")
    wrapped = FetchLoggedDataset(Squares(), log)
    assert len(wrapped) == 4 and wrapped[2] == 4 and wrapped.labels == [0, 1, 0, 1]
    start, end = log.records()
    assert (start["event"], end["event"]) == ("start", "end")
    assert start["indices"] == end["indices"] == [2] and start["worker"] == end["worker"] == -1
    assert start["pid"] == os.getpid() and end["start"] <= start["time"] <= end["time"]


def test_a_failing_fetch_is_logged_as_an_error_and_raised():
    log = SharedLog("labkit-test-fetchlog-")
    with pytest.raises(ValueError, match="sample 3"):
        FetchLoggedDataset(Squares(), log)[3]
    assert [r["event"] for r in log.records()] == ["start", "error"]


def test_the_wrapped_datasets_batched_fetch_is_kept():
    log = SharedLog("labkit-test-fetchlog-")
    assert FetchLoggedDataset(Batched(), log).__getitems__([0, 2]) == [("batched", 0), ("batched", 2)]
    assert log.records()[-1]["indices"] == [0, 2]


def test_workers_log_their_own_id_and_pid_and_the_wrapper_survives_pickling():
    log = SharedLog("labkit-test-fetchlog-")
    wrapped = pickle.loads(pickle.dumps(FetchLoggedDataset(Batched(), log)))
    batches = list(DataLoader(wrapped, batch_size=2, num_workers=2))
    assert len(batches) == 2
    ends = [r for r in log.records() if r["event"] == "end"]
    assert sorted(r["worker"] for r in ends) == [0, 1] and os.getpid() not in {r["pid"] for r in ends}
    assert sorted(i for r in ends for i in r["indices"]) == [0, 1, 2, 3]


class IndicesWithSlot(list):
    slot = 7  # what a batch sampler may send beside the indices (labkit.workers.shared_slots does)


class WantsSlot(Squares):
    def __getitems__(self, indices):
        return [indices.slot] * len(indices)


def test_what_the_batch_sampler_sent_reaches_the_wrapped_dataset_unchanged():
    log = SharedLog("labkit-test-fetchlog-")
    assert FetchLoggedDataset(WantsSlot(), log).__getitems__(IndicesWithSlot([1, 2])) == [7, 7]
    assert log.records()[-1]["indices"] == [1, 2]
