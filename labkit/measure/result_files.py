"""Where a benchmark's result goes, decided and checked before it measures anything.

One naming rule, ``<name>_<N>cpu[_quick].json`` in ``benchmarks/results/`` (N usable CPUs, so runs on
machines of different sizes sit side by side), and one check: a result file that cannot be written
stops the run at its start, not after minutes of measuring. Results are written whole, the machine first
(`write_result`).
"""

from __future__ import annotations

import os
from typing import Any

from labkit.core.atomic import write_json
from labkit.core.environment import clone_root, usable_cpus
from labkit.core.machine import machine_info
from labkit.core.user_paths import check_output_file


def result_path(name: str, quick: bool, given: str | None = None, folder: str | None = None) -> str:
    """``given`` (a ``--json`` path) when set, else ``<folder>/<name>_<N>cpu[_quick].json`` (``folder``: the
    clone's ``benchmarks/results``); checked to be writable now (`OutputPathError` naming it)."""
    if given:
        return check_output_file(given, "--json")
    if folder is None:
        folder = os.path.join(clone_root() or os.getcwd(), "benchmarks", "results")
    stem = f"{name}_{usable_cpus()}cpu{'_quick' if quick else ''}"
    return check_output_file(os.path.join(folder, f"{stem}.json"), "the result file")


def write_result(path: str, result: dict[str, Any]) -> None:
    """Write a measurement's ``result`` to ``path`` whole (`labkit.core.atomic.write_json`: a run stopped
    mid-write leaves the previous file, never half of one), with the machine it ran on first: ``result["machine"]``
    where the caller measured it already, else `labkit.core.machine.machine_info` now."""
    write_json(path, {"machine": result.get("machine") or machine_info(), **result})
