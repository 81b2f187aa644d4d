"""Switches read from the environment, in one place so every command and notebook agrees."""

from __future__ import annotations

import os

QUICK_ENV = "LABKIT_QUICK"


def quick_mode(default: bool = False) -> bool:
    """True when ``LABKIT_QUICK`` is set to anything but ``""``/``0``/``false``/``no``:
    every command and notebook then shrinks its data to run on a 2-core laptop in under a minute.

    ``default`` answers when the variable is unset: the CLI runs at full scale unless asked,
    the notebooks run quick unless asked (a learner's first run should take a minute, not an hour).
    """
    value = os.environ.get(QUICK_ENV)
    if value is None:
        return default
    return value.strip().lower() not in ("", "0", "false", "no")


def usable_cpus() -> int:
    """CPUs this process may run on (respects taskset/cgroup affinity, unlike ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
