"""labkit.core.torch_internals: the one door to torch's private machinery works on this torch."""

import signal

import torch
from torch.utils.data import DataLoader

from labkit.core.torch_internals import (
    exit_text,
    forget_iterator,
    live_iterator,
    remove_dead_process_segments,
    shutdown_workers,
    storage_use_count,
    worker_processes,
)


def test_a_storage_s_use_count_sees_a_second_tensor():
    tensor = torch.zeros(4)
    alone = storage_use_count(tensor)
    view = tensor[1:]
    assert alone is not None and storage_use_count(tensor) == alone + 1
    del view


def test_a_persistent_loader_s_iterator_and_workers_are_found_and_stopped():
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=1, persistent_workers=True)
    assert live_iterator(loader) is None
    next(iter(loader))
    iterator = live_iterator(loader)
    workers = worker_processes(iterator)
    assert len(workers) == 1 and workers[0].is_alive()
    shutdown_workers(iterator)
    forget_iterator(loader)
    workers[0].join(timeout=10)
    assert live_iterator(loader) is None and not workers[0].is_alive()


def test_only_the_dead_process_s_segments_are_removed(tmp_path):
    for name in ("torch_123_9_1", "torch_123_9_2", "torch_1234_9_1", "psm_123"):
        (tmp_path / name).write_bytes(b"x")
    assert sorted(remove_dead_process_segments(123, str(tmp_path))) == ["torch_123_9_1", "torch_123_9_2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["psm_123", "torch_1234_9_1"]
    assert remove_dead_process_segments(5, str(tmp_path / "missing")) == []


def test_exit_codes_in_words():
    assert exit_text(-signal.SIGKILL) == "exit code -9, killed by SIGKILL"
    assert exit_text(-200) == "exit code -200, killed by signal 200" and exit_text(1) == "exit code 1"
