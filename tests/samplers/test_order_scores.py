"""labkit.samplers.order_scores: an order's randomness and its locality, read side by side."""

import numpy as np
import pytest

from labkit.samplers.order_scores import score_order


def test_score_order_reads_randomness_and_locality_side_by_side():
    n, batch = 256, 16
    labels, offsets, lengths = np.arange(n) // 32, np.arange(n) * 1000, np.full(n, 1000)
    sequential = score_order(np.arange(n), labels, offsets, lengths, batch, page_size=16_000)
    shuffled = score_order(np.random.default_rng(0).permutation(n), labels, offsets, lengths, batch, page_size=16_000)
    assert sequential.displacement == 0 and sequential.class_entropy == 0
    assert sequential.pages_per_batch == pytest.approx(1, abs=0.1)
    assert shuffled.class_entropy > 0.5 and shuffled.pages_per_batch > 8 * sequential.pages_per_batch
