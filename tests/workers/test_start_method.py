"""labkit.workers.start_method: workers are not forked from a process that runs a process group's threads."""

import multiprocessing

import pytest
import torch
import torch.distributed as dist
from contract_cases import Named

from labkit.workers.loader_factory import make_loader
from labkit.workers.start_method import holds_process_group, worker_context

FORKS = multiprocessing.get_start_method() == "fork"


def test_outside_a_process_group_the_default_and_what_is_given_stand():
    assert not holds_process_group()
    assert worker_context() is None and worker_context("spawn") == "spawn"


@pytest.mark.skipif(not FORKS, reason="workers are forked only where fork is the default start method (Linux < 3.14)")
def test_in_a_process_group_make_loader_s_workers_start_from_a_fork_server(monkeypatch):
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 1)
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    assert holds_process_group() and worker_context() == "forkserver" and worker_context("fork") == "fork"
    loader = make_loader(Named(8), batch_size=4, shuffle=False, num_workers=1)
    assert loader.multiprocessing_context.get_start_method() == "forkserver"
    assert [b["y"].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert make_loader(Named(8), num_workers=0).multiprocessing_context is None  # no workers, nothing to start
    assert torch.equal(
        next(iter(make_loader(Named(8), batch_size=2, shuffle=False, num_workers=0)))["x"],
        torch.tensor([[0.0, 0.0], [1.0, 1.0]]),
    )
