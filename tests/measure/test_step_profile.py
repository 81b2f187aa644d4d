import io
import time

import matplotlib
import pytest
import torch
from conftest import OUT
from torch.utils.data import DataLoader, default_collate

from labkit.collate.collate_fns import stack_uint8
from labkit.datasets.map_style import DecodedArrayDataset, ImageFolderDataset, PackedDataset
from labkit.diagnose.bottleneck import Timeline, advise, explain_bottleneck, find_slow_samples, record_timeline
from labkit.measure.step_profile import profile_loader
from labkit.workers.profiled_loader import ProfiledLoader, verdict

matplotlib.use("Agg")


class Sleepy(torch.utils.data.Dataset):
    """Tiny uint8 images; sleeps in the stage it is told to, to make that stage the slow one."""

    def __init__(self, n=16, read=0.0, decode=0.0, slow_index=None):
        self.n, self.read, self.decode, self.slow_index = n, read, decode, slow_index
        self.labels = torch.zeros(n, dtype=torch.int64).numpy()
        self.transform = None

    def __len__(self):
        return self.n

    def read_raw(self, i):
        time.sleep(self.read + (0.05 if i == self.slow_index else 0))
        return i

    def decode_raw(self, raw):
        time.sleep(self.decode)
        return torch.full((3, 8, 8), raw % 256, dtype=torch.uint8)

    def __getitem__(self, i):
        return self.decode_raw(self.read_raw(i)), 0

    def sample_path(self, i):
        return f"class/{i}.jpg"


def test_verdict_thresholds_follow_the_seed():
    assert verdict(0.5).startswith("data-bound") and verdict(0.05).startswith("compute-bound")
    assert verdict(0.2).startswith("balanced")


def test_slow_dataset_is_called_data_bound():
    loader = DataLoader(Sleepy(read=0.01), batch_size=4)
    report = profile_loader(loader, steps=3, warmup=1, model_step=lambda batch: None)
    assert report.data_share > 0.9 and report.verdict.startswith("data-bound")
    assert len(report.step_s) == 3 and report.images_per_s > 0


def test_slow_model_is_called_compute_bound():
    loader = DataLoader(Sleepy(), batch_size=4)
    report = profile_loader(loader, steps=3, warmup=1, model_step=lambda batch: time.sleep(0.25))  # dwarfs any stall
    assert report.data_share < 0.1 and report.verdict.startswith("compute-bound")
    assert "steps" in str(report) and report.plot() is not None


def test_loader_alone_is_reported_as_such():
    report = profile_loader(DataLoader(Sleepy(), batch_size=4), steps=2, warmup=0)
    assert report.verdict.startswith("no model step")
    with pytest.raises(ValueError, match="warm-up"):
        profile_loader(DataLoader(Sleepy(n=4), batch_size=4), steps=2, warmup=5)


@pytest.mark.parametrize("stage,dataset", [("read", Sleepy(read=0.01)), ("decode", Sleepy(decode=0.01))])
def test_explainer_names_the_deliberately_slow_stage(stage, dataset):
    report = explain_bottleneck(dataset, batch_size=8, num_workers=2, repeats=1)
    assert report.slowest.name == stage and stage in str(report)
    assert report.bound_images_per_s > 0 and report.plot() is not None


def test_explainer_on_a_real_dataset_times_every_host_stage(photos):
    report = explain_bottleneck(ImageFolderDataset(photos, "pil", OUT), batch_size=8, num_workers=2, repeats=1)
    assert [s.name for s in report.stages][:5] == ["read", "decode", "transform", "collate", "worker→main copy"]
    assert all(s.per_batch_s >= 0 for s in report.stages)
    if not torch.cuda.is_available():
        assert set(report.skipped) == {"pin", "device copy"}


def test_explainer_refuses_datasets_it_cannot_split():
    with pytest.raises(TypeError, match="read_raw"):
        explain_bottleneck(list(range(4)))


