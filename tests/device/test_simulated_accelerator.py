import time

import pytest
import torch

from labkit.core.errors import LabkitError
from labkit.device.simulated_accelerator import (
    ACCELERATORS,
    DLE_RESNET50,
    AcceleratorModel,
    SimulatedAccelerator,
    accelerator,
    batch_images,
)


def test_every_accelerator_names_its_gpu_workload_and_source():
    for model in ACCELERATORS.values():
        assert model.images_per_s > 0 and model.gpu and "ResNet-50" in model.workload and model.source == DLE_RESNET50
    assert accelerator("A100") is ACCELERATORS["a100"]  # keys in any case
    own = AcceleratorModel("my GPU", "my model", 100.0, "my benchmark")
    assert accelerator(own) is own


def test_an_unknown_accelerator_lists_the_ones_there_are():
    with pytest.raises(LabkitError, match="a100, a100-tf32, v100, v100-fp32"):
        accelerator("tpu")
    with pytest.raises(LabkitError, match="a rate above 0"):
        AcceleratorModel("x", "y", 0.0, "z")


@pytest.mark.parametrize(
    ("batch", "images"),
    [(torch.zeros(8, 3, 4, 4), 8), ((torch.zeros(5, 3, 2, 2), torch.zeros(5)), 5), ({"image": torch.zeros(3, 1)}, 3)],
)
def test_the_images_of_a_batch_are_its_first_tensor_s_first_dimension(batch, images):
    assert batch_images(batch) == images


def test_a_batch_it_cannot_count_is_refused():
    with pytest.raises(LabkitError, match="pass images="):
        batch_images("nope")


def test_a_step_waits_the_published_time_for_its_images_without_using_the_cpu():
    gpu = SimulatedAccelerator(AcceleratorModel("slow GPU", "a model", 400.0, "a test"))
    batch = (torch.zeros(20, 3, 8, 8, dtype=torch.uint8), torch.zeros(20))
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(3):
        gpu(batch)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert gpu.steps == 3 and gpu.busy_s == pytest.approx(3 * 20 / 400.0)
    assert wall >= gpu.busy_s  # a sleep lasts at least what it was asked for
    assert cpu < 0.5 * gpu.busy_s  # and it is a sleep: the core is free for the workers
    assert gpu.seconds(400) == pytest.approx(1.0)


def test_its_label_says_which_gpu_which_model_and_whose_figure():
    label = SimulatedAccelerator("a100").label
    assert "A100 80GB" in label and "2,470 images/s" in label and "DeepLearningExamples" in label
    assert SimulatedAccelerator("v100").short_label == "a simulated V100 16GB"
