"""labkit.course.resume_demo: killed with SIGKILL mid-epoch and resumed, it trains on every sample exactly once."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from labkit.course.resume_demo import train
from labkit.distributed.checkpoint import load_checkpoint


def _command(pack, ckpt):
    return [
        sys.executable,
        "-m",
        "labkit.course.resume_demo",
        "--pack",
        pack,
        "--checkpoint",
        ckpt,
        "--batch",
        "4",
        "--every",
        "2",
        "--step-s",
        "0.05",
    ]


def test_an_uninterrupted_run_sees_each_sample_once_per_epoch(decoded_pack, tmp_path):
    seen = train(decoded_pack, str(tmp_path / "run.ckpt"), epochs=2, batch_size=5, num_workers=0, every=2, step_s=0)
    assert seen.shape == (2, 24) and torch.all(seen == 1)
    state = load_checkpoint(str(tmp_path / "run.ckpt"))
    assert state["epoch"] == 1 and state["step"] == 5 and torch.equal(state["seen"], seen)


@pytest.mark.timeout(240)
def test_sigkill_mid_epoch_then_resume_trains_on_every_sample_exactly_once(decoded_pack, tmp_path):
    ckpt = str(tmp_path / "run.ckpt")
    job = subprocess.Popen(_command(decoded_pack, ckpt), stdout=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 150
    for line in job.stdout:
        if line.strip() == "step 1 3" or time.monotonic() > deadline:  # mid-epoch 2, one step past a checkpoint
            break
    os.killpg(job.pid, signal.SIGKILL)  # the job and its DataLoader workers, as a preempted node loses them
    job.wait(timeout=30)
    assert job.returncode == -signal.SIGKILL
    state = load_checkpoint(ckpt)
    assert (state["epoch"], state["step"]) == (1, 2)
    assert state["handed_out"] > state["loader"]["sampler"]["position"] == 8  # the workers had pulled indices ahead
    resumed = subprocess.run(_command(decoded_pack, ckpt), capture_output=True, text=True, timeout=150)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.stdout.splitlines()[0] == "resumed at epoch 1 step 2"
    seen = load_checkpoint(ckpt)["seen"]
    assert torch.all(seen == 1), f"counts other than 1: {seen.unique(return_counts=True)}"
