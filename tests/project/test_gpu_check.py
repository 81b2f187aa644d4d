"""scripts/gpu_check.sh, the one prepared run for a GPU machine, run here on the CPU with a few images: every step
but the CUDA ones, so the script cannot rot between GPU machines."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.timeout(600)
def test_the_gpu_check_runs_every_step_on_a_cpu(tmp_path):
    out = tmp_path / "out"
    env = dict(
        os.environ,
        DEVICE="cpu",
        N="24",
        RUNS="1",
        STEPS="2",
        OUT=str(out),
        DATA=str(tmp_path / "photos"),
        WHEELS=str(tmp_path / "no-wheels"),
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
    )
    env.pop("LABKIT_QUICK", None)
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=580
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "gpu_doctor.txt").read_text().startswith("labkit doctor: num_workers")
    assert "skipped" in (out / "gpu_tests.txt").read_text()  # the CUDA tests: collected, and skipped on a CPU
    for name in ("ablation_gpu", "ablation_gpu_resnet50"):
        report = json.loads((out / f"{name}.json").read_text())
        ran = [v["id"] for v in report["versions"]]
        assert ran[:2] == ["v1", "v2"] and "v5" in ran and "v8" not in ran  # v8 decodes with nvJPEG: CUDA only
        assert (out / f"{name}.png").stat().st_size > 0 and "Verdict" in (out / f"{name}.txt").read_text()
