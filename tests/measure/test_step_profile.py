"""profile_loader: where a step's time goes, on a fake clock (time moves only when the data set or the step sleeps)."""

import matplotlib
import pytest
from conftest import Sleepy
from torch.utils.data import DataLoader

from labkit.measure.step_profile import profile_loader

matplotlib.use("Agg")


def test_slow_dataset_is_called_data_bound(fake_clock):
    loader = DataLoader(Sleepy(read=0.01, sleep=fake_clock.sleep), batch_size=4)
    report = profile_loader(loader, steps=3, warmup=1, model_step=lambda batch: None)
    assert report.wait_s == pytest.approx([0.04] * 3) and report.compute_s == [0.0] * 3
    assert report.data_share == 1.0 and report.diagnosis.startswith("data-bound")
    assert len(report.step_s) == 3 and report.images_per_s == pytest.approx(12 / 0.12)


def test_slow_model_is_called_compute_bound(fake_clock):
    loader = DataLoader(Sleepy(read=0.001, sleep=fake_clock.sleep), batch_size=4)
    report = profile_loader(loader, steps=3, warmup=1, model_step=lambda batch: fake_clock.sleep(0.25))
    assert report.data_share == pytest.approx(0.004 / 0.254) and report.diagnosis.startswith("compute-bound")
    assert "steps" in str(report) and report.plot() is not None


def test_loader_alone_is_reported_as_such():
    report = profile_loader(DataLoader(Sleepy(), batch_size=4), steps=2, warmup=0)
    assert report.diagnosis.startswith("no model step")
    with pytest.raises(ValueError, match="warm-up"):
        profile_loader(DataLoader(Sleepy(n=4), batch_size=4), steps=2, warmup=5)


class _SlowMix:
    """A DevicePrefetcher ``mix`` that takes 50 ms: work the prefetcher does on the device, after the copy."""

    def __init__(self, clock):
        self.clock = clock

    def __call__(self, images, labels):
        self.clock.sleep(0.05)
        return images, labels


def test_a_prefetchers_device_stage_is_split_from_the_wait_for_the_loader(fake_clock):
    from labkit.device.transfer import DevicePrefetcher
    from labkit.measure.step_profile import PrefetcherReport

    data = DataLoader(Sleepy(n=16, read=0.01, sleep=fake_clock.sleep), batch_size=4)
    prefetcher = DevicePrefetcher(data, "cpu", mix=_SlowMix(fake_clock))
    report = profile_loader(prefetcher, steps=2, warmup=1, model_step=lambda batch: fake_clock.sleep(0.01))
    assert isinstance(report, PrefetcherReport)
    assert report.wait_s == pytest.approx([0.04, 0.04])  # 4 reads of 10 ms; no mixing in it
    assert report.convert_s == pytest.approx([0.05, 0.05]) and report.transfer_s == [0.0, 0.0]
    assert report.compute_s == pytest.approx([0.01, 0.01]) and report.step_s == pytest.approx([0.1, 0.1])
    assert report.data_share == pytest.approx(0.4) and report.device_stage_share == pytest.approx(0.5)
    assert report.images == 8 and report.images_per_s == pytest.approx(8 / 0.2)
    assert "fetch" in str(report) and "convert on the device" in str(report) and report.plot() is not None


def test_a_prefetcher_iterated_as_it_is_folds_its_device_stage_into_the_wait(fake_clock):
    from labkit.device.transfer import DevicePrefetcher
    from labkit.measure.step_profile import PrefetcherReport

    prefetcher = DevicePrefetcher(
        DataLoader(Sleepy(n=12, sleep=fake_clock.sleep), batch_size=4), "cpu", mix=_SlowMix(fake_clock)
    )
    report = profile_loader(prefetcher, steps=2, warmup=1, split_device_stage=False)
    assert not isinstance(report, PrefetcherReport)
    assert report.wait_s == pytest.approx([0.05, 0.05]) and report.transfer_s == [0.0, 0.0]  # mixing counted as waiting
