"""The bottleneck explainer, the slow-sample finder and the worker timeline."""

import matplotlib
import pytest
import torch
from conftest import OUT, Sleepy
from torch.utils.data import default_collate

from labkit.collate.batching import stack_uint8
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.diagnose.bottleneck import (
    Timeline,
    advise,
    explain_bottleneck,
    find_slow_samples,
    record_timeline,
    share_memory_seconds,
)

matplotlib.use("Agg")


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


def _uint8_batch():
    return [torch.zeros(4, 3, 8, 8, dtype=torch.uint8), torch.zeros(4, dtype=torch.int64)]


def test_decode_advice_names_only_decoders_it_does_not_use_and_that_measured_faster(photos, decoded_pack):
    ds = ImageFolderDataset(photos, "pil-reduced", OUT)
    slower_alternatives = {"pil": 0.05, "pil-reduced": 0.02, "torchvision": 0.03}
    advice = advise("decode", ds, stack_uint8, _uint8_batch(), workers=2, cpus=2, decoder_s=slower_alternatives)
    assert "decoder=" not in advice and "decoded pack" in advice and "more workers" not in advice
    advice = advise(
        "decode",
        ds,
        stack_uint8,
        _uint8_batch(),
        workers=2,
        cpus=2,
        decoder_s={**slower_alternatives, "torchvision": 0.01},
    )
    assert "decoder='torchvision' (10 ms" in advice
    assert "instead of 'pil-reduced' (20 ms), every decoder timed" in advice
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
    advice = advise(
        "decode",
        ds,
        stack_uint8,
        _uint8_batch(),
        workers=2,
        cpus=2,
        decoder_s={"pil": 0.05, "pil-reduced": 0.02, "torchvision": 0.019},
    )
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
    from labkit.harness.synthetic_data import PhotoSpec, make_photos

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
    fetches = [
        {"worker": 0, "start": 10.0, "end": 12.0},
        {"worker": 1, "start": 10.0, "end": 11.0},
        {"worker": 1, "start": 11.5, "end": 15.0},
    ]
    timeline = Timeline(fetches, received=[11.0, 12.0], start=10.0)
    assert timeline.span == 2.0
    assert timeline.busy_share(0) == 1.0 and timeline.busy_share(1) == 0.75
    assert "worker 1: 2 batches, busy 75% of the time" in str(timeline)


def test_the_hand_over_into_shared_memory_is_timed_on_fresh_copies_and_leaves_the_batch_alone(fake_clock):
    batch = [torch.zeros(4, 3, 8, 8, dtype=torch.uint8)]
    seconds = share_memory_seconds(batch, repeats=3)
    assert seconds == 0.0 and not batch[0].is_shared()  # the fake clock did not move; the caller's batch is not moved
