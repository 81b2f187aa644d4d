"""labkit.diagnose.stage_timing: the read, the decoder the datasets run and the normalise, every stage timed."""

from __future__ import annotations

import os

import pytest
import torch

from labkit.decode.registry import DECODERS, get_decoder
from labkit.device.transfer import normalize_uint8
from labkit.diagnose.stage_timing import STAGES, compare_decoders, run_stages, time_stages
from labkit.storage.image_folder import scan_image_folder

OUT = 48


def _files(photos):
    index = scan_image_folder(photos)
    return [os.path.join(index.root, index.relpaths[i]) for i in range(len(index))]


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_stages_give_the_decoders_image(photos, decoder):
    for path in _files(photos)[:6]:
        image, normalised, seconds = run_stages(path, decoder, OUT)
        with open(path, "rb") as f:
            expected = get_decoder(decoder)(f.read(), OUT)
        assert torch.equal(image, expected), path
        assert torch.allclose(normalised, normalize_uint8(expected))
        assert list(seconds)[0] == "read" and list(seconds)[-1] == "normalise"
        assert sorted(seconds) == sorted(STAGES) and min(seconds.values()) >= 0


def test_non_square_size_is_height_by_width(photos):
    image, _, _ = run_stages(_files(photos)[0], "pil-reduced", (40, 64))
    assert image.shape == (3, 40, 64)


def test_time_stages_times_every_file(photos):
    files = _files(photos)[:5]
    times = time_stages(files, "pil", OUT, warmup=1)
    assert all(len(times.seconds[name]) == 5 for name in STAGES)
    assert times.total_ms == pytest.approx(sum(times.median_ms.values()))
    assert times.slowest in STAGES and 0 < times.share(times.slowest) <= 1
    assert torch.get_num_threads() >= 1


def test_report_table_and_plot(photos):
    import matplotlib

    matplotlib.use("Agg")
    report = compare_decoders(_files(photos)[:3], size=OUT, progress=False)
    assert [r.decoder for r in report.results] == list(DECODERS)
    assert report["torchvision"].decoder == "torchvision"
    text = str(report)
    assert all(name in text for name in STAGES) and "over 3 files" in text
    ax = report.plot()
    assert len(ax.patches) == len(DECODERS) * len(STAGES)
    with pytest.raises(KeyError, match="no decoder 'nvjpeg'"):
        report["nvjpeg"]


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown decoder"):
        run_stages("any.jpg", "opencv")
    with pytest.raises(ValueError, match="needs an output size"):
        run_stages("any.jpg", "pil", None)
    with pytest.raises(ValueError, match="at least one file"):
        time_stages([], "pil")
