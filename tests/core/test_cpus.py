"""labkit.core.cpus.cpu_budget: one budget for every loader default, which knows the ranks sharing the node."""

import pytest
import torch.distributed as dist

from labkit.core import cpus as cpu_budget_module
from labkit.core.cpus import cpu_budget, ranks_on_node
from labkit.core.errors import LabkitError


@pytest.fixture
def node(monkeypatch):
    """A simulated node: set its CPUs and its torchrun ranks."""

    def shape(cpus, ranks=None):
        monkeypatch.setattr(cpu_budget_module, "usable_cpus", lambda: cpus)
        if ranks is None:
            monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        else:
            monkeypatch.setenv("LOCAL_WORLD_SIZE", str(ranks))

    return shape


def test_the_article_s_eight_by_eight_trap_is_fixed(node):
    node(16, 8)
    budget = cpu_budget()
    assert (budget.ranks, budget.share, budget.workers_per_rank) == (8, 2, 1)
    assert budget.ranks * (budget.workers_per_rank + 1) <= 16
    assert "LOCAL_WORLD_SIZE=8" in budget.source
    assert "72 busy processes on 16 CPUs" in budget.reasoning and "16 busy processes" in budget.reasoning


@pytest.mark.parametrize("cpus, ranks, workers", [(8, 1, 7), (16, 4, 3), (32, 8, 3), (64, 8, 7), (96, 8, 8), (2, 4, 1)])
def test_workers_per_rank_fit_the_rank_s_share(cpus, ranks, workers):
    assert cpu_budget(ranks=ranks, cpus=cpus).workers_per_rank == workers


@pytest.mark.parametrize("cpus, ranks", [(2, 1), (16, 8), (64, 8), (64, 1), (96, 8), (3, 2)])
def test_loader_processes_times_threads_never_exceed_the_cpus(cpus, ranks):
    budget = cpu_budget(ranks=ranks, cpus=cpus)
    for workers in range(0, budget.share + 1):
        processes = max(1, workers)
        assert ranks * processes * budget.decode_threads(workers) <= max(cpus, ranks * processes)
    assert budget.decode_threads(0) == budget.share  # the main process decodes with the whole share
    assert budget.main_threads(budget.workers_per_rank) >= 1


def test_on_64_cpus_8_ranks_do_not_run_8_workers_of_8_threads(node):
    node(64, 8)
    budget = cpu_budget()
    assert budget.workers_per_rank == 7 and budget.decode_threads(budget.workers_per_rank) == 1


def test_a_measured_loader_alone_gets_the_whole_share():
    assert cpu_budget(ranks=1, cpus=4, main_process_steps=False).workers_per_rank == 4
    assert cpu_budget(ranks=1, cpus=4).workers_per_rank == 3


def test_ranks_come_from_torchrun_else_the_process_group_else_one(node, monkeypatch):
    node(8)
    assert ranks_on_node()[0] == 1
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    assert ranks_on_node() == (4, "the initialised process group (taken as one node)")
    node(8, 2)
    assert ranks_on_node() == (2, "LOCAL_WORLD_SIZE=2")


@pytest.mark.parametrize("value", ["two", "0"])
def test_a_bad_local_world_size_is_named(monkeypatch, value):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
    with pytest.raises(LabkitError, match="LOCAL_WORLD_SIZE"):
        ranks_on_node()


def test_no_cpus_is_refused():
    with pytest.raises(LabkitError, match="at least 1"):
        cpu_budget(ranks=1, cpus=0)
