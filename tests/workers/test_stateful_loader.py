"""labkit.workers.stateful_loader: the loader keeps its own place. Resumed in-process or after a SIGKILL, with
other worker counts, the rest of the epoch comes in the same order, each sample once, with the same crops."""

import json
import multiprocessing
import os
import signal
import time
import warnings

import pytest
import torch
from torch.utils.data import Dataset

from labkit.core.epoch_index import epoch_of
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.processes import running
from labkit.datasets.pack_datasets import PackedDataset
from labkit.decode.random_crop import RandomResizedCrop
from labkit.distributed.checkpoint import load_checkpoint, save_checkpoint
from labkit.harness.synthetic_data import PhotoSpec, make_photos
from labkit.measure.process_memory import descendants
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.every_sample import RandomPermutationSampler
from labkit.storage.packing import pack_folder
from labkit.workers.loader_factory import make_loader

N, BATCH = 48, 4


class IndexAndEpoch(Dataset):
    """Each sample is (its index, the epoch the worker was told it was drawn for)."""

    def __len__(self):
        return N

    def __getitem__(self, index):
        return torch.tensor([int(index), epoch_of(index, -1)])


def _take(loader, batches):
    """The first ``batches`` batches of a pass, as [index, epoch] rows."""
    taken = []
    for batch in loader:
        taken += batch.tolist()
        if len(taken) >= batches * BATCH:
            break
    return taken


@pytest.mark.parametrize("before,after", [(0, 2), (2, 0), (2, 1)])
def test_resuming_mid_epoch_with_other_workers_gives_the_rest_of_the_epoch(before, after):
    reference = make_loader(IndexAndEpoch(), BATCH, num_workers=0, seed=4)
    whole = [row for _ in range(2) for row in _take(reference, 99)]  # two whole epochs
    first = make_loader(IndexAndEpoch(), BATCH, num_workers=before, seed=4, persistent_workers=False)
    done = _take(first, 5)
    state = first.state_dict()
    assert state["sampler"]["epoch"] == 0 and state["sampler"]["position"] == 5 * BATCH
    second = make_loader(IndexAndEpoch(), BATCH, num_workers=after, seed=4)
    second.load_state_dict(state)
    rest = _take(second, 99) + _take(second, 99)
    assert done + rest == whole
    assert [e for _, e in whole] == [0] * N + [1] * N  # the epoch reached the workers with every index


def test_the_saved_seed_wins_over_a_seed_drawn_again():
    torch.manual_seed(1)
    whole = _take(make_loader(IndexAndEpoch(), BATCH, num_workers=0), 99)
    torch.manual_seed(1)
    first = make_loader(IndexAndEpoch(), BATCH, num_workers=0)
    done = _take(first, 3)
    torch.manual_seed(2)  # a restarted job draws another seed
    second = make_loader(IndexAndEpoch(), BATCH, num_workers=0)
    second.load_state_dict(first.state_dict())
    assert done + _take(second, 99) == whole


def test_a_seed_the_user_chose_is_not_overridden():
    first = make_loader(IndexAndEpoch(), BATCH, num_workers=0, sampler=RandomPermutationSampler(N, seed=1))
    _take(first, 2)
    second = make_loader(IndexAndEpoch(), BATCH, num_workers=0, sampler=RandomPermutationSampler(N, seed=2))
    with pytest.raises(LabkitValueError, match="build the sampler as the run that saved it"):
        second.load_state_dict(first.state_dict())


def test_a_pass_left_early_ends_its_epoch_and_a_whole_one_moves_on():
    loader = make_loader(IndexAndEpoch(), BATCH, num_workers=2, seed=0)
    early = _take(loader, 2)
    assert loader.epoch == 0
    after_break = _take(loader, 99)
    assert {e for _, e in early} == {0} and {e for _, e in after_break} == {1}
    assert sorted(i for i, _ in after_break) == list(range(N)) and after_break[:8] != early
    assert loader.state_dict()["sampler"] == {**loader.state_dict()["sampler"], "epoch": 2, "position": 0}
    loader.set_epoch(7)
    assert {e for _, e in _take(loader, 99)} == {7}


