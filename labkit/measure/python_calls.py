"""How many Python function calls a piece of work makes, in every thread it starts: the count behind "Python work is
per batch, not per sample".

A timing on a shared 2-core machine is noise; a count of calls is not. `count_python_calls` runs a function with a
profile hook in the calling thread and in every thread started while it runs (the batch decoder's helpers), and
counts each Python function entered (``call`` events: a C function such as a decoder or a torch kernel is not one),
by where it was defined, so a count per sample says which layer spends the calls.
"""

from __future__ import annotations

import collections
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CallCount:
    """Python function calls made by one run, in total and per ``(file, function)``."""

    total: int
    by_function: Counter = field(default_factory=collections.Counter)

    def per(self, items: int) -> float:
        """Calls per item (per sample of a batch, say)."""
        return self.total / max(1, items)

    def top(self, n: int = 10) -> list[tuple[str, int]]:
        """The ``n`` functions called most, as ``"file:function"`` and their count."""
        return [(f"{where}:{name}", k) for (where, name), k in self.by_function.most_common(n)]


def count_python_calls(fn: Callable[[], Any]) -> CallCount:
    """Run ``fn()`` once and count the Python calls it and the threads it starts make (not those of threads
    already running, which are not its work)."""
    counts: Counter = collections.Counter()
    lock = threading.Lock()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            with lock:
                counts[(code.co_filename.rsplit("/", 2)[-1], code.co_name)] += 1

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return CallCount(sum(counts.values()), counts)
