"""tracer.numpy as an Array API namespace: ``x.__array_namespace__()`` is tracer.numpy, and
code written against the standard (its names and keyword signatures) runs on it and on
NumPy (itself an Array API namespace) with the same results, also under grad and jit."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_jit

from np_util import assert_matches


def _standard_program(x, data_dependent=True):
    """A computation that only uses the Array API through the namespace of ``x``."""
    xp = x.__array_namespace__()
    y = xp.permute_dims(xp.reshape(x, (2, 3, 2)), (2, 0, 1))
    z = xp.concat([y, xp.flip(y, axis=0)], axis=0)
    m = xp.matrix_transpose(z) @ z
    s = xp.sum(m, axis=(1, 2), keepdims=False)
    v = xp.vecdot(z, xp.ones_like(z), axis=-1)
    c = xp.cumulative_sum(xp.astype(s, xp.float64), axis=0, include_initial=True)
    st = xp.std(z, axis=1, correction=1)
    order = xp.argsort(xp.reshape(v, (-1,)), stable=True)
    top = xp.take(xp.reshape(v, (-1,)), order[:3], axis=0)
    # unique_values has a data-dependent size: eager only.
    u = xp.unique_values(xp.round(x)) if data_dependent else x
    w = xp.where(xp.isdtype(x.dtype, "real floating") and x > 0, xp.sqrt(xp.abs(x)),
                 xp.zeros_like(x))
    e = xp.expand_dims(xp.clip(x, min=-1.0, max=1.0), axis=0)
    return (s, v, c, st, top, u, w, e, xp.unstack(z, axis=0)[0],
            xp.moveaxis(z, 0, -1), xp.roll(x, 1, axis=0), xp.stack([x, x], axis=1),
            xp.tensordot(z, z, axes=([1, 2], [1, 2])), xp.count_nonzero(x > 0, axis=0),
            xp.searchsorted(xp.sort(x), xp.asarray([0.0, 0.5])))


def test_same_program_on_numpy_and_tracer(rng):
    x = rng.standard_normal(12)
    xt = tnp.asarray(x)
    assert xt.__array_namespace__() is tnp
    got = _standard_program(xt)
    want = _standard_program(x)
    for g, w in zip(got, want):
        assert_matches(g, w, rtol=1e-12, atol=1e-12)


def test_namespace_grad_and_jit(rng):
    x = rng.standard_normal(12)

    def loss(x):
        xp = x.__array_namespace__()
        return xp.sum(xp.square(xp.permute_dims(xp.reshape(x, (3, 4)), (1, 0))))

    g = tracer.grad(loss)(x)
    assert_matches(g, 2 * x)
    check_jit(lambda x: _standard_program(x, False), (x,), rtol=1e-13, atol=1e-13)


def test_namespace_info_and_constants():
    info = tnp.__array_namespace_info__()
    assert info.default_device() == "cpu" and info.devices() == ["cpu"]
    assert info.default_dtypes()["real floating"] == np.float64
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert "bool" in info.dtypes()
    assert tnp.__array_api_version__ == "2023.12"
    for name in ("e", "pi", "inf", "nan", "newaxis"):
        assert hasattr(tnp, name)
    assert tnp.zeros((2,), dtype=tnp.float32, device="cpu").dtype == np.float32
    assert tnp.asarray([1, 2], device="cpu").shape == (2,)
    assert tnp.arange(3, device="cpu").shape == (3,)


def test_32_bit_defaults(x32):
    info = tnp.__array_namespace_info__()
    assert info.default_dtypes()["integral"] == np.int32
    assert "float64" not in info.dtypes()
