"""A time limit for a block of code, so a lab that reproduces a hang can never hang the kernel.

The troubleshooting labs start loaders that are meant to fail: a stuck worker, a deadlock after
fork, a pipeline interrupted half-way. Each of them already ends by itself (a watchdog, a
timeout), but a lab must not depend on that being right on every machine. `time_limit` raises
`TimeLimitExceeded` in the main thread once the block has run for the seconds given, even from a
blocking call (SIGALRM interrupts it); where there is no SIGALRM (Windows), a timer thread
interrupts the main thread instead, which stops Python code but not a call blocked in C.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
from collections.abc import Iterator

from labkit.core.errors import LabkitError, LabkitRuntimeError, LabkitValueError

HAS_ALARM = hasattr(signal, "setitimer")  # POSIX; Windows has no SIGALRM


class TimeLimitExceeded(LabkitError, TimeoutError):
    """The block ran past its limit; the message names the block and the limit."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str = "this block") -> Iterator[None]:
    """Run the block for at most ``seconds``, then raise `TimeLimitExceeded` naming ``what``."""
    if seconds <= 0:
        raise LabkitValueError(f"seconds must be > 0, got {seconds}")
    if threading.current_thread() is not threading.main_thread():
        raise LabkitRuntimeError("time_limit interrupts the main thread: use it there (a notebook cell runs there)")
    message = f"{what} ran past its time limit of {seconds:g} s and was stopped"
    if HAS_ALARM:

        def _expire(signum: int, frame: object) -> None:
            raise TimeLimitExceeded(message)

        previous = signal.signal(signal.SIGALRM, _expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    # interrupt_main raises KeyboardInterrupt only through Python's own SIGINT handler: put it back for the
    # block, whatever handler was installed before (a pipeline's, a test runner's).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.daemon = True
    timer.start()
    try:
        yield
    except KeyboardInterrupt:
        if timer.is_alive():  # a real Ctrl-C, not the timer
            raise
        raise TimeLimitExceeded(message) from None
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
