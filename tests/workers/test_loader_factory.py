import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from labkit.collate.batching import stack_uint8
from labkit.core import cpus
from labkit.core.errors import LabkitTypeError, LabkitValueError, LabkitWarning
from labkit.datasets.pack_datasets import DecodedArrayDataset
from labkit.datasets.sample_errors import SampleError
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.grouped import GroupedBatchSampler
from labkit.storage.pack_format import PackReader
from labkit.workers.loader_factory import make_loader
from labkit.workers.profiled_loader import ProfiledLoader
from labkit.workers.stateful_loader import StatefulLoader
from labkit.workers.watchdog import WatchedLoader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_defaults_for_a_labkit_dataset(decoded_pack, monkeypatch):
    monkeypatch.delenv("LABKIT_PROFILE", raising=False)
    loader = make_loader(DecodedArrayDataset(decoded_pack), batch_size=8, num_workers=2)
    assert isinstance(loader, StatefulLoader) and isinstance(loader.loader, DataLoader)
    assert loader.collate_fn is stack_uint8 and loader.persistent_workers
    assert loader.pin_memory == torch.cuda.is_available()
    images, labels = next(iter(loader))
    assert images.dtype == torch.uint8 and images.shape[0] == 8


def test_sampler_and_watchdog_layers(decoded_pack, monkeypatch):
    monkeypatch.delenv("LABKIT_PROFILE", raising=False)
    dataset = DecodedArrayDataset(decoded_pack)
    sampler = BlockShuffleSampler(len(dataset), block_size=4, window=2)
    loader = make_loader(dataset, batch_size=6, sampler=sampler, num_workers=1, hang_timeout=30)
    assert isinstance(loader.loader, WatchedLoader)
    assert sum(len(b[1]) for b in loader) == len(dataset)
    assert isinstance(make_loader(dataset, num_workers=0, profile=True).loader, ProfiledLoader)


