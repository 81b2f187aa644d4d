"""examples/train.py, the recipe README shows: under torchrun with two gloo ranks, killed with SIGKILL after a
checkpoint and resumed with another worker count, it ends with the very weights of a run never killed."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from labkit.core.processes import kill_process_tree
from labkit.distributed.checkpoint import load_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(300)
EPOCHS, STEPS_PER_EPOCH = 6, 3  # 24 images, 2 ranks, batches of 4


def _command(photos, checkpoint, workers, *extra):
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        os.path.join(ROOT, "examples", "train.py"),
        "--data",
        photos,
        "--val",
        photos,
        "--epochs",
        str(EPOCHS),
        "--batch",
        "4",
        "--size",
        "32",
        "--workers",
        str(workers),
        "--checkpoint",
        checkpoint,
        "--save-every",
        "2",
        *extra,
    ]


def _env():
    # one thread per rank: the same arithmetic in every run, so the weights can be compared bit for bit
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}


def _weights(checkpoint):
    return load_checkpoint(checkpoint)["model"]


def test_killed_and_resumed_under_torchrun_it_ends_with_the_weights_of_an_unbroken_run(photos, tmp_path):
    reference = str(tmp_path / "reference.ckpt")
    done = subprocess.run(_command(photos, reference, 0), capture_output=True, text=True, env=_env(), timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 rank(s) on cpu" in done.stdout and "validation: " in done.stdout
    assert load_checkpoint(reference)["step"] == EPOCHS * STEPS_PER_EPOCH

    broken = str(tmp_path / "broken.ckpt")
    job = subprocess.Popen(
        _command(photos, broken, 2), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env()
    )
    deadline, lines = time.monotonic() + 150, []
    for line in job.stdout:
        lines.append(line)
        if line.startswith("epoch 1 step 5 ") or time.monotonic() > deadline:  # one step past the checkpoint at 4
            break
    kill_process_tree(job.pid)  # torchrun, both ranks (each in a session of its own) and their workers at once
    job.wait(timeout=30)
    assert any(line.startswith("epoch 1 step 5 ") for line in lines), "".join(lines)[-2000:]
    killed_at = load_checkpoint(broken)["step"]  # the run went on for a few steps while the kill was on its way
    assert job.returncode == -signal.SIGKILL and 4 <= killed_at < EPOCHS * STEPS_PER_EPOCH

    resumed = subprocess.run(_command(photos, broken, 1), capture_output=True, text=True, env=_env(), timeout=200)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"at epoch {killed_at // STEPS_PER_EPOCH}, step {killed_at}" in resumed.stdout
    left = STEPS_PER_EPOCH - killed_at % STEPS_PER_EPOCH  # the resumed pass's progress counts what is left
    assert f"epoch {killed_at // STEPS_PER_EPOCH}: {left} of its {STEPS_PER_EPOCH} batches to go" in resumed.stdout
    ours, theirs = _weights(broken), _weights(reference)
    assert ours.keys() == theirs.keys()
    different = [name for name in ours if not torch.equal(ours[name], theirs[name])]
    assert not different, f"weights that differ from the unbroken run: {different}"


def test_one_process_with_bf16_autocast_trains_and_validates(photos, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "examples", "train.py"),
            "--data",
            photos,
            "--val",
            photos,
            "--epochs",
            "1",
            "--batch",
            "8",
            "--size",
            "32",
            "--workers",
            "0",
            "--amp",
            "bf16",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=200,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "precision: bf16 autocast" in run.stdout and "validation: " in run.stdout


def test_a_missing_folder_is_one_line_naming_it(tmp_path):
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "train.py"), "--data", str(tmp_path / "typo")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=200,
    )
    assert run.returncode == 1 and run.stderr.startswith("train.py: ") and "typo" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
