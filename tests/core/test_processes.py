import mmap
import os
import sys

import pytest

from labkit.core.processes import process_maps


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/maps is Linux's")
def test_process_maps_lists_this_process_and_what_it_maps(tmp_path):
    path = tmp_path / "mapped.bin"
    path.write_bytes(b"x" * 4096)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ):
        mine = dict(process_maps()).get(os.getpid())
        assert mine is not None and any(str(path) in line for line in mine)


def test_kill_process_tree_takes_the_children_too():
    import subprocess
    import time

    from labkit.core.processes import kill_process_tree, running

    child = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "time.sleep(60)"
    )
    job = subprocess.Popen([sys.executable, "-c", child])
    import psutil

    deadline = time.monotonic() + 20
    while not psutil.Process(job.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = psutil.Process(job.pid).children()[0].pid
    killed = kill_process_tree(job.pid)
    job.wait(timeout=10)
    assert set(killed) == {job.pid, grandchild}
    assert not running(grandchild) and job.returncode != 0
    assert kill_process_tree(job.pid) == []  # gone already: nothing to kill, no error
