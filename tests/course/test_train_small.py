import os
import subprocess
import sys

from labkit.core.environment import PROFILE_ENV


def test_the_plain_script_prints_a_profile_per_epoch_when_the_switch_is_on(encoded_pack):
    command = [
        sys.executable,
        "-m",
        "labkit.course.train_small",
        "--pack",
        encoded_pack,
        "--epochs",
        "2",
        "--batch",
        "8",
        "--size",
        "64",
        "--workers",
        "1",
    ]
    on = subprocess.run(command, env={**os.environ, PROFILE_ENV: "1"}, capture_output=True, text=True, timeout=300)
    assert on.returncode == 0, on.stderr[-2000:]
    assert [line.split(":")[0] for line in on.stdout.splitlines()] == ["epoch 1", "epoch 2"]
    assert sum(line.startswith(f"[{PROFILE_ENV}]") for line in on.stderr.splitlines()) == 2
    off = subprocess.run(
        command[:6] + ["1"] + command[7:],
        env={**os.environ, PROFILE_ENV: "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert off.returncode == 0 and f"[{PROFILE_ENV}]" not in off.stderr
