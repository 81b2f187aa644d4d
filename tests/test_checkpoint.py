"""Resume with nothing lost: atomic checkpoints, and a training loop SIGKILLed mid-epoch that finishes
the epoch after a restart with every sample seen exactly once, whatever the worker counts."""

import json
import multiprocessing
import os
import signal
import time
import zlib

import pytest
import torch
from torch.utils.data import Dataset

from labkit.core.machine import running
from labkit.course.synthetic_data import PhotoSpec, make_photos
from labkit.datasets.map_style import PackedDataset
from labkit.distributed.checkpoint import MAGIC, CheckpointError, load_checkpoint, loader_state, save_checkpoint
from labkit.measure.process_memory import descendants
from labkit.samplers.resumable import BlockShuffleSampler, GroupedBatchSampler
from labkit.storage.packing import pack_folder
from labkit.workers.loader_factory import make_loader

N, BATCH = 48, 4
SAMPLER = dict(block_size=16, window=2, seed=11)


# -- the file itself ------------------------------------------------------------------------------------

def test_round_trip_of_tensors_and_plain_state(tmp_path):
    path = tmp_path / "ckpt.pt"
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "step": 7, "seen": [3, 1, 2], "name": "run",
             "pair": (1, 2.5)}
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
    save_checkpoint({"payload": _RunsCode(str(marker))}, path)
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


def test_loader_state_counts_what_the_loop_consumed_not_what_the_sampler_gave_away():
    sampler = BlockShuffleSampler(10, block_size=4, window=2, seed=1)
    iterator = iter(sampler)
    for _ in range(8):  # workers have pulled 8 indices ...
        next(iterator)
    assert loader_state(sampler, 1, 3)["position"] == 3  # ... the loop has trained on one batch of 3
    assert loader_state(sampler, 4, 3)["position"] == 10  # the last, short batch held one sample
    resumed = BlockShuffleSampler(10, block_size=4, window=2, seed=1)
    resumed.load_state_dict(loader_state(sampler, 4, 3))
    assert resumed.epoch == 1  # finished: the next iteration is the next epoch
    groups = GroupedBatchSampler(list(range(12)), batch_size=3, seed=0)
    next(iter(groups))
    assert loader_state(groups, 1, None)["position"] == 1  # a batch sampler counts batches
    with pytest.raises(TypeError, match="cannot resume mid-epoch"):
        loader_state(torch.utils.data.RandomSampler(range(4)), 1, 2)


# -- a training loop killed with SIGKILL, restarted from its checkpoint ---------------------------------

class WithIndex(Dataset):
    """A pack's images, each with its index: what the loop trained on is then known exactly."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index][0], index


def _train(pack, checkpoint, log, workers, step_seconds):
    """One run of a training loop that resumes from ``checkpoint`` if there is one and checkpoints every
    step. It runs in a forked process, so only what the checkpoint holds carries over between runs."""
    torch.set_num_threads(1)  # forked from pytest: keep native thread pools out of it, as DataLoader workers do
    dataset = WithIndex(PackedDataset(pack, size=16))
    sampler = BlockShuffleSampler(len(dataset), **SAMPLER)
    step, trained = 0, []  # trained: what the "model" has learnt from, saved with the loader state
    if os.path.exists(checkpoint):
        state = load_checkpoint(checkpoint)
        sampler.load_state_dict(state["loader"])
        step, trained = state["step"], state["trained"]
    loader = make_loader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers)
    with open(log, "w", encoding="utf-8") as out:
        for _, indices in loader:
            out.write(json.dumps(indices.tolist()) + "\n")  # what this process yielded
            out.flush()
            trained += indices.tolist()
            step += 1
            save_checkpoint({"loader": loader_state(sampler, step, BATCH), "step": step, "trained": trained},
                            checkpoint)
            time.sleep(step_seconds)


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    make_photos(str(root / "photos"), PhotoSpec(n=N, classes=4, width=64, height=48, seed=5), workers=1,
                progress=False)
    pack_folder(str(root / "photos"), str(root / "photos.pack"), workers=1, progress=False)
    return str(root / "photos.pack")


def _lines(log):
    with open(log, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("workers_before,workers_after", [(0, 0), (2, 2), (2, 1)])
def test_sigkill_mid_epoch_then_restart_sees_every_sample_exactly_once(small_pack, tmp_path, workers_before,
                                                                       workers_after):
    checkpoint, logs = str(tmp_path / "ckpt.pt"), [str(tmp_path / "first.jsonl"), str(tmp_path / "second.jsonl")]
    context = multiprocessing.get_context("fork")
    first = context.Process(target=_train, args=(small_pack, checkpoint, logs[0], workers_before, 0.2))
    first.start()
    deadline = time.monotonic() + 30
    while not os.path.exists(checkpoint) or load_checkpoint(checkpoint)["step"] < 3:
        assert first.is_alive(), f"the first run ended (exit code {first.exitcode}) before it was killed"
        assert time.monotonic() < deadline, "the first run did not checkpoint 3 steps"
        time.sleep(0.01)
    workers = descendants(first.pid)
    assert len(workers) == workers_before
    os.kill(first.pid, signal.SIGKILL)  # the process only: its workers are left to notice by themselves
    first.join()
    killed_at = load_checkpoint(checkpoint)["step"]

    second = context.Process(target=_train, args=(small_pack, checkpoint, logs[1], workers_after, 0))
    second.start()
    second.join(timeout=40)
    if second.is_alive():
        second.kill()
    assert second.exitcode == 0, "the restarted run failed: its traceback is in the captured stderr"

    epoch = BlockShuffleSampler(N, **SAMPLER).order(0)
    assert load_checkpoint(checkpoint)["trained"] == epoch  # the model saw the epoch once, in order
    yielded_first, yielded_second = _lines(logs[0]), _lines(logs[1])
    assert 3 <= killed_at < N // BATCH  # killed mid-epoch ...
    assert len(yielded_first) in (killed_at, killed_at + 1)  # ... perhaps after a batch it never checkpointed
    resumed = [i for batch in yielded_first[:killed_at] + yielded_second for i in batch]
    assert resumed == epoch  # that batch came again after the restart; nothing else did
    deadline = time.monotonic() + 20  # orphaned workers check for their parent every 5 s (torch's interval)
    while any(running(pid) for pid in workers):
        assert time.monotonic() < deadline, f"workers {[p for p in workers if running(p)]} outlived their parent"
        time.sleep(0.1)