def test_labkit_profile_switch_needs_no_code_change(decoded_pack):
    script = textwrap.dedent(f"""
        from labkit.datasets.pack_datasets import DecodedArrayDataset
        from labkit.workers.loader_factory import make_loader
        for epoch in range(2):
            for images, labels in make_loader(DecodedArrayDataset({decoded_pack!r}), batch_size=8, num_workers=0):
                pass
    """)
    env = {**os.environ, "LABKIT_PROFILE": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("[LABKIT_PROFILE] epoch 1") == 2 and "images/s" in out.stderr
    env["LABKIT_PROFILE"] = "0"
    quiet = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert "LABKIT_PROFILE" not in quiet.stderr


def test_a_damaged_sample_through_the_factory_is_named_and_leaves_nothing_behind(
    decoded_pack, tmp_path, monkeypatch, no_leaks
):
    monkeypatch.delenv("LABKIT_PROFILE", raising=False)
    damaged = str(tmp_path / "damaged.pack")
    shutil.copy(decoded_pack, damaged)
    reader = PackReader(damaged)
    offset, name = int(reader.records["offset"][5]), reader.paths[5]
    with open(damaged, "r+b") as f:
        f.seek(offset + 3)
        f.write(bytes([f.read(1)[0] ^ 0xFF]))
    # make_loader's workers are persistent: after the fault the next epoch must start fresh ones.
    loader = make_loader(DecodedArrayDataset(damaged), batch_size=4, shuffle=False, num_workers=2, hang_timeout=30)
    for _epoch in range(2):
        with pytest.raises(SampleError, match=f"sample 5 \\({name!r}\\)"):
            for _batch in loader:
                pass


def test_torch_s_rules_for_order_arguments(decoded_pack):
    dataset = DecodedArrayDataset(decoded_pack)
    sampler = BlockShuffleSampler(dataset, block_size=4)
    with pytest.raises(LabkitValueError, match="shuffle=True with sampler=BlockShuffleSampler"):
        make_loader(dataset, sampler=sampler, shuffle=True, num_workers=0)
    with pytest.raises(LabkitValueError, match="give the seed to that sampler"):
        make_loader(dataset, sampler=sampler, seed=3, num_workers=0)
    with pytest.raises(LabkitValueError, match="batch_size=8 and drop_last=False would be ignored"):
        make_loader(dataset, batch_sampler=GroupedBatchSampler(range(len(dataset)), 4), batch_size=8, num_workers=0)


def test_a_batch_sampler_makes_the_batches_and_its_place_counts_batches(decoded_pack):
    dataset = DecodedArrayDataset(decoded_pack)
    groups = [i // 3 for i in range(len(dataset))]
    loader = make_loader(dataset, batch_sampler=GroupedBatchSampler(groups, 6, seed=1), num_workers=0)
    batches = iter(loader)
    first = next(batches)[1]
    assert len(first) == 6 and loader.state_dict()["sampler"]["position"] == 1


def test_shuffle_false_reads_in_order_and_the_default_order_changes_each_epoch():
    dataset = Indices(30)
    assert _order(make_loader(dataset, batch_size=4, shuffle=False, num_workers=0)) == list(range(30))
    shuffled = make_loader(dataset, batch_size=4, num_workers=0, seed=5)
    first, second = _order(shuffled), _order(shuffled)
    assert sorted(first) == sorted(second) == list(range(30)) and first != second
    assert _order(make_loader(dataset, batch_size=4, num_workers=0, seed=5)) == first


def test_the_default_seed_follows_torch_manual_seed_or_the_generator():
    orders = []
    for _ in range(2):
        torch.manual_seed(11)
        orders.append(_order(make_loader(Indices(30), batch_size=4, num_workers=0)))
    assert orders[0] == orders[1]
    seeded = [
        _order(make_loader(Indices(30), num_workers=0, generator=torch.Generator().manual_seed(3))) for _ in range(2)
    ]
    assert seeded[0] == seeded[1]


def test_more_workers_than_cores_is_said(decoded_pack, monkeypatch):
    monkeypatch.setattr(cpus, "usable_cpus", lambda: 2)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    with pytest.warns(LabkitWarning, match="num_workers=64 on 2 usable CPUs"):
        make_loader(DecodedArrayDataset(decoded_pack), num_workers=64)


def test_eight_local_ranks_on_16_cpus_get_at_most_two_workers_a_rank(decoded_pack, monkeypatch):
    monkeypatch.setattr(cpus, "usable_cpus", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    loader = make_loader(DecodedArrayDataset(decoded_pack), batch_size=4)
    assert 1 <= loader.num_workers <= 2
    with pytest.warns(LabkitWarning, match=r"num_workers=8 where 8 ranks \(LOCAL_WORLD_SIZE=8\) share 16 usable CPUs"):
        make_loader(DecodedArrayDataset(decoded_pack), batch_size=4, num_workers=8)


def test_an_iterable_dataset_takes_no_shuffle_and_says_why_it_cannot_save_a_place():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(10))

    with pytest.raises(LabkitValueError, match="shuffle inside the stream"):
        make_loader(Stream(), shuffle=True, num_workers=0)
    loader = make_loader(Stream(), batch_size=5, num_workers=0)
    assert [b.tolist() for b in loader] == [list(range(5)), list(range(5, 10))]
    with pytest.raises(LabkitTypeError, match="its order comes from Stream"):
        loader.state_dict()


class Indices(Dataset):
    """Each sample is its own index."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return int(index)


def _order(loader):
    return [i for batch in loader for i in batch.tolist()]


def _images(loader, batches=None):
    return [b.clone() for k, (b, _) in enumerate(loader) if batches is None or k < batches]


def test_no_workers_with_a_prefetch_factor_loads_from_a_producer_thread_and_keeps_its_place(encoded_pack):
    from labkit.datasets.pack_datasets import PackedDataset
    from labkit.decode.random_crop import RandomResizedCrop

    ds = PackedDataset(encoded_pack, "simplejpeg", crop=RandomResizedCrop(16, seed=2), decode_threads=2)
    plain = make_loader(ds, batch_size=5, seed=3, num_workers=0)
    ahead = make_loader(ds, batch_size=5, seed=3, num_workers=0, prefetch_factor=3)
    assert ahead.prefetch_factor == 3 and ahead.num_workers == 0 and plain.prefetch_factor is None
    everything = _images(plain)
    assert all(torch.equal(a, b) for a, b in zip(everything, _images(ahead), strict=True))
    resumed = make_loader(ds, batch_size=5, seed=3, num_workers=0, prefetch_factor=3)
    for k, _ in enumerate(resumed):  # two batches taken, three more already made by the producer
        if k == 1:
            break
    state = resumed.state_dict()
    again = make_loader(ds, batch_size=5, seed=3, num_workers=0, prefetch_factor=3)
    again.load_state_dict(state)
    rest = _images(again)  # the place is the batches the loop took, not those made ahead
    assert all(torch.equal(a, b) for a, b in zip(everything[2:], rest, strict=True))


def test_batch_slots_give_the_batches_of_the_plain_loader(encoded_pack):
    from labkit.datasets.pack_datasets import EncodedPackDataset, PackedDataset
    from labkit.decode.random_crop import RandomResizedCrop

    ds = PackedDataset(encoded_pack, "simplejpeg", crop=RandomResizedCrop(16, seed=2), decode_threads=1)
    plain = make_loader(ds, batch_size=5, seed=4, num_workers=2, multiprocessing_context="fork")
    slots = make_loader(
        ds, batch_size=5, seed=4, num_workers=2, multiprocessing_context="fork", batch_slots=True, prefetch_factor=2
    )
    assert slots.num_workers == 2 and slots.prefetch_factor == 2 and slots.batch_size == 5
    for epoch in range(2):
        assert all(torch.equal(a, b) for a, b in zip(_images(plain), _images(slots), strict=True)), epoch
    with pytest.raises(LabkitValueError, match="batch_slots=True needs a labkit image dataset"):
        make_loader(EncodedPackDataset(encoded_pack), batch_size=5, num_workers=0, batch_slots=True)
    with pytest.raises(LabkitValueError, match="leave collate_fn out"):
        make_loader(ds, batch_size=5, num_workers=0, batch_slots=True, collate_fn=list)
