#!/usr/bin/env python3
"""Write each executed notebook's quick-mode run time into its header, from the run itself.

The header's ``**Time:** N s in quick mode`` is a measurement: the seconds from the first code cell's start to
the last one's end, as the executing kernel recorded them in the notebook (nbclient's ``metadata.execution``),
rounded up. ``python scripts/stamp_run_time.py notebooks/*.ipynb`` after executing them in quick mode
(`tests/project/test_notebooks.py` checks each header against its stored run with `run_seconds`; ``--check``
says which differ without writing).
"""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import datetime
from typing import Any

QUICK_TIME = re.compile(r"(\*\*Time:\*\* )(\d+)( s in quick mode)")


def run_seconds(nb: dict[str, Any]) -> int | None:
    """The stored run's seconds, first code cell's start to last one's end, rounded up; None without timings."""
    stamps = [cell.get("metadata", {}).get("execution", {}) for cell in nb["cells"] if cell["cell_type"] == "code"]
    starts = [s["iopub.execute_input"] for s in stamps if "iopub.execute_input" in s]
    ends = [s["shell.execute_reply"] for s in stamps if "shell.execute_reply" in s]
    if not starts or not ends:
        return None
    parse = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    return math.ceil((parse(ends[-1]) - parse(starts[0])).total_seconds())


def header_seconds(nb: dict[str, Any]) -> int | None:
    """The quick-mode seconds the title cell states, or None where it states none."""
    found = QUICK_TIME.search("".join(nb["cells"][0]["source"]))
    return int(found.group(2)) if found else None


def stamp(path: str, write: bool = True) -> str | None:
    """Set ``path``'s header to its stored run's seconds; what changed (``"45 -> 54 s"``), or None."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    seconds, stated = run_seconds(nb), header_seconds(nb)
    if seconds is None:
        raise SystemExit(f"{path}: no cell timings stored: execute it with nbconvert/nbclient first")
    if stated is None:
        raise SystemExit(f"{path}: its title cell has no '**Time:** N s in quick mode' to set")
    if stated == seconds:
        return None
    if write:
        title = nb["cells"][0]
        text = QUICK_TIME.sub(lambda m: f"{m.group(1)}{seconds}{m.group(3)}", "".join(title["source"]), count=1)
        title["source"] = text.splitlines(keepends=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return f"{stated} -> {seconds} s"


if __name__ == "__main__":
    check = "--check" in sys.argv
    differ = 0
    for name in (a for a in sys.argv[1:] if a != "--check"):
        change = stamp(name, write=not check)
        differ += change is not None
        print(f"{name}: {change or 'as stated'}")
    sys.exit(1 if check and differ else 0)
