import torch

from labkit.core.host_buffers import HostBuffers


def test_a_free_buffer_is_handed_out_again():
    pool = HostBuffers()
    first = pool.empty((4, 5), torch.float32)
    first_ptr = first.data_ptr()
    del first
    again = pool.empty((4, 5), torch.float32)
    assert again.data_ptr() == first_ptr and pool.reused == 1


def test_a_buffer_still_held_or_viewed_is_never_reused():
    pool = HostBuffers()
    held = pool.empty((4, 5), torch.float32)
    view = pool.empty((4, 5), torch.float32)[1:]
    third = pool.empty((4, 5), torch.float32)
    assert len({held.data_ptr(), view.untyped_storage().data_ptr(), third.data_ptr()}) == 3
    assert pool.reused == 0


def test_shape_and_dtype_must_match_and_keep_bounds_the_pool():
    pool = HostBuffers(keep=1)
    a = pool.empty((2, 2), torch.float32)
    ptr = a.data_ptr()
    del a
    assert pool.empty((2, 2), torch.float64).data_ptr() != ptr  # other dtype: fresh, and not kept (keep=1)
    assert pool.empty((3, 2), torch.float32).data_ptr() != ptr
    assert pool.empty((2, 2), torch.float32).data_ptr() == ptr
    assert "holding 1" in repr(pool)


def test_keep_zero_never_reuses():
    pool = HostBuffers(keep=0)
    pool.empty((2, 2), torch.float32)
    pool.empty((2, 2), torch.float32)
    assert pool.reused == 0 and pool.allocated == 2
