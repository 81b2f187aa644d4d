"""Shared fixtures: one small photo-like data set and its packs, made once per test session."""

from __future__ import annotations

import gc
import multiprocessing
import os
import tempfile
from collections import Counter
from typing import Dict, List

import pytest

from labkit.course.synthetic_data import PhotoSpec, make_photos
from labkit.storage.packing import pack_folder

if "forkserver" in multiprocessing.get_all_start_methods():
    # The forkserver (Linux's default start method from Python 3.14) forks workers from a server that has
    # imported torch once, so a test that starts many of them does not import torch in each.
    multiprocessing.set_forkserver_preload(["torch"])

SMALL = PhotoSpec(n=24, classes=3, width=160, height=120, seed=7)
OUT = 32  # decoded size used across the tests


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


_SHM = "/dev/shm"
_SHM_PREFIXES = ("torch_", "psm_")  # torch's file_system strategy; multiprocessing.shared_memory (labkit.workers.staged_pipeline)


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


def _open_resources() -> Dict[str, List[str]]:
    """What this process holds that a fault could leak: file descriptors, mapped /dev/shm segments
    (named or already unlinked), /dev/shm names and labkit temporary files."""
    gc.collect()  # objects that only a reference cycle keeps alive are not leaks
    found: Dict[str, List[str]] = {
        "/dev/shm names": sorted(n for n in os.listdir(_SHM) if n.startswith(_SHM_PREFIXES) and not _others(n))
        if os.path.isdir(_SHM) else [],
        "labkit temporary files": sorted(n for n in os.listdir(tempfile.gettempdir())
                                         if n.startswith("labkit-") and not _others(n)),
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
    grown = {kind: sorted((Counter(after[kind]) - Counter(before[kind])).elements()) for kind in after
             if len(after[kind]) > len(before[kind])}
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
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'mount failed'}): the full-disk "
                        "cases need root")
        mounted.append(folder)
        return str(folder)

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def files_under(root: str):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` compare the GPU path with the CPU path; they need a CUDA device."""
    import torch

    if torch.cuda.is_available():
        return
    no_cuda = pytest.mark.skip(reason="needs a CUDA device (run on a GPU machine)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(no_cuda)