def test_slow_sample_finder_names_the_slow_file():
    report = find_slow_samples(Sleepy(n=10, slow_index=7), progress=False)
    index, seconds, path = report.slowest(1)[0]
    assert (index, path) == (7, "class/7.jpg") and seconds >= 0.05
    assert "sample 7" in str(report) and report.plot() is not None


def test_timeline_shows_each_worker_and_every_batch_received():
    timeline = record_timeline(Sleepy(n=32, read=0.002), batches=6, batch_size=4, num_workers=2)
    assert len(timeline.received) == 6
    assert {f["worker"] for f in timeline.fetches} == {0, 1}
    assert "worker 0" in str(timeline) and timeline.plot() is not None


def test_profiled_loader_reports_each_epoch():
    out = io.StringIO()
    loader = ProfiledLoader(DataLoader(Sleepy(n=8), batch_size=4), stream=out)
    for _ in range(2):
        assert sum(len(b[0]) for b in loader) == 8
    assert len(loader.reports) == 2 and out.getvalue().count("LABKIT_PROFILE") == 2
    assert loader.batch_size == 4  # attributes of the wrapped loader stay reachable


def _uint8_batch():
    return [torch.zeros(4, 3, 8, 8, dtype=torch.uint8), torch.zeros(4, dtype=torch.int64)]


def test_decode_advice_names_only_decoders_it_does_not_use_and_that_measured_faster(photos, decoded_pack):
    ds = ImageFolderDataset(photos, "pil-reduced", OUT)
    slower_alternatives = {"pil": 0.05, "pil-reduced": 0.02, "torchvision": 0.03}
    advice = advise("decode", ds, stack_uint8, _uint8_batch(), workers=2, cpus=2, decoder_s=slower_alternatives)
    assert "decoder=" not in advice and "decoded pack" in advice and "more workers" not in advice
    advice = advise("decode", ds, stack_uint8, _uint8_batch(), workers=2, cpus=2,
                    decoder_s={**slower_alternatives, "torchvision": 0.01})
    assert "decoder='torchvision' (10 ms" in advice and "instead of 'pil-reduced' (20 ms)" in advice
    assert "'pil'" not in advice
    advice = advise("decode", DecodedArrayDataset(decoded_pack), stack_uint8, _uint8_batch(), workers=1, cpus=2)
    assert advice == "more workers (1 now, 2 CPUs)"
    advice = advise("decode", DecodedArrayDataset(decoded_pack), stack_uint8, _uint8_batch(), workers=2, cpus=2)
    assert "already at its best" in advice


def test_advice_for_other_stages_follows_what_the_dataset_already_does(photos, encoded_pack):
    folder, pack = ImageFolderDataset(photos, "pil", OUT), PackedDataset(encoded_pack, "pil", OUT)
    assert "labkit pack" in advise("read", folder, stack_uint8, _uint8_batch(), 2, 2)
    assert "labkit pack" not in advise("read", pack, stack_uint8, _uint8_batch(), 2, 2)
    assert "already at its best" in advise("collate", pack, stack_uint8, _uint8_batch(), 2, 2)
    assert "stack_uint8" in advise("collate", pack, default_collate, _uint8_batch(), 2, 2)
    floats = [torch.zeros(4, 3, 8, 8)]
    assert "uint8" in advise("worker→main copy", pack, stack_uint8, floats, 2, 2)
    assert "fewer bytes" not in advise("worker→main copy", pack, stack_uint8, _uint8_batch(), 2, 2)


def test_a_decoder_within_timing_noise_of_the_one_in_use_is_not_advised(photos):
    ds = ImageFolderDataset(photos, "pil-reduced", OUT)
    advice = advise("decode", ds, stack_uint8, _uint8_batch(), workers=2, cpus=2,
                    decoder_s={"pil": 0.05, "pil-reduced": 0.02, "torchvision": 0.019})
    assert "decoder=" not in advice


