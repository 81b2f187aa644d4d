import numpy as np

from labkit.samplers.class_balanced import ClassBalancedSampler


def test_class_balanced_draws_rare_classes_as_often():
    labels = np.array([0] * 950 + [1] * 50)
    drawn = labels[list(ClassBalancedSampler(labels, num_samples=4000, seed=0))]
    assert 0.45 < drawn.mean() < 0.55
