import pytest
import torch

from labkit.core.errors import LabkitError
from labkit.course.collate_memory import augment_in_collate, batch_bytes, collate_peaks


def _batch(n=4, size=(8, 10)):
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (3, *size), dtype=torch.uint8, generator=generator) for _ in range(n)]


def test_the_two_float_ways_make_the_same_batch_and_the_uint8_way_only_stacks():
    batch = _batch()
    steps, in_place = augment_in_collate(batch, "float steps"), augment_in_collate(batch, "uint8 first, in place")
    assert steps.dtype == in_place.dtype == torch.float32 and steps.shape == (4, 3, 8, 10)
    torch.testing.assert_close(steps, in_place)
    assert torch.equal(augment_in_collate(batch, "uint8 stack"), torch.stack(batch))
    # flipped: the first column of the output is the last column of the input, normalised
    expected = (batch[0][:, :, -1].float() / 255 - torch.tensor([0.485, 0.456, 0.406])[:, None]) / torch.tensor(
        [0.229, 0.224, 0.225]
    )[:, None]
    torch.testing.assert_close(steps[0, :, :, 0], expected)


def test_an_unknown_way_is_refused_with_the_ones_there_are():
    with pytest.raises(LabkitError, match="float steps"):
        augment_in_collate(_batch(), "float")
    with pytest.raises(LabkitError, match="uint8 stack"):
        collate_peaks(ways=["nope"])


def test_batch_bytes():
    assert batch_bytes(2, (4, 5), torch.uint8) == 120 and batch_bytes(2, (4, 5), torch.float32) == 480


def test_float_steps_peak_above_a_plain_stack_measured_in_fresh_processes():
    size = (128, 128)
    peaks = collate_peaks(batch_size=32, size=size, ways=["uint8 stack", "float steps"])
    assert list(peaks) == ["uint8 stack", "float steps"]
    (stack_peak, stack_out), (steps_peak, steps_out) = peaks.values()
    assert stack_out == batch_bytes(32, size, torch.uint8) and steps_out == batch_bytes(32, size, torch.float32)
    assert steps_peak > stack_peak + batch_bytes(32, size, torch.float32)  # at least one float copy more