def test_a_state_after_the_last_step_resumes_at_the_next_epoch():
    loader = make_loader(IndexAndEpoch(), BATCH, num_workers=0, seed=3, drop_last=True)
    batches = iter(loader)
    for _ in range(N // BATCH):
        next(batches)
    state = loader.state_dict()  # the loop has taken the epoch's last batch, the pass has not ended yet
    resumed = make_loader(IndexAndEpoch(), BATCH, num_workers=0, seed=3)
    resumed.load_state_dict(state)
    assert resumed.epoch == 1 and {e for _, e in _take(resumed, 99)} == {1}


def test_a_foreign_state_and_an_unsaveable_order_are_refused_by_name():
    loader = make_loader(IndexAndEpoch(), BATCH, num_workers=0)
    with pytest.raises(LabkitValueError, match="not a state saved by StatefulLoader.state_dict"):
        loader.load_state_dict({"epoch": 1})
    plain = make_loader(IndexAndEpoch(), BATCH, num_workers=0, sampler=torch.utils.data.RandomSampler(range(N)))
    assert len(_take(plain, 99)) == N
    with pytest.raises(LabkitTypeError, match="its order comes from RandomSampler.*RandomPermutationSampler"):
        plain.state_dict()


def test_the_loader_passes_the_dataloader_s_attributes_through():
    loader = make_loader(IndexAndEpoch(), BATCH, num_workers=0)
    assert loader.batch_size == BATCH and loader.num_workers == 0 and len(loader) == N // BATCH


# -- a training loop killed with SIGKILL, restarted from its checkpoint ---------------------------------


class CroppedWithIndex(Dataset):
    """A pack's random-resized crops, each with its index: what the loop trained on is known exactly, crops too."""

    def __init__(self, pack):
        self.dataset = PackedDataset(pack, crop=RandomResizedCrop(16, seed=9))

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index][0], index


def _train(pack, checkpoint, log, workers, step_seconds, torch_seed):
    """One run of a loop that resumes from ``checkpoint`` if there is one and checkpoints every step, with a
    sampler seed drawn from torch's generator. It runs in a forked process: only the checkpoint carries over."""
    torch.set_num_threads(1)  # forked from pytest: keep native thread pools out of it, as DataLoader workers do
    torch.manual_seed(torch_seed)
    loader = make_loader(
        CroppedWithIndex(pack),
        batch_size=BATCH,
        num_workers=workers,
        sampler=BlockShuffleSampler(N, block_size=16, window=2, seed=11),
    )
    step, trained = 0, []  # trained: what the "model" has learnt from, saved with the loader state
    if os.path.exists(checkpoint):
        state = load_checkpoint(checkpoint)
        loader.load_state_dict(state["loader"])
        step, trained = state["step"], state["trained"]
    with open(log, "w", encoding="utf-8") as out:
        while loader.epoch < 2:
            for images, indices in loader:
                out.write(json.dumps(indices.tolist()) + "\n")  # what this process yielded
                out.flush()
                trained.append([indices.tolist(), int(images.sum())])
                step += 1
                save_checkpoint({"loader": loader.state_dict(), "step": step, "trained": trained}, checkpoint)
                time.sleep(step_seconds)


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    make_photos(str(root / "photos"), PhotoSpec(n=N, classes=4, width=64, height=48, seed=5), workers=1, progress=False)
    pack_folder(str(root / "photos"), str(root / "photos.pack"), workers=1, progress=False)
    return str(root / "photos.pack")


