import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader

from labkit.collate.collate_fns import stack_uint8
from labkit.datasets.map_style import DecodedArrayDataset, SampleError
from labkit.samplers.resumable import BlockShuffleSampler
from labkit.storage.pack_format import PackReader
from labkit.workers.loader_factory import make_loader
from labkit.workers.profiled_loader import ProfiledLoader
from labkit.workers.watchdog import WatchedLoader

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_defaults_for_a_labkit_dataset(decoded_pack, monkeypatch):
    monkeypatch.delenv("LABKIT_PROFILE", raising=False)
    loader = make_loader(DecodedArrayDataset(decoded_pack), batch_size=8, num_workers=2)
    assert isinstance(loader, DataLoader)
    assert loader.collate_fn is stack_uint8 and loader.persistent_workers
    assert loader.pin_memory == torch.cuda.is_available()
    images, labels = next(iter(loader))
    assert images.dtype == torch.uint8 and images.shape[0] == 8


def test_sampler_and_watchdog_layers(decoded_pack, monkeypatch):
    monkeypatch.delenv("LABKIT_PROFILE", raising=False)
    dataset = DecodedArrayDataset(decoded_pack)
    sampler = BlockShuffleSampler(len(dataset), block_size=4, window=2)
    loader = make_loader(dataset, batch_size=6, sampler=sampler, num_workers=1, hang_timeout=30)
    assert isinstance(loader, WatchedLoader)
    assert sum(len(b[1]) for b in loader) == len(dataset)
    assert isinstance(make_loader(dataset, num_workers=0, profile=True), ProfiledLoader)


def test_labkit_profile_switch_needs_no_code_change(decoded_pack):
    script = textwrap.dedent(f"""
        from labkit.datasets.map_style import DecodedArrayDataset
        from labkit.workers.loader_factory import make_loader
        for epoch in range(2):
            for images, labels in make_loader(DecodedArrayDataset({decoded_pack!r}), batch_size=8, num_workers=0):
                pass
    """)
    env = {**os.environ, "LABKIT_PROFILE": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("[LABKIT_PROFILE] epoch 1") == 2 and "images/s" in out.stderr
    env["LABKIT_PROFILE"] = "0"
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                           cwd=ROOT)
    assert "LABKIT_PROFILE" not in quiet.stderr


def test_a_damaged_sample_through_the_factory_is_named_and_leaves_nothing_behind(decoded_pack, tmp_path,
                                                                                 monkeypatch, no_leaks):
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
    for epoch in range(2):
        with pytest.raises(SampleError, match=f"sample 5 \\({name!r}\\)"):
            for batch in loader:
                pass
