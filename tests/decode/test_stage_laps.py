"""labkit.decode.stage_laps: every decoder marks each of its stages once a call, in its own order, and gives the same
image with a clock as without."""

import os

import pytest
import torch

from labkit.decode.decoder_contract import MAX_PIXELS
from labkit.decode.registry import DECODERS, get_decoder
from labkit.decode.stage_laps import DECODER_STAGES, StageLaps, lap
from labkit.storage.image_folder import scan_image_folder

#: Where each decoder's tensor is made: before its resize, except Pillow's own resize.
ORDER = {"pil": ["decode", "resize", "to-tensor"]}


def _first_file(photos) -> bytes:
    index = scan_image_folder(photos)
    with open(os.path.join(index.root, index.relpaths[0]), "rb") as f:
        return f.read()


@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize("size", [(40, 56), None], ids=["resized", "as stored"])
def test_each_decoder_marks_every_stage_once_in_its_order_and_gives_the_same_image(photos, decoder, size):
    data = _first_file(photos)
    laps = StageLaps()
    image = get_decoder(decoder)(data, size, MAX_PIXELS, laps=laps)
    assert torch.equal(image, get_decoder(decoder)(data, size, MAX_PIXELS))
    assert list(laps.seconds) == ORDER.get(decoder, ["decode", "to-tensor", "resize"])
    assert sorted(laps.seconds) == sorted(DECODER_STAGES) and min(laps.seconds.values()) >= 0


def test_a_png_handed_to_pillow_is_timed_on_pillow_s_path(tmp_path):
    from PIL import Image

    path = tmp_path / "a.png"
    Image.new("RGB", (30, 20), (200, 10, 10)).save(path)
    laps = StageLaps()
    image = get_decoder("simplejpeg")(path.read_bytes(), 16, MAX_PIXELS, laps=laps)
    assert image.shape == (3, 16, 16) and list(laps.seconds) == ["decode", "to-tensor", "resize"]


def test_a_lap_adds_the_time_since_the_last_mark_and_none_is_no_clock():
    laps = StageLaps()
    laps("decode")
    laps("decode")
    assert list(laps.seconds) == ["decode"] and laps.seconds["decode"] >= 0
    lap(None, "decode")  # the hot path: nothing to mark
