import os

import pytest
import torch
from torch.utils.data import DataLoader

from labkit.core.machine import MemoryFacts, memory_facts
from labkit.diagnose.doctor import LoaderPlan, check_decode_threads, diagnose
from labkit.tools.cli import main
from labkit.workers.thread_budget import limit_worker_threads, torch_threads

GIB = 2**30
ROOMY = MemoryFacts(ram_total=64 * GIB, ram_available=48 * GIB, shm_total=32 * GIB, shm_free=32 * GIB)


def _levels(plan, **machine):
    args = dict(cpus=16, facts=ROOMY, cuda=False, threads=["MainThread"])
    args.update(machine)
    return {f.check: f for f in diagnose(plan, **args)}


def test_docker_default_shm_fails_a_float_loader_with_the_fix():
    plan = LoaderPlan(num_workers=8, prefetch_factor=4, batch_size=64, image=(3, 256, 256), bytes_per_value=4)
    docker = MemoryFacts(64 * GIB, 48 * GIB, shm_total=64 * 2**20, shm_free=64 * 2**20)  # docker's 64 MB
    finding = _levels(plan, facts=docker)["shared memory"]
    assert finding.level == "fail" and "No space left on device" in finding.message and "--shm-size" in finding.fix
    assert _levels(plan)["shared memory"].level == "ok"
    assert plan.shm_bytes == (8 * 4 + 2) * 64 * 3 * 256 * 256 * 4  # + the batch in use and the next one


def test_eight_gpus_times_eight_workers_is_the_seed_trap():
    finding = _levels(LoaderPlan(num_workers=8, ranks_per_node=8), cpus=32)["CPUs"]
    assert finding.level == "fail" and "num_workers=3" in finding.fix
    assert _levels(LoaderPlan(num_workers=3, ranks_per_node=8), cpus=32)["CPUs"].level == "ok"


def test_thread_oversubscription_and_its_worker_init_fn(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for name in ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    finding = _levels(LoaderPlan(num_workers=8), cpus=4)["threads in workers"]
    assert finding.level == "warn" and "limit_worker_threads" in finding.fix
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _levels(LoaderPlan(num_workers=2), cpus=4)["threads in workers"].level == "ok"


def test_fork_after_threads_is_flagged(monkeypatch):
    monkeypatch.setattr("multiprocessing.get_start_method", lambda allow_none=False: "fork")
    finding = _levels(LoaderPlan(num_workers=2), threads=["MainThread", "prefetch-thread"])["fork after threads"]
    assert finding.level == "warn" and "forkserver" in finding.fix


def test_pin_memory_without_cuda_is_pointless_and_with_cuda_is_estimated():
    assert _levels(LoaderPlan(num_workers=2, pin_memory=True))["pinned memory"].level == "warn"
    small = MemoryFacts(8 * GIB, 1 * GIB, 4 * GIB, 4 * GIB)
    big = LoaderPlan(num_workers=8, prefetch_factor=4, batch_size=256, bytes_per_value=4, pin_memory=True)
    assert _levels(big, cuda=True, facts=small)["pinned memory"].level == "warn"


def test_memory_facts_of_this_machine():
    facts = memory_facts()
    assert facts.ram_total > 0 and facts.ram_available > 0
    if os.path.isdir("/dev/shm"):
        assert facts.shm_total > 0 and facts.shm_free is not None and "MiB free of" in facts.describe_shm()
    else:
        assert facts.shm_total is None and facts.shm_free is None


def test_where_the_os_has_no_dev_shm_its_size_is_not_known_not_zero(monkeypatch):
    from labkit.diagnose.autotuner import default_budget
    from labkit.diagnose.doctor import check_shared_memory

    monkeypatch.setattr("labkit.core.machine.SHM_DIR", "/no-such-dev-shm")  # as on macOS or Windows
    facts = memory_facts()
    assert facts.shm_total is None and facts.shm_free is None and facts.ram_total > 0
    assert facts.describe_shm().startswith("not available on ")
    finding = check_shared_memory(LoaderPlan(num_workers=8, prefetch_factor=4, batch_size=256), facts)
    assert finding.level == "ok" and "not available on" in finding.message  # nothing to overflow, no crash
    monkeypatch.setattr("labkit.diagnose.autotuner.memory_facts", lambda: facts)
    assert default_budget(0.5).shm_bytes == int(facts.ram_available * 0.5)  # batches then live in RAM


def _thread_settings(_):
    return torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")


def test_limit_worker_threads_in_real_workers(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    loader = DataLoader(
        range(4), batch_size=None, num_workers=2, worker_init_fn=limit_worker_threads, collate_fn=_thread_settings
    )
    assert set(loader) == {(1, "1")}
    assert "OMP_NUM_THREADS" not in os.environ  # the main process is left alone


def test_cli_prints_findings_and_exits_0(capsys):
    assert main(["doctor", "--workers", "8", "--prefetch", "4", "--batch", "64", "--image", "3x256x256"]) == 0
    out = capsys.readouterr().out
    assert "shared memory" in out and "CPUs" in out and "fail," in out


def test_main_process_threads_beside_busy_workers():
    finding = _levels(LoaderPlan(num_workers=2, main_threads=2), cpus=2)["main-process threads"]
    assert finding.level == "warn" and "torch.set_num_threads(1)" in finding.fix
    assert _levels(LoaderPlan(num_workers=2, main_threads=2), cpus=8)["main-process threads"].level == "ok"


def test_shm_batches_is_one_count_for_the_doctor_and_the_autotuner():
    from labkit.diagnose.doctor import LoaderPlan, shm_batches

    assert shm_batches(0, 4) == 0  # no workers: batches are made in the main process's own memory
    assert shm_batches(2, 2) == 6 and LoaderPlan(num_workers=2, prefetch_factor=2).shm_batches == 6


def test_torch_threads_sets_the_count_for_the_block_and_puts_it_back_even_on_error():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(KeyError):
        with torch_threads(1):
            raise KeyError("boom")
    assert torch.get_num_threads() == before


def test_decode_threads_beyond_the_cores_are_flagged_with_their_share():
    assert check_decode_threads(LoaderPlan(num_workers=2, decode_threads=None), cpus=8).level == "ok"
    finding = check_decode_threads(LoaderPlan(num_workers=4, decode_threads=4), cpus=8)
    assert finding.level == "warn" and "16 on 8 CPUs" in finding.message and "decode_threads=2" in finding.fix
    assert "the main process (no workers)" in check_decode_threads(LoaderPlan(num_workers=0), cpus=2).message


def test_the_doctor_lists_the_decoders_installed(capsys):
    assert main(["doctor", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "decode threads" in out and "simplejpeg   simplejpeg (libjpeg-turbo 3)" in out


def test_decode_threads_are_counted_across_the_ranks_of_a_node():
    fits = check_decode_threads(LoaderPlan(num_workers=7, ranks_per_node=8), cpus=64)
    assert (
        fits.level == "ok"
        and "1 decoding thread in each of 7 workers of each of 8 ranks: 56 on 64 CPUs" in fits.message
    )
    over = check_decode_threads(LoaderPlan(num_workers=7, ranks_per_node=8, decode_threads=8), cpus=64)
    assert over.level == "warn" and "448 on 64 CPUs" in over.message and "decode_threads=1" in over.fix
