"""scripts/run_notebooks.py: which cells it names as the slowest, read from the timings nbclient stores."""

import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_script():
    spec = importlib.util.spec_from_file_location("run_notebooks", os.path.join(ROOT, "scripts", "run_notebooks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_cell(source, start, end):
    return {
        "cell_type": "code",
        "source": source,
        "metadata": {"execution": {"iopub.execute_input": start, "shell.execute_reply": end}},
    }


def test_slowest_cells_orders_by_duration_and_skips_untimed_and_markdown(tmp_path):
    cells = [
        {"cell_type": "markdown", "source": "# title", "metadata": {}},
        timed_cell("\n\nfast = 1\n", "2026-12-02T10:00:00.000000Z", "2026-12-02T10:00:00.500000Z"),
        timed_cell(["# sweep\n", "run()\n"], "2026-12-02T10:00:01.000000Z", "2026-12-02T10:00:13.250000Z"),
        {"cell_type": "code", "source": "never_ran()", "metadata": {}},
        timed_cell("medium()", "2026-12-02T10:00:14.000000Z", "2026-12-02T10:00:17.000000Z"),
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    slowest = load_script().slowest_cells(str(path), 2)
    assert [(round(seconds, 2), number, first) for seconds, number, first in slowest] == [
        (12.25, 2, "# sweep"),
        (3.0, 4, "medium()"),
    ]
