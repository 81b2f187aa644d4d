"""Shared fixtures: one small photo-like data set and its packs, made once per test session; a fake clock; a data
set that is slow where it is told to be."""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import shutil
import tempfile
import time
from collections import Counter

import pytest
import torch

from labkit.harness.synthetic_data import PhotoSpec, make_photos, read_manifest
from labkit.storage.packing import pack_folder

if "forkserver" in multiprocessing.get_all_start_methods():
    # The forkserver (Linux's default start method from Python 3.14) forks workers from a server that has
    # imported torch once, so a test that starts many of them does not import torch in each.
    multiprocessing.set_forkserver_preload(["torch"])

SMALL = PhotoSpec(n=24, classes=3, width=160, height=120, seed=7)
OUT = 32  # decoded size used across the tests


class FakeClock:
    """Python's clocks as `labkit.core.timing` reads them, and a ``sleep``: time moves only when something sleeps
    on it, so what a timing adds up to is known exactly, however loaded the machine is."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    monotonic = perf_counter

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def fake_clock(monkeypatch):
    """A `FakeClock` behind every timing of the kit (the one engine, `labkit.core.timing`, reads it)."""
    import labkit.core.timing as timing

    fake = FakeClock()
    monkeypatch.setattr(timing, "time", fake)
    return fake


class Sleepy(torch.utils.data.Dataset):
    """Tiny uint8 images; sleeps (``sleep``: ``time.sleep``, or a `FakeClock`'s) in the stage it is told to, to make
    that stage the slow one."""

    def __init__(self, n=16, read=0.0, decode=0.0, slow_index=None, sleep=time.sleep):
        self.n, self.read, self.decode, self.slow_index, self.sleep = n, read, decode, slow_index, sleep
        self.labels = torch.zeros(n, dtype=torch.int64).numpy()
        self.transform = None

    def __len__(self):
        return self.n

    def read_raw(self, i):
        self.sleep(self.read + (0.05 if i == self.slow_index else 0))
        return i

    def decode_raw(self, raw):
        self.sleep(self.decode)
        return torch.full((3, 8, 8), raw % 256, dtype=torch.uint8)

    def __getitem__(self, i):
        return self.decode_raw(self.read_raw(i)), 0

    def sample_path(self, i):
        return f"class/{i}.jpg"


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("photos") / "photos")
    make_photos(root, SMALL, workers=1, progress=False)
    return root


@pytest.fixture(scope="session")
def encoded_pack(photos, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("packs") / "photos.pack")
    pack_folder(photos, path, workers=1, progress=False)
    return path


@pytest.fixture(scope="session")
def decoded_pack(photos, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("packs") / f"photos-{OUT}.pack")
    pack_folder(photos, path, decoded_size=OUT, workers=1, progress=False)
    return path


@pytest.fixture()
def corrupt_photos(tmp_path) -> str:
    """A data set with every corrupt kind, listed in its manifest."""
    root = str(tmp_path / "corrupt")
    spec = PhotoSpec(n=30, classes=3, width=96, height=72, seed=3, corrupt=0.3)
    make_photos(root, spec, workers=1, progress=False)
    return root


@pytest.fixture(scope="module")
def ws(photos, tmp_path_factory):
    """A copy of the photos as the ablation's workspace: the folder and its two packs beside it."""
    from labkit.harness.workspace import prepare

    folder = str(tmp_path_factory.mktemp("ablation") / "photos")
    shutil.copytree(photos, folder)
    return prepare(folder, size=256, progress=False, work=os.path.dirname(folder))


def corrupt_indices(ds, root: str):
    """The paths of ``root``'s corrupt files (its manifest's), and their indices in ``ds``."""
    corrupt = {os.path.join(root, c["path"]) for c in read_manifest(root)["corrupt"]}
    return corrupt, [i for i in range(len(ds)) if ds.sample_path(i) in corrupt]


def photo_jpeg(width: int = 400, height: int = 300, index: int = 0) -> bytes:
    """One of the kit's photo-like JPEGs, made in memory."""
    from labkit.harness.synthetic_data import PhotoSpec, encode_sample, plan_sample

    spec = PhotoSpec(n=index + 1, width=width, height=height)
    return encode_sample(spec, plan_sample(spec, index))


def encoded(img, fmt: str, **kw) -> bytes:
    """A Pillow image saved in ``fmt`` to bytes."""
    import io

    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def jpeg_claiming(width: int, height: int) -> bytes:
    """A small JPEG whose header claims ``width`` x ``height`` (a decompression bomb by its header)."""
    from PIL import Image

    data = bytearray(encoded(Image.new("RGB", (16, 16)), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


#: What changes from run to run or build to build in a library's error text (an address, a C++ source line).
RUN_TO_RUN_NOISE = re.compile(r"0x[0-9a-fA-F]{6,}|\.(cpp|cu|h):\d+")

_SHM = "/dev/shm"
_SHM_PREFIXES = (
    "torch_",
    "psm_",
)  # torch's file_system strategy; multiprocessing.shared_memory (labkit.workers.staged_pipeline)


def _others(name: str) -> bool:
    """Whether a /dev/shm or temporary name was made by a live process outside this test process's tree (another
    test run on the same machine): torch's names and labkit's carry their creator's pid."""
    import psutil

    pid = next((int(part) for part in name.replace("-", "_").split("_") if part.isdigit()), None)
    if pid is None or pid == os.getpid() or not psutil.pid_exists(pid):
        return False
    try:
        return os.getpid() not in [p.pid for p in psutil.Process(pid).parents()]
    except psutil.Error:
        return False


def _open_resources() -> dict[str, list[str]]:
    """What this process holds that a fault could leak: file descriptors, mapped /dev/shm segments
    (named or already unlinked), /dev/shm names and labkit temporary files."""
    gc.collect()  # objects that only a reference cycle keeps alive are not leaks
    found: dict[str, list[str]] = {
        "/dev/shm names": sorted(n for n in os.listdir(_SHM) if n.startswith(_SHM_PREFIXES) and not _others(n))
        if os.path.isdir(_SHM)
        else [],
        "labkit temporary files": sorted(
            n for n in os.listdir(tempfile.gettempdir()) if n.startswith("labkit-") and not _others(n)
        ),
    }
    if os.path.isdir("/proc/self/fd"):  # Linux; elsewhere the checks above still run
        fds = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                fds.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
            except OSError:  # the descriptor listdir itself used, closed by now
                pass
        found["file descriptors"] = sorted(fds)
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            found["/dev/shm mappings"] = sorted(line.split(None, 5)[-1].strip() for line in f if _SHM + "/" in line)
    return found


@pytest.fixture()
def no_leaks():
    """Fails the test if it leaves worker processes, open file descriptors or shared memory behind.

    Workers must be stopped by the code under test: they are counted before the garbage
    collector runs, since a DataLoader iterator freed by it waits 5 s for each worker.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        forkserver.ensure_running()  # its server and pipe live as long as this process: started before the count
    before = _open_resources()
    yield
    alive = multiprocessing.active_children()
    assert not alive, f"worker processes still running after the test: {[p.pid for p in alive]}"
    after = _open_resources()
    grown = {
        kind: sorted((Counter(after[kind]) - Counter(before[kind])).elements())
        for kind in after
        if len(after[kind]) > len(before[kind])
    }
    assert not grown, f"left behind: {grown}"


@pytest.fixture()
def small_disk(tmp_path):
    """A folder on a tmpfs of the size asked for (``small_disk(bytes)``), unmounted after the test; skipped with
    the reason where this process may not mount one (it needs root, as CI has)."""
    import subprocess

    mounted = []

    def mount(size: int) -> str:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
        )
        if done.returncode:
            pytest.skip(
                f"cannot mount a small tmpfs here ({done.stderr.strip() or 'mount failed'}): the full-disk "
                "cases need root"
            )
        mounted.append(folder)
        return str(folder)

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def files_under(root: str):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` compare the GPU path with the CPU path; they need a CUDA device."""
    import torch  # noqa: F811

    if torch.cuda.is_available():
        return
    no_cuda = pytest.mark.skip(reason="needs a CUDA device (run on a GPU machine)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(no_cuda)


@pytest.fixture
def uint8_samples():
    """``uint8_samples(n, size)``: n seeded (uint8 image, label) samples, labels 0, 1, 2, 0, ..."""

    def make(n=8, size=(3, 16, 16)):
        g = torch.Generator().manual_seed(0)
        return [(torch.randint(0, 256, size, dtype=torch.uint8, generator=g), k % 3) for k in range(n)]

    return make
