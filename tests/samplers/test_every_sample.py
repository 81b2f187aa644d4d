from labkit.samplers.every_sample import RandomOffsetSequentialSampler


def test_random_offset_is_sequential_from_a_random_start():
    order = list(RandomOffsetSequentialSampler(10, seed=5))
    assert order == [(order[0] + k) % 10 for k in range(10)]
