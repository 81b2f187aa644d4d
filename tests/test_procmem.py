import numpy as np

from labkit.procmem import PeakRss, private_bytes, rss_bytes


def test_private_memory_grows_with_what_this_process_writes():
    before = private_bytes()
    block = np.ones(64 * 1024 * 1024, dtype=np.uint8)  # 64 MiB, written
    grown = private_bytes() - before
    assert 48 * 2**20 < grown < 96 * 2**20, grown
    assert rss_bytes() >= private_bytes() > 0
    del block


def test_unknown_process_reads_as_zero():
    assert private_bytes(2**22 + 12345) == 0 and rss_bytes("no-such-pid") == 0


def test_tree_counts_worker_processes():
    import time

    from torch.utils.data import DataLoader

    from labkit.procmem import cpu_seconds, descendants, tree_cpu_seconds, tree_rss_bytes

    loader = DataLoader(range(8), batch_size=2, num_workers=2, persistent_workers=True)
    iterator = iter(loader)
    next(iterator)
    workers = set(descendants())
    assert {w.pid for w in iterator._workers} <= workers
    assert tree_rss_bytes() > rss_bytes() and tree_cpu_seconds() >= cpu_seconds()
    t0 = cpu_seconds()
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        pass
    assert cpu_seconds() - t0 > 0.1


def test_running_tells_a_live_process_from_an_exited_unreaped_one():
    import subprocess
    import sys
    import time

    from labkit.procmem import running

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert running(child.pid)
    child.stdin.close()  # it exits; until wait() reaps it, it is a zombie
    deadline = time.monotonic() + 10
    while running(child.pid):
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    assert child.poll() == 0 and not running(child.pid)


def test_peak_rss_follows_growth_but_samples_at_most_once_per_interval():
    eager, lazy = PeakRss(interval=0), PeakRss(interval=3600)
    before_eager, before_lazy = eager.peak, lazy.peak
    block = np.ones(64 * 2**20, dtype=np.uint8)
    eager.sample(), lazy.sample("a batch")
    assert eager.peak >= before_eager + 60 * 2**20 and lazy.peak == before_lazy
    del block
