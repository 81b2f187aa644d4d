"""A batch's crop boxes drawn at once: counter-based draws that depend only on (seed, epoch, index, draw), and
torchvision's algorithm applied to them box for box as the one-sample loop (`box_from_draws`, torchvision's own
ten-try loop, which tests/decode/test_random_crop.py holds to torchvision's distribution and fallback) does."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.core.errors import LabkitError
from labkit.decode.crop_box import (
    CROP_DRAWS,
    DEFAULT_RATIO,
    DEFAULT_SCALE,
    CropBox,
    box_from_draws,
    counter_uniforms,
    draw_boxes,
    scaled_edges,
    whole_images,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 3000)), min_size=1, max_size=40),
    st.integers(0, 2**40),
    st.sampled_from([DEFAULT_SCALE, (0.9, 1.0), (0.5, 0.6)]),
    st.sampled_from([DEFAULT_RATIO, (1.0, 1.0), (0.2, 5.0)]),
)
def test_a_batch_of_boxes_is_the_one_sample_loop_box_for_box(sizes, seed, scale, ratio):
    indices = np.arange(len(sizes)) * 7 + 3
    u = counter_uniforms(seed, 2, indices, CROP_DRAWS)
    boxes = draw_boxes(sizes, u, scale, ratio, 0.5)
    assert len(boxes) == len(sizes)
    for k, (height, width) in enumerate(sizes):
        assert boxes[k] == box_from_draws(height, width, u[k].tolist(), scale, ratio), (height, width)


def test_a_samples_draws_depend_on_its_seed_epoch_and_index_only():
    batch = counter_uniforms(5, [0, 1, 1, 0], [10, 10, 11, 12], 30)
    alone = [counter_uniforms(5, e, [i], 30)[0] for e, i in [(0, 10), (1, 10), (1, 11), (0, 12)]]
    assert np.array_equal(batch, np.stack(alone))  # the same in any batch, any batch size
    assert np.array_equal(counter_uniforms(5, 0, [10], CROP_DRAWS)[0], batch[0, :CROP_DRAWS])  # a prefix
    rows = [tuple(r) for r in batch] + [tuple(counter_uniforms(6, 0, [10], 30)[0])]
    assert len(set(rows)) == 5  # another epoch, index or seed: other draws
    assert np.array_equal(counter_uniforms(-1, -2, [-3], 4), counter_uniforms(-1, -2, [-3], 4))


def test_the_draws_are_uniform_and_independent():
    u = counter_uniforms(0, 0, np.arange(20000), 4)
    assert u.min() >= 0 and u.max() < 1
    counts, _ = np.histogram(u[:, 0], bins=10, range=(0, 1))
    assert counts.min() > 1800 and counts.max() < 2200  # 2000 expected, sd about 42
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.03
    neighbours = counter_uniforms(0, 0, np.arange(20000) + 1, 1)[:, 0]
    assert abs(np.corrcoef(u[:, 0], neighbours)[0, 1]) < 0.03  # index i and i + 1 are unrelated


def test_too_few_draws_are_refused():
    with pytest.raises(LabkitError, match=f"a random-resized crop takes {CROP_DRAWS}"):
        draw_boxes([(10, 10)], np.zeros((1, 5)))


def test_whole_images_and_the_boxes_on_a_scaled_decode():
    boxes = whole_images([(600, 800), (3, 5)])
    assert boxes[0] == CropBox(0, 0, 600, 800, False, (600, 800)) and boxes[1].image_hw == (3, 5)
    assert boxes.reductions((224, 224)).tolist() == [2, 1]
    edges = boxes.on_decoded(np.array([[300, 400], [3, 5]]))
    assert edges.tolist() == [[0, 0, 300, 400], [0, 0, 3, 5]]
    box = CropBox(7, 11, 100, 120, True, (600, 800))
    assert (
        box.scaled((75, 100))
        == tuple(scaled_edges(np.array([[7, 11, 100, 120]]), np.array([[600, 800]]), np.array([[75, 100]]))[0].tolist())
        == (1, 1, 13, 16)
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4000), st.integers(1, 4000), st.data(), st.sampled_from([1, 2, 3, 4, 8]))
def test_one_boxs_edges_on_a_scaled_decode_are_the_batch_rule(height, width, data, scale):
    h = data.draw(st.integers(1, height))
    w = data.draw(st.integers(1, width))
    top, left = data.draw(st.integers(0, height - h)), data.draw(st.integers(0, width - w))
    hw = (-(-height // scale), -(-width // scale))
    box = CropBox(top, left, h, w, False, (height, width))
    batch = scaled_edges(np.array([[top, left, h, w]]), np.array([[height, width]]), np.array([hw]))
    assert box.scaled(hw) == tuple(batch[0].tolist())
