import signal
import threading
import time

import pytest

from labkit.course.time_limits import TimeLimitExceeded, time_limit


def test_a_blocking_call_is_stopped_at_the_limit_and_named():
    t0 = time.monotonic()
    with pytest.raises(TimeLimitExceeded, match="the stuck read ran past its time limit of 0.3 s"):
        with time_limit(0.3, "the stuck read"):
            time.sleep(30)
    assert time.monotonic() - t0 < 5


def test_a_block_that_finishes_in_time_is_untouched_and_the_alarm_is_cleared():
    with time_limit(1.0):
        value = sum(range(1000))
    time.sleep(1.3)  # an alarm left armed would fire here
    assert value == 499500


def test_without_sigalrm_a_timer_interrupts_python_code(monkeypatch):
    import labkit.course.time_limits

    monkeypatch.setattr(labkit.course.time_limits, "HAS_ALARM", False)  # as on Windows
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # whatever SIGINT handler was there must not matter
    try:
        with pytest.raises(TimeLimitExceeded, match="polling loop"):
            with time_limit(0.3, "polling loop"):
                for _ in range(300):
                    time.sleep(0.01)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # and it is put back
    finally:
        signal.signal(signal.SIGINT, previous)


def test_only_in_the_main_thread():
    errors = []

    def run():
        try:
            with time_limit(1):
                pass
        except RuntimeError as e:
            errors.append(str(e))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors and "main thread" in errors[0]


def test_needs_a_positive_limit():
    with pytest.raises(ValueError):
        with time_limit(0):
            pass
