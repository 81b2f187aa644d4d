"""time_decoders: one timing of every decoder on the same bytes, warm, as a median."""

import os

import pytest

from labkit.core.errors import LabkitError
from labkit.decode.registry import DECODERS
from labkit.measure.decoder_speed import time_decoders
from tests.conftest import files_under


def test_every_decoder_is_timed_per_image_on_the_same_bytes(photos):
    blobs = [open(os.path.join(photos, path), "rb").read() for path in files_under(photos)[:3]]
    times = time_decoders(blobs, size=64, repeats=2)
    assert set(times) == set(DECODERS) and all(t > 0 for t in times.values())
    assert set(time_decoders(blobs[:1], 64, repeats=1, decoders=["pil"])) == {"pil"}


def test_one_slow_pass_does_not_decide_the_decoder_s_figure(fake_clock, monkeypatch):
    import labkit.measure.decoder_speed as decoder_speed

    seconds = iter([0.5, 0.001, 0.001, 0.009])  # the untimed first call (imports), then three passes: one slow
    monkeypatch.setattr(
        decoder_speed, "get_decoder", lambda name: lambda data, size, max_pixels: fake_clock.sleep(next(seconds))
    )
    assert time_decoders([b"x"], repeats=3, decoders=["pil"]) == {"pil": pytest.approx(0.001)}


def test_bad_requests_are_refused_with_the_fix():
    with pytest.raises(LabkitError, match="at least one"):
        time_decoders([])
    with pytest.raises(LabkitError, match="repeats=0"):
        time_decoders([b"x"], repeats=0, decoders=["pil"])
    with pytest.raises(LabkitError, match="unknown decoder 'nope'"):
        time_decoders([b"x"], decoders=["nope"])
