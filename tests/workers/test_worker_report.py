"""The report a watched loader raises with: each worker's state and samples in flight, in words."""

import os

import pytest
from torch.utils.data import DataLoader

from labkit.core.shared_log import SharedLog
from labkit.workers.worker_marks import StartedMark
from labkit.workers.worker_report import HANG_FIX, STARTUP_FIX, WorkerReport, dead_workers
from labkit.workers.worker_stop import stop_workers


class Named(list):
    def sample_path(self, i):
        return f"photos/{i}.jpg"


@pytest.mark.timeout(60)
def test_a_live_idle_worker_and_a_fetch_in_flight_are_said_by_name(tmp_path):
    folder, log = str(tmp_path), SharedLog("labkit-test-report-")
    report = WorkerReport(folder, log, Named(range(8)))
    iterator = iter(DataLoader(list(range(8)), batch_size=2, num_workers=1, worker_init_fn=StartedMark(folder)))
    try:
        next(iterator)
        assert report.all_started(iterator) and report.hang_fix(iterator) == HANG_FIX and dead_workers(iterator) == []
        log.append({"worker": 0, "pid": 1, "event": "start", "indices": [6, 7], "time": 0.0})
        text = report.describe(iterator, "no batch arrived for 2 s", HANG_FIX, stacks=False, startup_s=1.5)
    finally:
        stop_workers(iterator)
    assert text.startswith("no batch arrived for 2 s; 1 worker:")
    assert "worker 0 (pid" in text and "alive, fetching samples [6, 7]" in text and "(first: photos/6.jpg)" in text
    assert "took 1.5 s to start" in text and text.endswith(HANG_FIX)


def test_a_worker_that_never_said_it_started_gets_the_start_up_fix(tmp_path):
    class NotStarted:
        _workers = [type("P", (), {"pid": os.getpid(), "exitcode": None, "is_alive": lambda self: True})()]

    assert WorkerReport(str(tmp_path), SharedLog("labkit-test-report-"), []).hang_fix(NotStarted()) == STARTUP_FIX


def test_the_note_on_an_error_raised_in_a_worker_names_the_samples_it_was_fetching(tmp_path):
    log = SharedLog("labkit-test-report-")
    report = WorkerReport(str(tmp_path), log, Named(range(8)))
    assert "came from outside it" in report.in_flight_summary()
    log.append({"worker": 1, "event": "error", "indices": [3], "time": 0.0})
    assert report.in_flight_summary() == "raised in worker 1 while fetching samples [3] (first: photos/3.jpg)"
