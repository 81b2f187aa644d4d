"""The threads that decode a batch: a contiguous share each, none outliving its batch, an error in any reaching
the caller, and threads x processes within the cores."""

import os
import pickle
import threading

import pytest
import torch
from conftest import OUT

from labkit.core import cpus as cpu_budget_module
from labkit.core.errors import LabkitError
from labkit.datasets import batch_decode
from labkit.datasets.batch_decode import BatchDecoder, threads_here
from labkit.datasets.pack_datasets import PackedDataset
from labkit.workers.loader_factory import make_loader
from labkit.workers.thread_loader import ThreadLoader


def test_threads_times_processes_stay_within_the_cores(monkeypatch):
    monkeypatch.setattr(cpu_budget_module, "usable_cpus", lambda: 8)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert threads_here(None) == 8  # the main process: every core
    monkeypatch.setattr(batch_decode, "get_worker_info", lambda: type("Info", (), {"num_workers": 3}))
    assert threads_here(None) == 2 and threads_here(5) == 5
    with pytest.raises(LabkitError, match="decode_threads=0: at least 1"):
        threads_here(0)


_THREADS_AT_FORK = []  # the threads alive in the parent at each fork while a test records them
os.register_at_fork(before=lambda: _THREADS_AT_FORK.append([t.name for t in threading.enumerate()]))


def _decode_threads_at_forks(run) -> list:
    _THREADS_AT_FORK.clear()
    run()
    return [sorted(n for n in names if n.startswith("labkit")) for names in _THREADS_AT_FORK]


def test_no_decode_thread_outlives_its_batch_so_none_is_alive_at_a_fork(encoded_pack):
    """A validation pass in the main process (num_workers=0), a ThreadLoader pass, then a loader that forks its
    workers: no labkit thread may be alive in the parent at any of those forks (the article's 6.5)."""
    ds = PackedDataset(encoded_pack, "simplejpeg", OUT, decode_threads=2)

    def passes():
        main_pass = torch.cat([b for b, _ in make_loader(ds, batch_size=4, shuffle=False, num_workers=0)])
        threaded = torch.cat([b for b, _ in ThreadLoader(ds, batch_size=4, shuffle=False, threads=2)])
        forked = torch.cat(
            [b for b, _ in make_loader(ds, batch_size=4, shuffle=False, num_workers=2, multiprocessing_context="fork")]
        )
        assert torch.equal(main_pass, threaded) and torch.equal(main_pass, forked)

    forks = _decode_threads_at_forks(passes)
    assert len(forks) >= 2 and forks == [[]] * len(forks)
    copy = pickle.loads(pickle.dumps(ds))  # what a spawned worker gets: the setting
    assert copy.decode_threads == 2


def test_an_unexpected_error_in_a_helper_thread_reaches_the_caller_and_expected_ones_are_listed():
    decoder = BatchDecoder(threads=3)
    rows = list(range(8))

    def load(index):
        if index == 5:
            raise KeyError("row 5")
        return torch.full((1, 2, 2), index, dtype=torch.uint8)

    with pytest.raises(KeyError, match="row 5"):
        decoder.load_rows(torch.zeros(8, 1, 2, 2, dtype=torch.uint8), rows, load, (OSError,))
    batch = torch.zeros(8, 1, 2, 2, dtype=torch.uint8)
    failed = decoder.load_rows(batch, rows[::-1], load, (KeyError,))
    assert failed == [5] and [int(batch[k, 0, 0, 0]) for k in rows if k != 5] == [0, 1, 2, 3, 4, 6, 7]


def test_a_batch_decoder_says_its_setting():
    assert repr(BatchDecoder()) == "BatchDecoder(threads=auto)" and repr(BatchDecoder(3)) == "BatchDecoder(threads=3)"
