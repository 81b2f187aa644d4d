"""Per-core CPU sampling: the samples, this process's share, and the reading in the seed's terms."""

import multiprocessing
import time

import matplotlib
import numpy as np
import pytest

from labkit.core.environment import usable_cpu_ids
from labkit.measure.cpu_usage import CoreSampler, CoreUsage

matplotlib.use("Agg")


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _usage(busy, iowait=None, own=0.9):
    busy = np.asarray(busy, dtype=float)
    iowait = np.zeros_like(busy) if iowait is None else np.asarray(iowait, dtype=float)
    return CoreUsage(np.arange(1, len(busy) + 1) * 0.2, busy, iowait, list(range(busy.shape[1])), own)


def test_sampling_a_busy_child_records_every_core_and_counts_its_cpu_time():
    child = multiprocessing.get_context("fork").Process(target=_spin, args=(1.0,))
    with CoreSampler(0.1) as sampler:
        child.start()
        child.join()  # the child has ended before the block does: its CPU time still counts
    usage = sampler.usage
    assert usage.cores == usable_cpu_ids() and usage.busy.shape == (len(usage.times), len(usage.cores))
    assert len(usage.times) >= 5 and np.all(np.diff(usage.times) > 0)
    assert np.all((usage.busy >= 0) & (usage.busy <= 100))
    # One core spun for ~1 s of a ~1 s block: well above nothing, even on a machine shared with others.
    assert usage.own_share > 0.05 / len(usage.cores)


def test_idle_cores_point_at_more_workers_or_waits():
    usage = _usage([[95, 5], [90, 10], [100, 0]])
    assert usage.idle_cores() == [1]
    assert "cores [1] stayed mostly idle" in usage.reading()


def test_every_core_busy_is_a_cpu_limit_unless_the_loop_does_not_wait():
    usage = _usage([[95, 90], [100, 85]])
    assert "the CPU is the limit" in usage.reading()
    assert "the CPU is the limit" in usage.reading(data_share=0.5)
    assert "compute side sets the pace" in usage.reading(data_share=0.02)


def test_io_wait_and_other_programs_are_named():
    usage = _usage([[20, 20], [20, 20]], iowait=[[40, 30], [50, 20]])
    assert "waiting on I/O" in usage.reading()
    crowded = _usage([[100, 100], [100, 100]], own=0.1)
    text = crowded.reading()
    assert "other programs about 90%" in text and "quieter machine" in text


def test_no_sample_and_bad_interval():
    assert "no sample" in _usage(np.zeros((0, 2))).reading()
    with pytest.raises(ValueError, match="interval"):
        CoreSampler(0)


def test_plot_has_one_line_per_core_and_labels():
    ax = _usage([[95, 5], [90, 10]], iowait=[[0, 3], [0, 4]]).plot(title="run")
    assert len(ax.get_lines()) == 2 and ax.get_ylabel() == "CPU busy (%)" and ax.get_title() == "run"


def test_where_the_os_does_not_report_io_wait_it_is_not_known_not_zero(monkeypatch):
    import collections

    import psutil

    Times = collections.namedtuple("Times", "user system idle")  # what psutil gives on macOS and Windows
    width = max(usable_cpu_ids()) + 1

    def without_iowait(interval=None, percpu=False):
        time.sleep(interval or 0)
        return [Times(30.0, 10.0, 60.0)] * width

    monkeypatch.setattr(psutil, "cpu_times_percent", without_iowait)
    with CoreSampler(0.05) as sampler:
        time.sleep(0.2)
    usage = sampler.usage
    assert usage.iowait is None and usage.mean_iowait is None
    assert np.allclose(usage.busy, 40.0)  # busy is still 100 - idle
    assert "I/O wait is not available on" in usage.reading() and "waiting on I/O" not in usage.reading()
    assert len(usage.plot().get_lines()) == len(usage.cores)
