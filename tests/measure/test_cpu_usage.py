"""Per-core CPU sampling: the samples, this process's share, and the reading in the seed's terms."""

import multiprocessing
import time

import matplotlib
import numpy as np
import pytest

from labkit.core.environment import usable_cpu_ids
from labkit.measure.cpu_usage import CoreSampler, CoreUsage, time_shares

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


def test_busy_cores_that_were_mostly_other_programs_are_no_cpu_limit():
    # One process decoding on one of 2 cores while something else fills both: the cores are busy, this loader is not
    # the reason, and "more workers cannot help" would be wrong.
    text = _usage([[99, 80], [99, 80]], own=0.47).reading()
    assert "the CPU is the limit" not in text
    assert "only 0.9 of the 2 cores' time" in text and text.count("quieter machine") == 1
    assert "the CPU is the limit" in _usage([[99, 80], [99, 80]], own=0.85).reading()


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

    clock = {"calls": 0}

    def without_iowait(percpu=False):  # each call 0.1 s later: 30 % user, 10 % system, 60 % idle
        clock["calls"] += 1
        k = clock["calls"]
        return [Times(0.03 * k, 0.01 * k, 0.06 * k)] * width

    monkeypatch.setattr(psutil, "cpu_times", without_iowait)
    with CoreSampler(0.05) as sampler:
        time.sleep(0.2)
    usage = sampler.usage
    assert usage.iowait is None and usage.mean_iowait is None
    assert np.allclose(usage.busy, 40.0)  # busy is still 100 - idle
    assert "I/O wait is not available on" in usage.reading() and "waiting on I/O" not in usage.reading()
    assert len(usage.plot().get_lines()) == len(usage.cores)


def test_shares_are_of_the_interval_however_short_it_is():
    import psutil

    Times = type(psutil.cpu_times())  # this OS's fields
    zero = Times(*[0.0] * len(Times._fields))
    # 0.2 s of one core, 0.05 s of it busy: 25 % user, 75 % idle (psutil.cpu_times_percent says 5 % and 15 %).
    after = zero._replace(user=0.05, idle=0.15)
    shares = time_shares(zero, after)
    assert type(shares) is Times and abs(shares.user - 25.0) < 1e-9 and abs(shares.idle - 75.0) < 1e-9
    assert abs(sum(shares) - 100.0) < 1e-9
    if "guest" in Times._fields:  # Linux counts guest time inside user time: not twice
        shares = time_shares(zero, zero._replace(user=0.1, guest=0.1, idle=0.1))
        assert abs(shares.user - 50.0) < 1e-9 and abs(shares.idle - 50.0) < 1e-9
    assert time_shares(zero, zero) is None  # no tick in between: no sample


def test_the_sampled_busy_share_agrees_with_the_cpu_counters_over_the_same_run():
    # One process spinning beside idle cores, sampled every 0.2 s: through psutil.cpu_times_percent an idle core
    # read 80 % busy. The average over the run must match the machine's own counters, read once before and after.
    import psutil

    child = multiprocessing.get_context("fork").Process(target=_spin, args=(1.5,))
    before = psutil.cpu_times(percpu=True)
    with CoreSampler(0.2) as sampler:
        child.start()
        child.join()
    after = psutil.cpu_times(percpu=True)
    cores = sampler.usage.cores
    counted = []
    for c in cores:
        delta = {f: getattr(after[c], f) - getattr(before[c], f) for f in after[c]._fields}
        total = sum(v for f, v in delta.items() if f not in ("guest", "guest_nice"))
        counted.append(100.0 * (1 - (delta["idle"] + delta.get("iowait", 0.0)) / total))
    assert abs(sampler.usage.mean_busy.mean() - np.mean(counted)) < 15, (sampler.usage.mean_busy, counted)
