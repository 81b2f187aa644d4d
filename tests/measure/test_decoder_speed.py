"""time_decoders and median_seconds: one timing of every decoder on the same bytes, warm, as a median."""

import os

import pytest

from labkit.core.errors import LabkitError
from labkit.decode.registry import DECODERS
from labkit.measure import decoder_speed
from labkit.measure.decoder_speed import median_seconds, time_decoders
from tests.conftest import files_under


def test_every_decoder_is_timed_per_image_on_the_same_bytes(photos):
    blobs = [open(os.path.join(photos, path), "rb").read() for path in files_under(photos)[:3]]
    times = time_decoders(blobs, size=64, repeats=2)
    assert set(times) == set(DECODERS) and all(t > 0 for t in times.values())
    assert set(time_decoders(blobs[:1], 64, repeats=1, decoders=["pil"])) == {"pil"}


def test_the_median_is_taken_so_one_slow_pass_does_not_decide(monkeypatch):
    clock = iter([0.0, 1.0, 10.0, 11.0, 20.0, 29.0])  # passes of 1 s, 1 s and 9 s
    monkeypatch.setattr(decoder_speed.time, "perf_counter", lambda: next(clock))
    assert median_seconds(lambda: None, 3) == 1.0


def test_bad_requests_are_refused_with_the_fix():
    with pytest.raises(LabkitError, match="at least one"):
        time_decoders([])
    with pytest.raises(LabkitError, match="repeats=0"):
        median_seconds(lambda: None, 0)
    with pytest.raises(LabkitError, match="unknown decoder 'nope'"):
        time_decoders([b"x"], decoders=["nope"])
