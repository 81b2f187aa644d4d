"""What a watched loader's workers leave behind for the main process: marks, stacks, the last fetch of each."""

import os

from labkit.core.shared_log import SharedLog
from labkit.workers.worker_marks import (
    StartedMark,
    answers,
    failed_fetches,
    last_fetches,
    read_mark,
    worker_stack,
    write_mark,
)


class _Process:
    def __init__(self, pid, alive=True):
        self.pid, self.alive = pid, alive

    def is_alive(self):
        return self.alive


def test_a_mark_counts_only_for_the_process_that_wrote_it(tmp_path):
    folder = str(tmp_path)
    assert read_mark(folder, 0, "started", os.getpid()) is None
    StartedMark(folder)(0)
    assert read_mark(folder, 0, "started", os.getpid()) is not None
    assert read_mark(folder, 0, "started", os.getpid() + 1) is None  # an earlier process of the same worker slot
    assert os.listdir(folder) == ["worker-0.started"]  # written whole: no temporary left


def test_only_a_live_worker_that_installed_its_handler_is_asked_for_its_stack(tmp_path):
    folder = str(tmp_path)
    assert not answers(folder, 1, _Process(os.getpid()))
    write_mark(folder, 1, "answers")
    assert answers(folder, 1, _Process(os.getpid())) == (hasattr(os, "kill") and os.name != "nt")
    assert not answers(folder, 1, _Process(os.getpid(), alive=False))


def test_the_stack_is_the_worker_loop_s_thread_most_recent_call_first(tmp_path):
    dump = (
        'Thread 0x1 (most recent call first):\n  File "queue.py", line 180 in get\n\n'
        'Current thread 0x2 (most recent call first):\n  File "mount.py", line 7 in wait_for_dead_mount\n'
        '  File "fetch.py", line 52 in fetch\n  File "worker.py", line 309 in _worker_loop\n'
    )
    (tmp_path / "worker-0.txt").write_text(dump)
    stack = worker_stack(str(tmp_path), 0)
    assert stack[0].strip().startswith('File "mount.py"') and len(stack) == 3
    assert worker_stack(str(tmp_path), 5) == []


def test_the_last_fetch_of_each_worker_and_every_fetch_that_raised():
    log = SharedLog("labkit-test-marks-")
    for record in (
        {"worker": 0, "event": "start", "indices": [0]},
        {"worker": 0, "event": "end", "indices": [0]},
        {"worker": 1, "event": "start", "indices": [1]},
        {"worker": 0, "event": "error", "indices": [2]},
    ):
        log.append(record)
    assert {w: r["event"] for w, r in last_fetches(log).items()} == {0: "error", 1: "start"}
    assert [r["indices"] for r in failed_fetches(log)] == [[2]]
