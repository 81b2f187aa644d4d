"""labkit.course.frame_handoff: one clip's hand-over between processes, a torch.multiprocessing queue against a ring."""

import mmap
import multiprocessing

import numpy as np
import pytest

from labkit.core.errors import LabkitValueError
from labkit.course.frame_handoff import HandoffReport, measure_handoff
from labkit.measure.page_faults import can_count_faults

SHAPE = (4, 120, 160, 3)  # 225 KiB: 56 pages of 4 KiB


@pytest.fixture(scope="module")
def report():
    return measure_handoff(SHAPE, items=8, passes=2, slots=3)


@pytest.mark.timeout(120)
def test_every_pass_of_both_kinds_is_timed_by_one_sender_that_is_gone_after(report):
    assert report.shape == SHAPE and report.items == 8
    assert all(len(report.seconds[kind]) == 2 and min(report.seconds[kind]) > 0 for kind in ("queue", "ring"))
    assert report.ms("ring") > 0 and report.mib == pytest.approx(np.prod(SHAPE) / 2**20)
    assert all(len(report.cpu_seconds[kind]) == 2 and report.cpu_ms(kind) >= 0 for kind in ("queue", "ring"))
    assert multiprocessing.active_children() == []
    assert "torch.multiprocessing queue" in str(report) and "ring slot" in str(report)


@pytest.mark.skipif(not can_count_faults(), reason="page faults are counted through Linux /proc")
def test_the_queue_faults_a_fresh_segment_in_per_item_and_the_ring_does_not(report):
    pages = np.prod(SHAPE) / mmap.PAGESIZE
    assert report.faults_per_item("queue", "sender") > 0.5 * pages  # each item's new segment, page by page
    assert report.faults_per_item("ring", "sender") < 0.5 * pages  # slots faulted in once, in the warm-up pass
    both = report.faults_per_item("queue")
    sender, receiver = report.faults_per_item("queue", "sender"), report.faults_per_item("queue", "receiver")
    assert both == pytest.approx(sender + receiver)


def test_faults_unknown_where_not_counted_and_bad_arguments_refused():
    unknown = {"queue": [None], "ring": [None]}
    blank = HandoffReport(
        (2, 2), 1, seconds={"queue": [0.1], "ring": [0.1]}, sender_faults=unknown, receiver_faults=unknown
    )
    assert blank.faults_per_item("queue") is None and "page faults" not in str(blank)
    with pytest.raises(LabkitValueError):
        blank.faults_per_item("queue", "main")
    with pytest.raises(LabkitValueError):
        measure_handoff(SHAPE, items=0)
