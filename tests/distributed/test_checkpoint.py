"""Checkpoints written atomically: a kill or a full disk mid-write leaves the last good one; damaged or foreign
files are refused by name. (A training loop killed and resumed from one: tests/workers/test_stateful_loader.py.)"""

import argparse
import io
import multiprocessing
import os
import re
import signal
import struct
import time
import zlib

import numpy as np
import pytest
import torch

from labkit.distributed.checkpoint import MAGIC, CheckpointError, load_checkpoint, save_checkpoint

# -- the file itself ------------------------------------------------------------------------------------


def test_round_trip_of_tensors_and_plain_state(tmp_path):
    path = tmp_path / "ckpt.pt"
    state = {
        "model": {"w": torch.arange(6.0).reshape(2, 3)},
        "step": 7,
        "seen": [3, 1, 2],
        "name": "run",
        "pair": (1, 2.5),
    }
    save_checkpoint(state, path)
    back = load_checkpoint(path)
    assert torch.equal(back["model"]["w"], state["model"]["w"])
    assert {k: v for k, v in back.items() if k != "model"} == {k: v for k, v in state.items() if k != "model"}
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left beside it


def test_truncated_damaged_and_foreign_files_are_refused_by_name(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"w": torch.zeros(1000)}, path)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match=f"{path} is truncated"):
        load_checkpoint(path)
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0xFF  # inside the tensor data, which torch.load alone would accept
    path.write_bytes(bytes(damaged))
    with pytest.raises(CheckpointError, match=f"{path} is damaged"):
        load_checkpoint(path)
    torch.save({"w": 1}, path)  # a plain torch.save file has no header to check
    with pytest.raises(CheckpointError, match=f"{path} is not a labkit checkpoint"):
        load_checkpoint(path)
    payload = b"not a torch file"
    path.write_bytes(MAGIC + len(payload).to_bytes(8, "little") + zlib.crc32(payload).to_bytes(4, "little") + payload)
    with pytest.raises(CheckpointError, match="passed its checksum but torch.load cannot read it"):
        load_checkpoint(path)


class _RunsCode:
    """Unpickling this with full pickle would create the file named in it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_loading_never_runs_code_from_the_file(tmp_path):
    path, marker = tmp_path / "ckpt.pt", tmp_path / "code-ran"
    with pytest.raises(CheckpointError, match="state\\['payload'\\] is of type"):  # refused when saved, no code run
        save_checkpoint({"payload": _RunsCode(str(marker))}, path)
    buffer = io.BytesIO()  # a file written another way, in the checkpoint's format
    torch.save({"payload": _RunsCode(str(marker))}, buffer)
    payload = buffer.getvalue()
    path.write_bytes(MAGIC + struct.pack("<QI", len(payload), zlib.crc32(payload)) + payload)
    with pytest.raises(CheckpointError, match=f"{path} asks for .*open.*no code in the file ran"):
        load_checkpoint(path)
    assert not marker.exists()


def test_a_failed_write_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"step": 1}, path)

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="ckpt.pt: the disk filled up after .* had been written"):
        save_checkpoint({"step": 2, "big": torch.zeros(10_000)}, path)
    monkeypatch.undo()
    assert load_checkpoint(path) == {"step": 1}
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def _save_forever(path):
    """Checkpoints of 8 MB, each filled with its own step number, as fast as the disk takes them."""
    step = 0
    while True:
        save_checkpoint({"step": step, "fill": bytes([step % 251]) * 8_000_000}, path)
        step += 1


def test_a_kill_in_the_middle_of_a_write_leaves_the_previous_checkpoint_whole(tmp_path):
    path = str(tmp_path / "ckpt.pt")
    context = multiprocessing.get_context("fork")  # the writer needs nothing but save_checkpoint
    strays = 0
    for _ in range(3):
        writer = context.Process(target=_save_forever, args=(path,))
        writer.start()
        tmp = f"{path}.tmp-{writer.pid}"
        deadline = time.monotonic() + 30
        while not (os.path.exists(path) and os.path.exists(tmp)):  # a checkpoint exists and the next is being written
            assert time.monotonic() < deadline and writer.is_alive(), "the writer never started a second checkpoint"
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
        strays += os.path.exists(tmp)
        state = load_checkpoint(path)
        assert state["fill"] == bytes([state["step"] % 251]) * 8_000_000
    assert strays >= 1  # at least one kill landed mid-write (the others just after a rename)
    save_checkpoint({"step": -1}, path)  # the next save clears what the killed writers left
    assert os.listdir(tmp_path) == ["ckpt.pt"]


@pytest.mark.parametrize(
    "state, where, kind",
    [
        ({"args": argparse.Namespace(lr=0.1)}, "state['args']", "argparse.Namespace"),  # torchvision's reference script
        ({"epoch": np.int64(3)}, "state['epoch']", "numpy.int64"),
        ({"log": [1, {"scores": np.zeros(2)}]}, "state['log'][1]['scores']", "numpy.ndarray"),
    ],
)
def test_what_could_not_be_loaded_is_refused_when_saved_naming_its_key(tmp_path, state, where, kind):
    path = tmp_path / "run.ckpt"
    with pytest.raises(CheckpointError, match=re.escape(f"{where} is of type {kind}")):
        save_checkpoint(state, path)
    assert not path.exists()


def test_model_and_optimizer_states_are_saved_as_they_are(tmp_path):
    model = torch.nn.Linear(3, 2)
    state = {
        "model": model.state_dict(),
        "optimizer": torch.optim.AdamW(model.parameters()).state_dict(),
        "args": vars(argparse.Namespace(lr=0.1)),
        "dtype": torch.float16,
        "where": (1, 2.5, None, "s"),
    }
    save_checkpoint(state, tmp_path / "run.ckpt")
    assert load_checkpoint(tmp_path / "run.ckpt")["args"] == {"lr": 0.1}
