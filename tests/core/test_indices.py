"""labkit.core.indices: a batch's indices wrapped as a list's are, the first out of range refused by name."""

import pytest

from labkit.core.indices import wrap_indices


def _refuse(index):
    raise IndexError(f"sample {index}")


def test_negative_indices_wrap_as_a_list_s_do():
    assert wrap_indices([0, -1, 3, -4], 4, _refuse).tolist() == [0, 3, 3, 0]
    assert wrap_indices([], 4, _refuse).tolist() == []


@pytest.mark.parametrize("bad", [4, -5, 99])
def test_the_first_index_out_of_range_is_refused(bad):
    with pytest.raises(IndexError, match=f"sample {bad}"):
        wrap_indices([1, bad, 100], 4, _refuse)
