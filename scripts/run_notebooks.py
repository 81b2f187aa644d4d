#!/usr/bin/env python3
"""Run the course's notebooks top to bottom, as macOS and Windows would, and time each one.

``--start-method spawn`` (or ``forkserver``) makes every process of the run use that start method: the
kernel and each process it starts read a ``sitecustomize.py`` from a temporary folder put first on
``PYTHONPATH``. On Linux this is the way to try the course as a learner on macOS or Windows runs it
(spawn), or on Linux from Python 3.14 (forkserver). The notebooks are executed into a temporary copy: the
committed ones, and their stored outputs, are left as they are.

    python scripts/run_notebooks.py --start-method spawn notebooks/*.ipynb
    LABKIT_QUICK=0 python scripts/run_notebooks.py notebooks/04_workers_pin_prefetch.ipynb   # full mode

Prints one line per notebook (seconds, and the first error if it failed), then its slowest cells (the ones to
look at when a notebook runs long), and exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime

SITECUSTOMIZE = """\
import multiprocessing
multiprocessing.set_start_method({method!r}, force=True)
"""


def run(notebook: str, out_dir: str, env: dict, timeout_s: int) -> str | None:
    """Execute ``notebook`` into ``out_dir``; None if it ran through, else the tail of the error."""
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        f"--ExecutePreprocessor.timeout={timeout_s}",
        "--output-dir",
        out_dir,
        notebook,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return "\n    ".join(lines[-6:])


def slowest_cells(executed: str, count: int) -> list[tuple[float, int, str]]:
    """(seconds, cell number, first line) of the ``count`` slowest code cells, from the timings nbclient records."""
    with open(executed, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    timed = []
    for number, cell in enumerate(cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        if cell["cell_type"] == "code" and "iopub.execute_input" in stamps and "shell.execute_reply" in stamps:
            seconds = (
                datetime.fromisoformat(stamps["shell.execute_reply"].rstrip("Z"))
                - datetime.fromisoformat(stamps["iopub.execute_input"].rstrip("Z"))
            ).total_seconds()
            first = next((line for line in "".join(cell["source"]).splitlines() if line.strip()), "")
            timed.append((seconds, number, first[:70]))
    return sorted(timed, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument(
        "--start-method",
        choices=["fork", "spawn", "forkserver"],
        default=None,
        help="the start method every process uses (default: the platform's)",
    )
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run (default 600)")
    parser.add_argument("--slowest", type=int, default=3, help="how many of each notebook's slowest cells to list")
    args = parser.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="labkit-notebooks-") as scratch:
        env = dict(os.environ)
        env.setdefault("LABKIT_QUICK", "1")
        if args.start_method:
            with open(os.path.join(scratch, "sitecustomize.py"), "w", encoding="utf-8") as f:
                f.write(SITECUSTOMIZE.format(method=args.start_method))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (scratch, env.get("PYTHONPATH", "")) if p)
        mode = "quick" if env["LABKIT_QUICK"] != "0" else "full"
        print(f"{len(args.notebooks)} notebooks, {mode} mode, start method {args.start_method or 'default'}")
        for notebook in args.notebooks:
            start = time.monotonic()
            error = run(notebook, scratch, env, args.timeout)
            seconds = time.monotonic() - start
            failed += error is not None
            print(
                f"{os.path.basename(notebook):<32} {seconds:6.1f} s  {'ok' if error is None else 'FAILED'}"
                + (f"\n    {error}" if error else ""),
                flush=True,
            )
            executed = os.path.join(scratch, os.path.basename(notebook))
            if error is None and args.slowest and os.path.exists(executed):
                for cell_s, number, first in slowest_cells(executed, args.slowest):
                    print(f"    cell {number:>3} {cell_s:6.1f} s  {first}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
