"""Derivatives of every differentiable lax primitive, driven by ``tests/op_records.py``:
``check_grads`` to the record's order in forward and reverse mode (float64, complex128
where the record says so), the transpose rule of every linear argument group against the
dot-product identity <ct, f(x)> = <T(ct), x>, and the values at kinks that JAX users
rely on."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import lax
from tracer.core import Array
from tracer.interpreters import ad
from tracer.jaxpr import Jaxpr
from tracer.test_util import check_grads

import op_records as opr
from op_records import RECORDS, rng_for


def _grad_cases():
    for rec in RECORDS:
        if not rec.grad_order:
            continue
        for case in rec.grad_cases or rec.cases[:2]:
            for dt in rec.grad_dtypes:
                yield pytest.param(rec, case, dt, id=f"{rec.name}-{case}-{dt.name}")


def _split(rec, args):
    """(differentiable args, a function of them closing over the others)."""
    diff = [i for i in range(rec.nargs) if i not in rec.nondiff_argnums]

    def place(xs):
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        return full
    return [args[i] for i in diff], place


@pytest.mark.parametrize("rec,case,dt", list(_grad_cases()))
def test_grads(rec, case, dt):
    args = rec.make_args(rng_for("grad", rec.name, case, dt), case, dt, rec.grad_rng)
    diff_args, place = _split(rec, args)
    kw = case.kw

    def f(*xs):
        out = rec.op(*place(xs), **kw)
        if isinstance(out, tuple):  # integer outputs (indices) have float0 tangents
            out = tuple(o for o in out if tracer.dtypes.is_inexact(o.dtype))
        return out

    tol = rec.grad_tol
    check_grads(f, [Array(x) for x in diff_args], order=rec.grad_order,
                modes=("fwd", "rev"), atol=tol, rtol=tol)


# ---------------------------------- transpose rules -------------------------------------

def _transpose_cases():
    for rec in RECORDS:
        for group in rec.linear:
            cases = rec.grad_cases or rec.cases
            for case in cases[:2]:
                dt = rec.grad_dtypes[-1]
                yield pytest.param(rec, group, case, dt,
                                   id=f"{rec.name}-args{''.join(map(str, group))}-{case}-"
                                      f"{dt.name}")


def _pairing(a, b) -> float:
    """The real part of the bilinear pairing sum(a * b): transposition in JAX's convention
    (no conjugation) satisfies <ct, f(x)> = <T(ct), x> for it, C-linear or only R-linear."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.real(np.sum(a.astype(np.complex128) * b.astype(np.complex128))))


@pytest.mark.parametrize("rec,group,case,dt", list(_transpose_cases()))
def test_transpose_rule(rec, group, case, dt):
    """Run the primitive's transpose rule directly (backward_pass over the staged jaxpr,
    the linear inputs undefined) and check the dot-product identity; then check vjp gives
    the same cotangents."""
    r = rng_for("transpose", rec.name, group, case, dt)
    args = rec.make_args(r, case, dt, rec.grad_rng)
    kw = case.kw

    def f(*lin):
        full = list(args)
        for i, x in zip(group, lin):
            full[i] = x
        return rec.op(*full, **kw)

    lin_args = [args[i] for i in group]
    closed = tracer.make_jaxpr(f)(*lin_args)
    out = f(*lin_args)
    ct = opr.rand_default()(r, out.shape, out.dtype)
    # backward_pass takes the constants as leading (known) inputs.
    j = closed.jaxpr
    jaxpr = Jaxpr([], j.constvars + j.invars, j.eqns, j.outvars)
    undefined = [ad.UndefinedPrimal(v.aval) for v in j.invars]
    cts_in = ad.backward_pass(jaxpr, list(closed.consts) + undefined, [Array(ct)])
    cts_in = [np.zeros(x.shape, x.dtype) if type(c) is ad.Zero else np.asarray(c)
              for c, x in zip(cts_in, lin_args)]
    for c, x in zip(cts_in, lin_args):
        assert c.shape == x.shape and c.dtype == x.dtype, (c.dtype, c.shape, x.dtype, x.shape)
    lhs = _pairing(ct, out)
    rhs = sum(_pairing(c, x) for c, x in zip(cts_in, lin_args))
    narrowest = min([out.dtype.itemsize] + [x.dtype.itemsize for x in lin_args])
    tol = 1e-2 if rec.name == "reduce_precision" else 1e-9 if narrowest >= 8 else 1e-4
    np.testing.assert_allclose(lhs, rhs, rtol=tol, atol=tol)
    # vjp (linearize + transpose) agrees with the direct transpose.
    _, pullback = tracer.vjp(f, *[Array(x) for x in lin_args])
    for a, b in zip(pullback(Array(ct)), cts_in):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12)


