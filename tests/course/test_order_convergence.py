"""The order experiment of notebook 02: the same model, the same images, only the order differs."""

import matplotlib
import pytest
import torch
from torch.utils.data import SequentialSampler

from labkit.core.errors import LabkitError
from labkit.course.order_convergence import compare_orders, final, plot_orders, small_images, train_in_order
from labkit.samplers.every_sample import RandomPermutationSampler
from labkit.storage.pack_format import PackReader

matplotlib.use("Agg")

ORDERS = {
    "sequential": lambda n, seed: SequentialSampler(range(n)),
    "random": lambda n, seed: RandomPermutationSampler(n, seed=seed),
}


def test_the_images_are_downscaled_once_and_every_class_keeps_a_held_out_share(decoded_pack):
    data = small_images(decoded_pack, side=8, test_share=0.25)
    labels = PackReader(decoded_pack).labels
    assert data.train_x.shape[1:] == (3, 8, 8) and data.train_x.dtype == torch.float32
    assert len(data.train_y) + len(data.test_y) == len(labels) and data.classes == labels.max() + 1
    for c in range(data.classes):
        assert (data.test_y == c).sum() == round(0.25 * (labels == c).sum())
    assert torch.equal(data.train_y, torch.sort(data.train_y).values)  # the training part stays in stored order
    with pytest.raises(LabkitError, match="side=2"):
        small_images(decoded_pack, side=2)
    with pytest.raises(LabkitError, match="test_share=1"):
        small_images(decoded_pack, test_share=1)


def test_a_run_is_its_seed_s_and_an_order_changes_only_the_order(decoded_pack):
    data = small_images(decoded_pack, side=8)
    again = [train_in_order(data, "random", ORDERS["random"], seed=3, epochs=2, batch_size=4) for _ in range(2)]
    assert again[0] == again[1] and len(again[0].loss) == 2 and all(0 <= a <= 1 for a in again[0].accuracy)
    one_batch = train_in_order(data, "sequential", ORDERS["sequential"], seed=3, epochs=1, batch_size=len(data.train_y))
    same_batch = train_in_order(data, "random", ORDERS["random"], seed=3, epochs=1, batch_size=len(data.train_y))
    assert one_batch.loss == pytest.approx(same_batch.loss)  # one batch of everything: the order cannot matter


def test_every_order_runs_once_a_seed_and_its_last_epoch_is_what_a_verdict_weighs(decoded_pack):
    results = compare_orders(small_images(decoded_pack, side=8), ORDERS, seeds=(0, 1), epochs=2, batch_size=4)
    assert {name: [r.seed for r in runs] for name, runs in results.items()} == {"sequential": [0, 1], "random": [0, 1]}
    assert final(results["random"]) == [r.accuracy[-1] for r in results["random"]]
    assert final(results["random"], "loss") == [r.loss[-1] for r in results["random"]]
    with pytest.raises(LabkitError, match="'speed'"):
        final(results["random"], "speed")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    plot_orders(results, axes)
    assert [line.get_label() for line in axes[1].get_lines()] == ["sequential", "random"]
    assert axes[1].get_ylim() == (0, 1)
    plt.close(fig)