def test_copy_stages_advise_uint8_only_for_float_batches():
    floats, uint8 = [torch.zeros(4, 3, 8, 8)], _uint8_batch()
    assert "uint8" in advise("device copy", None, stack_uint8, floats, 2, 2)
    device_copy = advise("device copy", None, stack_uint8, uint8, 2, 2)
    assert "uint8" not in device_copy and "DevicePrefetcher" in device_copy
    pin = advise("pin", None, stack_uint8, uint8, 2, 2)
    assert "already at its best" in pin and "workers" not in pin


@pytest.fixture(scope="module")
def large_photos(tmp_path_factory):
    """Photos big enough (800x600 into 32x32) that decoding is the slowest stage on any machine."""
    from labkit.course.synthetic_data import PhotoSpec, make_photos

    root = str(tmp_path_factory.mktemp("large") / "photos")
    make_photos(root, PhotoSpec(n=8, classes=2, width=800, height=600, seed=2), workers=1, progress=False)
    return root


@pytest.mark.parametrize("decoder", ["pil", "pil-reduced", "torchvision"])
def test_explainer_never_advises_the_decoder_in_use(large_photos, decoder):
    report = explain_bottleneck(ImageFolderDataset(large_photos, decoder, OUT), batch_size=8, num_workers=2, repeats=1)
    assert report.slowest.name == "decode" and report.advice in str(report)
    advised = report.advice.split(" instead of ")[0]  # the decoders named as faster come before "instead of"
    assert f"{decoder!r} (" not in advised and "decoded pack" in report.advice


def test_timeline_counts_a_worker_busy_only_while_the_loop_ran():
    # worker 0 fetched for 2 s of a 2 s run; worker 1's second fetch ran on 3 s past the last batch received
    fetches = [{"worker": 0, "start": 10.0, "end": 12.0}, {"worker": 1, "start": 10.0, "end": 11.0},
               {"worker": 1, "start": 11.5, "end": 15.0}]
    timeline = Timeline(fetches, received=[11.0, 12.0], start=10.0)
    assert timeline.span == 2.0
    assert timeline.busy_share(0) == 1.0 and timeline.busy_share(1) == 0.75
    assert "worker 1: 2 batches, busy 75% of the time" in str(timeline)


class _SlowMix:
    """A DevicePrefetcher ``mix`` that takes 50 ms: work the prefetcher does on the device, after the copy."""

    def __call__(self, images, labels):
        time.sleep(0.05)
        return images, labels


def test_a_prefetchers_device_stage_is_split_from_the_wait_for_the_loader():
    from labkit.device.transfer import DevicePrefetcher
    from labkit.measure.step_profile import PrefetcherReport

    prefetcher = DevicePrefetcher(DataLoader(Sleepy(n=16, read=0.01), batch_size=4), "cpu", mix=_SlowMix())
    report = profile_loader(prefetcher, steps=2, warmup=1, model_step=lambda batch: None)
    assert isinstance(report, PrefetcherReport)
    assert min(report.wait_s) >= 0.04 - 0.005 and max(report.wait_s) < 0.05  # 4 reads of 10 ms; no mixing in it
    assert min(report.convert_s) >= 0.05 and max(report.transfer_s) < 0.05
    assert report.step_s[0] == pytest.approx(report.wait_s[0] + report.transfer_s[0] + report.convert_s[0]
                                             + report.compute_s[0])
    assert 0 < report.data_share < 0.5 < report.data_share + report.device_stage_share <= 1
    assert report.images == 8 and report.images_per_s > 0
    assert "fetch" in str(report) and "convert on the device" in str(report) and report.plot() is not None


def test_a_prefetcher_iterated_as_it_is_folds_its_device_stage_into_the_wait():
    from labkit.device.transfer import DevicePrefetcher
    from labkit.measure.step_profile import PrefetcherReport

    prefetcher = DevicePrefetcher(DataLoader(Sleepy(n=12), batch_size=4), "cpu", mix=_SlowMix())
    report = profile_loader(prefetcher, steps=2, warmup=1, split_device_stage=False)
    assert not isinstance(report, PrefetcherReport)
    assert min(report.wait_s) >= 0.05 and max(report.transfer_s) < 0.01  # the 50 ms of mixing counted as waiting
