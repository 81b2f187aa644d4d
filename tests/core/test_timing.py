"""The one timing engine: a pass, a loop's waits, repeated calls and what is read from them, on a fake clock."""

import pytest

from labkit.core.errors import LabkitError
from labkit.core.timing import Deadline, Passes, Stopwatch, time_calls, timed, timestamp


def test_a_stopwatch_reads_the_time_since_it_started_and_since_its_last_lap(fake_clock):
    watch = Stopwatch()
    fake_clock.sleep(0.5)
    assert watch.lap() == 0.5
    fake_clock.sleep(0.25)
    assert watch.lap() == 0.25 and watch.elapsed == 0.75


def test_timed_counts_only_the_wait_for_each_item_not_the_caller_s_work(fake_clock):
    def slow_items():
        for wait in (0.1, 0.2, 0.3):
            fake_clock.sleep(wait)
            yield wait

    waits = []
    for waited, item in timed(slow_items()):
        waits.append(waited)
        assert waited == pytest.approx(item)
        fake_clock.sleep(1.0)  # the caller's own work is not the next item's wait
    assert waits == pytest.approx([0.1, 0.2, 0.3])


def test_time_calls_leaves_the_warm_up_out_and_one_slow_pass_does_not_decide(fake_clock):
    seconds = iter([5.0, 1.0, 1.0, 9.0])
    passes = time_calls(lambda: fake_clock.sleep(next(seconds)), repeats=3, warmup=1)
    assert passes.seconds == (1.0, 1.0, 9.0) and passes.median == 1.0
    assert passes.best == 1.0 and passes.spread == (1.0, 9.0) and len(passes) == 3
    assert passes.per_second(64) == [64.0, 64.0, 64 / 9]


def test_nothing_timed_is_refused_with_the_fix():
    with pytest.raises(LabkitError, match="repeats=0"):
        time_calls(lambda: None, 0)
    with pytest.raises(LabkitError, match="at least one"):
        Passes(())


def test_a_deadline_expires_and_says_what_is_left(fake_clock):
    deadline = Deadline(2.0)
    assert not deadline.expired and deadline.remaining == 2.0
    fake_clock.sleep(1.5)
    assert deadline.remaining == 0.5
    fake_clock.sleep(1.0)
    assert deadline.expired and deadline.remaining == 0.0


def test_a_timestamp_is_one_clock_for_every_process(fake_clock):
    fake_clock.sleep(3.0)
    assert timestamp() == 3.0  # the monotonic clock: the same in every process of this machine
