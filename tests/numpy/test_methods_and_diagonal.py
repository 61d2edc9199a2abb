"""Array methods that forward to tracer.numpy, x.view, and numpy.diagonal."""
import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_grads, check_vmap


@pytest.mark.parametrize("offset,axis1,axis2", [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, 0, 2),
                                                (-5, 1, 2), (3, 1, 2)])
def test_diagonal_against_numpy(offset, axis1, axis2):
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(tnp.diagonal(a, offset, axis1, axis2)),
                                  np.diagonal(a, offset, axis1, axis2))


def test_diagonal_grad_vmap_and_linalg():
    a = np.random.default_rng(0).standard_normal((3, 4))
    check_grads(lambda x: tnp.diagonal(x, 1), (a,), order=1)
    check_vmap(lambda x: tnp.diagonal(x), (np.stack([a, 2 * a]),))
    np.testing.assert_array_equal(np.asarray(tnp.linalg.diagonal(a)), np.diagonal(a, 0, -2, -1))
    assert float(tnp.linalg.trace(np.eye(3))) == 3.0


def test_forwarding_methods():
    x = tnp.array([3.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(x.cumsum()), [3, 4, 6])
    np.testing.assert_array_equal(np.asarray(x.cumprod()), [3, 3, 6])
    np.testing.assert_array_equal(np.asarray(x.sort()), [1, 2, 3])
    np.testing.assert_array_equal(np.asarray(x.argsort()), [1, 2, 0])
    np.testing.assert_array_equal(np.asarray(x.take(np.array([0, 2]))), [3, 2])
    np.testing.assert_array_equal(np.asarray(x.nonzero()[0]), [0, 1, 2])
    np.testing.assert_array_equal(np.asarray(tnp.sort(x).searchsorted(2.5)), 2)
    assert float(tnp.eye(3).trace()) == 3.0
    np.testing.assert_array_equal(np.asarray(tnp.eye(2).diagonal()), [1, 1])
    np.testing.assert_array_equal(np.asarray(tracer.jit(lambda v: v.cumsum())(x)), [3, 4, 6])


def test_view_reinterprets_bits_like_numpy():
    a = np.arange(4, dtype=np.int32)
    for dt in (np.uint8, np.int64, np.float32, np.int16):
        np.testing.assert_array_equal(np.asarray(tnp.asarray(a).view(dt)), a.view(dt))
    with pytest.raises(ValueError, match="divisible"):
        tnp.asarray(np.arange(3, dtype=np.int32)).view(np.int64)
