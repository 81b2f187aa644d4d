"""A too-small /dev/shm, reproduced: what torch reports, that the doctor predicted it, and that its fix works.

The loaders run in a child process (``python -m labkit.diagnose.small_shm``, the lab's own script) with a private 16 MiB
/dev/shm (`labkit.diagnose.small_shm.private_shm`), like a container started without ``--shm-size``. Where the OS does
not allow that, those tests skip with the reason and the doctor's estimate is still tested on the same plans with a
synthetic 16 MiB /dev/shm.
"""

import json
import subprocess
import sys

import pytest

from labkit.core.machine import MemoryFacts
from labkit.diagnose.doctor import LoaderPlan, check_shared_memory

MIB = 2**20
SHM_MIB = 16
IMAGE = (3, 256, 256)
# 2 workers × prefetch 4 of 12 MiB batches (64 images of 3x256x256, uint8): far more than 16 MiB.
TOO_BIG = LoaderPlan(num_workers=2, prefetch_factor=4, batch_size=64, image=IMAGE)
# The doctor's fix: prefetch 1 and 3 MiB batches; (2 × 1 + 2) × 3 MiB = 12 MiB.
FITS = LoaderPlan(num_workers=2, prefetch_factor=1, batch_size=16, image=IMAGE)
# multiprocessing's locks and semaphores take a page each in /dev/shm beside the batches.
SEMAPHORES = MIB


def _run(*options, plans=(TOO_BIG,)):
    """``python -m labkit.diagnose.small_shm``'s results (one per plan) and what its workers printed."""
    command = [sys.executable, "-m", "labkit.diagnose.small_shm", "--shm-mib", str(SHM_MIB), *options]
    for plan in plans:
        command += ["--plan", f"{plan.num_workers},{plan.prefetch_factor},{plan.batch_size}"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if lines and "unavailable" in lines[0]:
        pytest.skip(f"this OS does not let a process mount its own /dev/shm: {lines[0]['unavailable']}")
    assert out.returncode == 0 and len(lines) == len(plans), out.stderr[-3000:]
    return lines, out.stderr


@pytest.fixture(scope="module")
def small_shm():
    """Every scenario's result by name, and the stderr of the whole-batch run (what its workers printed)."""
    (too_big, fits), _ = _run(plans=(TOO_BIG, FITS))
    (file_system,), _ = _run("--sharing-strategy", "file_system")
    (whole,), stderr = _run("--whole-batches")
    return {"too big": too_big, "fits": fits, "too big, file_system": file_system, "whole batches": whole}, stderr


def test_the_doctor_fails_the_plan_that_overflows_16_mib_and_passes_its_fix():
    small = MemoryFacts(ram_total=8 << 30, ram_available=4 << 30, shm_total=SHM_MIB * MIB, shm_free=SHM_MIB * MIB)
    too_big, fits = check_shared_memory(TOO_BIG, small), check_shared_memory(FITS, small)
    assert too_big.level == "fail" and "No space left on device" in too_big.message
    assert "--shm-size" in too_big.fix and "prefetch_factor" in too_big.fix
    assert "file_system') does not help" in too_big.fix and "Too many open files" in too_big.fix
    assert fits.level != "fail" and FITS.shm_bytes == (2 * 1 + 2) * 16 * 3 * 256 * 256
    # One batch fewer in flight than the doctor counts is already too much here.
    tighter = MemoryFacts(small.ram_total, small.ram_available, FITS.shm_bytes - 1, FITS.shm_bytes - 1)
    assert check_shared_memory(FITS, tighter).level == "fail"


def test_overflow_fails_as_torch_reports_it_and_as_the_doctor_predicted(small_shm):
    result = small_shm[0]["too big"]
    assert result["plan"] == [2, 4, 64] and result["batch_mib"] == 12
    assert result["level"] == "fail"  # the doctor, run inside the same 16 MiB /dev/shm before the loader
    assert result["outcome"].startswith("RuntimeError: Caught RuntimeError in DataLoader worker process")
    assert "unable to allocate shared memory(shm)" in result["outcome"]
    assert "Traceback" not in result["outcome"]
    # torch names ENOSPC ("No space left on device"); some releases (2.11) print a stale errno in its place
    assert result["batches"] < 8 and result["left_used_mib"] == 0  # the failure left nothing in /dev/shm


def test_file_system_sharing_strategy_does_not_make_room(small_shm):
    # Both strategies put every batch in /dev/shm; file_system only passes names instead of descriptors.
    # (Measured besides: after this failure it leaves torch_* files in /dev/shm, sometimes a whole batch.)
    result = small_shm[0]["too big, file_system"]
    assert result["level"] == "fail" and result["batches"] < 8
    assert "unable to allocate shared memory(shm)" in result["outcome"]


def test_the_plan_the_doctor_passes_completes_in_the_same_shm(small_shm):
    result = small_shm[0]["fits"]
    assert result["level"] != "fail" and result["outcome"] == "completed" and result["batches"] == 8
    assert 0 < result["peak_used_mib"] * MIB <= FITS.shm_bytes + SEMAPHORES  # the doctor's count bounds the use
    assert result["left_used_mib"] == 0


def test_a_batch_returned_whole_is_dropped_and_the_watchdog_says_where_to_look(small_shm):
    results, stderr = small_shm
    result = results["whole batches"]
    # The worker could not move its batch into /dev/shm: its feeder thread printed the error and dropped it...
    assert "unable to allocate shared memory(shm)" in stderr
    # ...so a plain DataLoader would wait forever; the watchdog names the likely cause and the /dev/shm left.
    assert result["outcome"].startswith("LoaderHangError: no batch arrived for 2 s")
    assert "No worker is inside the dataset" in result["error"] and "free of 16.0 MiB" in result["error"]
    assert result["level"] == "fail"


def test_private_shm_refuses_a_size_below_one_page():
    from labkit.diagnose.small_shm import private_shm

    with pytest.raises(ValueError, match="4096"):
        private_shm(100)
