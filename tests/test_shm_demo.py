"""labkit.diagnose.small_shm_demo: the lab's script for a too-small /dev/shm runs plans as its docstring says."""

import json
import subprocess
import sys

import pytest


@pytest.mark.timeout(120)
def test_overflowing_plan_fails_as_torch_reports_it_and_its_fix_completes():
    out = subprocess.run([sys.executable, "-m", "labkit.diagnose.small_shm_demo", "--shm-mib", "16", "--plan", "2,4,64",
                          "--plan", "2,1,16"], capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if "unavailable" in lines[0]:
        pytest.skip(f"this OS does not let a process mount its own /dev/shm: {lines[0]['unavailable']}")
    too_big, fits = lines
    assert too_big["plan"] == [2, 4, 64] and too_big["level"] == "fail" and too_big["batch_mib"] == 12
    assert "No space left on device" in too_big["outcome"] and "Traceback" not in too_big["outcome"]
    assert too_big["batches"] < 8 and too_big["left_used_mib"] < 1
    assert fits["outcome"] == "completed" and fits["batches"] == 8 and fits["level"] != "fail"
    assert 0 < fits["peak_used_mib"] <= 16
