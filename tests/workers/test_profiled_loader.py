"""ProfiledLoader: what LABKIT_PROFILE=1 prints each epoch."""

import io

import pytest
from conftest import Sleepy
from torch.utils.data import DataLoader

from labkit.workers.profiled_loader import ProfiledLoader, batch_length


def test_profiled_loader_reports_each_epoch_from_the_wait_and_the_loop_s_own_time(fake_clock):
    out = io.StringIO()
    loader = ProfiledLoader(DataLoader(Sleepy(n=8, read=0.01, sleep=fake_clock.sleep), batch_size=4), stream=out)
    for _ in range(2):
        seen = 0
        for images, _labels in loader:
            seen += len(images)
            fake_clock.sleep(0.06)  # the training step
        assert seen == 8
    assert len(loader.reports) == 2 and out.getvalue().count("LABKIT_PROFILE") == 2
    report = loader.reports[0]
    assert report.wait_s == pytest.approx([0.04, 0.04]) and report.compute_s == pytest.approx([0.06, 0.06])
    assert report.data_share == pytest.approx(0.4) and report.diagnosis.startswith("data-bound")
    assert loader.batch_size == 4  # attributes of the wrapped loader stay reachable


def test_a_batch_is_as_long_as_its_first_field():
    assert batch_length([[1, 2, 3], [0, 0, 0]]) == 3 and batch_length({"x": 1}) == 1 and batch_length(7) == 1
