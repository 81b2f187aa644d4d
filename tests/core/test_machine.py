import sys

from labkit.core.machine import memory_facts, os_name


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


def test_machine_description_names_cores_and_device():
    import torch

    from labkit.core.machine import describe_machine, machine_info

    info = machine_info()
    assert info["cpu_count"] >= 1 and info["torch"] == torch.__version__
    assert f"{info['cpu_count']} CPUs" in describe_machine(info) and info["device"] in describe_machine(info)