def _lines(log):
    with open(log, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("workers_before,workers_after", [(0, 0), (2, 2), (2, 1), (0, 2)])
def test_sigkill_mid_epoch_then_restart_sees_every_sample_once_with_the_same_crops(
    small_pack, tmp_path, workers_before, workers_after
):
    files = {name: str(tmp_path / name) for name in ("ckpt.pt", "reference.pt", "first", "second", "whole")}
    context = multiprocessing.get_context("fork")
    reference = context.Process(target=_train, args=(small_pack, files["reference.pt"], files["whole"], 0, 0, 5))
    reference.start()
    reference.join(timeout=60)
    assert reference.exitcode == 0
    first = context.Process(target=_train, args=(small_pack, files["ckpt.pt"], files["first"], workers_before, 0.1, 1))
    first.start()
    kill_step = N // BATCH + 3  # three steps into the second epoch
    deadline = time.monotonic() + 60
    while not os.path.exists(files["ckpt.pt"]) or load_checkpoint(files["ckpt.pt"])["step"] < kill_step:
        assert first.is_alive(), f"the first run ended (exit code {first.exitcode}) before it was killed"
        assert time.monotonic() < deadline, f"the first run did not checkpoint {kill_step} steps"
        time.sleep(0.01)
    workers = descendants(first.pid)
    assert len(workers) == workers_before
    os.kill(first.pid, signal.SIGKILL)  # the process only: its workers are left to notice by themselves
    first.join()
    killed_at = load_checkpoint(files["ckpt.pt"])["step"]

    second = context.Process(target=_train, args=(small_pack, files["ckpt.pt"], files["second"], workers_after, 0, 2))
    second.start()
    second.join(timeout=60)
    if second.is_alive():
        second.kill()
    assert second.exitcode == 0, "the restarted run failed: its traceback is in the captured stderr"

    whole = load_checkpoint(files["reference.pt"])["trained"]
    assert load_checkpoint(files["ckpt.pt"])["trained"] == whole  # the same batches in the same order, same crops
    assert sorted(i for indices, _ in whole[: N // BATCH] for i in indices) == list(range(N))
    yielded_first, yielded_second = _lines(files["first"]), _lines(files["second"])
    assert kill_step <= killed_at < 2 * N // BATCH  # killed mid-epoch ...
    assert len(yielded_first) in (killed_at, killed_at + 1)  # ... perhaps after a batch it never checkpointed
    assert yielded_first[:killed_at] + yielded_second == [indices for indices, _ in whole]
    deadline = time.monotonic() + 20  # orphaned workers check for their parent every 5 s (torch's interval)
    while any(running(pid) for pid in workers):
        assert time.monotonic() < deadline, f"workers {[p for p in workers if running(p)]} outlived their parent"
        time.sleep(0.1)


def test_batches_left_counts_what_a_resumed_pass_gives_while_len_stays_torch_s():
    first = make_loader(IndexAndEpoch(), BATCH, num_workers=0, seed=1, drop_last=True)
    assert first.batches_left == len(first) == N // BATCH
    _take(first, 5)
    resumed = make_loader(IndexAndEpoch(), BATCH, num_workers=0, seed=1, drop_last=True)
    resumed.load_state_dict(first.state_dict())
    assert len(resumed) == N // BATCH and resumed.batches_left == N // BATCH - 5
    lefts = []
    for _ in resumed:
        lefts.append(resumed.batches_left)
    assert len(lefts) == N // BATCH - 5 and lefts == list(range(N // BATCH - 6, -1, -1))
    assert resumed.batches_left == N // BATCH  # the next pass: a whole epoch


def test_under_several_ranks_an_order_every_rank_reads_whole_is_said_once(monkeypatch):
    import torch.distributed as dist

    from labkit.core.errors import LabkitWarning
    from labkit.samplers.block_shuffle import DistributedBlockSampler

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    loader = make_loader(IndexAndEpoch(), BATCH, num_workers=0)
    with pytest.warns(LabkitWarning, match="2 ranks each read this loader's whole order.*LabkitDataModule"):
        _take(loader, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _take(loader, 1)  # once
        split = make_loader(IndexAndEpoch(), BATCH, num_workers=0, sampler=DistributedBlockSampler(N, seed=0))
        _take(split, 1)