# ---------------------------------- kinks and zeros -------------------------------------
# Values at non-differentiable points, as JAX defines them (recorded from JAX 0.10).

def _g(f, x):
    return float(tracer.grad(f)(np.float64(x)))


def test_abs_derivative_at_zero_is_one():
    assert _g(lax.abs, 0.0) == 1.0
    assert _g(lax.abs, -0.0) == 1.0
    assert _g(lax.abs, -2.0) == -1.0


def test_max_min_ties_split_the_gradient():
    g = tracer.grad(lambda x, y: lax.max(x, y), argnums=(0, 1))(1.0, 1.0)
    assert [float(v) for v in g] == [0.5, 0.5]
    g = tracer.grad(lambda x, y: lax.min(x, y), argnums=(0, 1))(2.0, 2.0)
    assert [float(v) for v in g] == [0.5, 0.5]
    g = tracer.grad(lambda x: lax.reduce_max(x, (0,)))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0, 0.5, 0.5, 0])


def test_sqrt_derivative_at_zero_is_inf():
    assert _g(lax.sqrt, 0.0) == np.inf


def test_relu_derivative_at_zero_is_zero():
    assert _g(lambda x: lax.max(x, 0.0), 0.0) == 0.5  # a tie with the constant: JAX's 0.5
    assert _g(lambda x: lax.select(lax.gt(x, 0.0), x, lax.full_like(x, 0)), 0.0) == 0.0


def test_clamp_derivative_at_bounds():
    f = lambda x: lax.clamp(-1.0, x, 1.0)
    assert [_g(f, v) for v in (-2.0, -1.0, 0.0, 1.0, 2.0)] == [0.0, 0.0, 1.0, 0.0, 0.0]


def test_piecewise_constant_ops_have_zero_derivatives():
    for f in (lax.sign, lax.floor, lax.ceil, lax.round, lax.round_nearest_even):
        assert _g(f, 0.3) == 0.0


def test_integer_pow_derivative_at_zero():
    assert _g(lambda x: lax.integer_pow(x, 3), 0.0) == 0.0
    assert _g(lambda x: lax.integer_pow(x, 1), 0.0) == 1.0
    assert _g(lambda x: lax.integer_pow(x, 0), 5.0) == 0.0


def test_pow_derivatives_at_zero_base():
    # d/dx x**y at x=0, y=2 is 0; d/dy 0**y is 0 (JAX avoids log(0) * 0 = nan).
    gx, gy = tracer.grad(lambda x, y: lax.pow(x, y), argnums=(0, 1))(0.0, 2.0)
    assert float(gx) == 0.0 and float(gy) == 0.0


def test_reduce_prod_gradient_with_zeros():
    x = np.array([2.0, 0.0, 3.0, 4.0])
    g = tracer.grad(lambda x: lax.reduce_prod(x, (0,)))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 24.0, 0.0, 0.0])
    x = np.array([0.0, 0.0, 3.0])
    np.testing.assert_array_equal(
        np.asarray(tracer.grad(lambda x: lax.reduce_prod(x, (0,)))(x)), [0.0, 0.0, 0.0])


def test_integer_and_bool_outputs_have_zero_tangents():
    x = np.array([1.5, -2.0])
    for f in (lambda x: lax.convert_element_type(lax.floor(x), np.int32),
              lambda x: lax.lt(x, 0.0), lambda x: lax.is_finite(x),
              lambda x: lax.argmax(x, 0, np.int32)):
        _, t = tracer.jvp(f, (x,), (np.ones(2),))
        assert t.dtype == tracer.dtypes.float0
