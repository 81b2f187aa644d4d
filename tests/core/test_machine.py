import mmap
import os
import sys

import pytest

from labkit.core.machine import memory_facts, os_name, process_maps


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/maps is Linux's")
def test_process_maps_lists_this_process_and_what_it_maps(tmp_path):
    path = tmp_path / "mapped.bin"
    path.write_bytes(b"x" * 4096)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ):
        mine = dict(process_maps()).get(os.getpid())
        assert mine is not None and any(str(path) in line for line in mine)


def test_memory_facts_know_the_ram_and_name_the_os():
    facts = memory_facts()
    assert 0 < facts.ram_available <= facts.ram_total
    assert os_name() == {"linux": "Linux", "darwin": "macOS", "win32": "Windows"}.get(sys.platform, os_name())


def test_physical_cores_count_hyper_threads_once_and_never_exceed_the_usable_cpus(monkeypatch):
    import labkit.core.machine as machine

    monkeypatch.setattr(machine, "usable_cpus", lambda: 8)
    monkeypatch.setattr(machine.psutil, "cpu_count", lambda logical=True: 16 if logical else 8)
    assert machine.usable_physical_cores() == 4  # 8 usable CPUs of a 2-threads-per-core machine
    monkeypatch.setattr(machine.psutil, "cpu_count", lambda logical=True: 8 if logical else 8)
    assert machine.usable_physical_cores() == 8
    monkeypatch.setattr(machine.psutil, "cpu_count", lambda logical=True: None if not logical else 8)
    assert machine.usable_physical_cores() == 8  # the OS does not say: the usable CPUs
    monkeypatch.setattr(machine, "usable_cpus", lambda: 1)
    monkeypatch.setattr(machine.psutil, "cpu_count", lambda logical=True: 16 if logical else 8)
    assert machine.usable_physical_cores() == 1


def test_kill_process_tree_takes_the_children_too():
    import subprocess
    import time

    from labkit.core.machine import kill_process_tree, running
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
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


def test_machine_description_names_cores_and_device():
    import torch

    from labkit.core.machine import describe_machine, machine_info

    info = machine_info()
    assert info["cpu_count"] >= 1 and info["torch"] == torch.__version__
    assert f"{info['cpu_count']} CPUs" in describe_machine(info) and info["device"] in describe_machine(info)
