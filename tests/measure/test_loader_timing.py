import time

import pytest
import torch

from labkit.measure.loader_timing import measure_loader


def test_counts_images_and_batches_of_measured_runs():
    batches = [(torch.zeros(4, 3, 2, 2), torch.zeros(4))] * 5
    result = measure_loader(batches, runs=3, warmup_runs=1)
    assert len(result.runs_images_per_s) == 3 and result.batches_per_run == 5
    assert result.images_per_s > 0 and result.step_s >= 0
    assert measure_loader(batches, runs=1, max_batches=2).batches_per_run == 2


def test_refuses_nonsense():
    with pytest.raises(ValueError):
        measure_loader([], runs=1)
    with pytest.raises(ValueError):
        measure_loader([torch.zeros(1)], runs=0)


def test_on_batch_runs_for_every_batch_and_counts_in_the_step(fake_clock):
    seen = []
    batches = [(torch.zeros(2, 1), torch.zeros(2))] * 3
    result = measure_loader(batches, runs=2, warmup_runs=1, on_batch=lambda b: (seen.append(1), fake_clock.sleep(0.01)))
    assert len(seen) == 9 and result.step_s == pytest.approx(0.01)
    assert result.runs_images_per_s == pytest.approx([200.0, 200.0])  # 6 images in 0.03 s a pass


class _CountingLoader:
    """Five numbered batches per epoch; remembers every batch it handed out and each new iterator."""

    def __init__(self):
        self.iterators, self.handed_out = 0, []

    def __len__(self):
        return 5

    def __iter__(self):
        self.iterators += 1
        for k in range(5):
            self.handed_out.append(k)
            yield torch.full((2,), k)


def test_passes_continue_one_stream_instead_of_abandoning_epochs_midway():
    loader, seen = _CountingLoader(), []
    measure_loader(loader, runs=3, warmup_runs=1, max_batches=2, on_batch=lambda b: seen.append(int(b[0])))
    assert seen == [0, 1, 2, 3, 4, 0, 1, 2]  # nothing fetched and thrown away between passes
    assert loader.handed_out == seen and loader.iterators == 2


def test_spread_indices_cover_the_whole_set_evenly():
    from labkit.measure.loader_timing import spread_indices

    assert spread_indices(10, 5) == [0, 2, 4, 6, 8]
    assert spread_indices(3, 8) == [0, 1, 2]
    assert spread_indices(127, 64)[-1] >= 120  # fewer than twice the samples: still spread, not the first 64
    picked = list(spread_indices(2000, 64))
    assert len(picked) == 64 and picked[-1] >= 1900 and len(set(picked)) == 64
    with pytest.raises(ValueError, match="count"):
        spread_indices(0, 4)


def test_short_passes_are_repeated_until_they_add_up_to_min_seconds_within_max_runs():
    import time

    batches = [(torch.zeros(2, 1), torch.zeros(2))] * 2

    def runs(**kwargs):
        return len(
            measure_loader(
                batches, runs=3, warmup_runs=0, on_batch=lambda b: time.sleep(0.01), **kwargs
            ).runs_images_per_s
        )

    assert runs() == 3  # each pass sleeps at least 20 ms
    assert runs(min_seconds=30) == 15  # the default cap, 5 x runs, comes first
    assert runs(min_seconds=30, max_runs=4) == 4
    assert runs(min_seconds=0.01) == 3  # never fewer than runs
    assert runs(min_seconds=0.1) <= 5  # and it stops once they do: 5 passes of 20 ms or more make 0.1 s


def test_time_epochs_times_each_whole_epoch_and_its_first_batch():
    from labkit.measure.loader_timing import time_epochs

    class Slow:
        def __iter__(self):
            for _ in range(3):
                time.sleep(0.01)
                yield torch.zeros(2)

    epochs = time_epochs(Slow(), epochs=2)
    assert [e.batches for e in epochs] == [3, 3]
    assert all(0.01 <= e.first_batch_s <= e.total_s and e.total_s >= 0.03 for e in epochs)
    with pytest.raises(ValueError):
        time_epochs([], epochs=1)


def test_warm_up_takes_every_batch_the_workers_prefetched_before_the_first_measured_pass():
    from torch.utils.data import DataLoader

    from labkit.device.transfer import DevicePrefetcher
    from labkit.measure.loader_timing import prefetched_batches

    loader = DataLoader(list(range(64)), batch_size=2, num_workers=2, prefetch_factor=3)
    assert prefetched_batches(loader) == 6 and prefetched_batches(DevicePrefetcher(loader, device="cpu")) == 6
    assert prefetched_batches(DataLoader(list(range(4)))) == 0 and prefetched_batches([1, 2]) == 0
    seen = []
    measure_loader(loader, runs=1, warmup_runs=1, max_batches=2, on_batch=seen.append)
    assert len(seen) == 7 + 2  # warm-up: the 6 queued at start and one made after; then the measured pass


def test_a_step_is_seconds_per_batch_and_the_median_gap_is_another_figure(fake_clock):
    class AheadLoader:
        """Four batches of 8 a pass: three were ready when asked for, the fourth takes 0.4 s (workers ahead)."""

        def __len__(self):
            return 4

        def __iter__(self):
            for k in range(4):
                if k == 3:
                    fake_clock.sleep(0.4)
                yield torch.zeros(8, 1)

    result = measure_loader(AheadLoader(), runs=2, warmup_runs=0)
    assert result.images_per_s == pytest.approx(32 / 0.4)
    assert result.step_s == pytest.approx(8 / result.images_per_s) == pytest.approx(0.1)  # batch ÷ images/s
    assert result.median_gap_s == 0.0  # most batches were waiting: the gap alone would read as no time at all
