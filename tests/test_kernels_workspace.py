"""fruit.kernels.workspace: buffers go back to the pool when their owner is collected and are
handed out again by size; the pool keeps a bounded amount of memory."""

from __future__ import annotations

import gc

import torch

from fruit.kernels.workspace import Pool


class Owner:
    pass


def test_a_buffer_is_reused_after_its_owner_is_gone():
    pool = Pool()
    owner = Owner()
    first = pool.take(owner, 1000, torch.float64)
    address = first.data_ptr()
    assert first.shape == (1000,) and pool.free == []
    del owner, first
    gc.collect()
    assert len(pool.free) == 1
    second_owner = Owner()
    again = pool.take(second_owner, 900, torch.float64)  # smaller, within twice the size
    assert again.data_ptr() == address and again.shape == (900,)
    assert pool.free == []
    del second_owner
    gc.collect()
    assert len(pool.free) == 1


def test_sizes_and_dtypes_that_do_not_fit_get_new_memory():
    pool = Pool()
    owner = Owner()
    kept = pool.take(owner, 100_000, torch.float64).untyped_storage()
    del owner
    gc.collect()
    owners = [Owner() for _ in range(3)]
    taken = [
        pool.take(owners[0], 200_000, torch.float64),  # too large
        pool.take(owners[1], 100_000, torch.float32),  # another dtype
        pool.take(owners[2], 1000, torch.float64),  # more than twice too large
    ]
    assert len(pool.free) == 1 and pool.free[0].untyped_storage().data_ptr() == kept.data_ptr()
    assert all(x.untyped_storage().data_ptr() != kept.data_ptr() for x in taken)


def test_the_pool_keeps_at_most_its_bound():
    pool = Pool(keep_bytes=3 * 8000)
    owners = [Owner() for _ in range(5)]
    for owner in owners:
        pool.take(owner, 1000, torch.float64)
    del owners, owner
    gc.collect()
    assert len(pool.free) == 3  # 8000 bytes each
