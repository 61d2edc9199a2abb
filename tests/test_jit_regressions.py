"""jit against eager on programs that once went wrong (each found by trying the library as a
new user would)."""
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer.test_util import check_jit

A = np.random.default_rng(0).standard_normal((4, 5))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
@pytest.mark.parametrize("dimension", [0, 1])
def test_integer_iota_in_multi_dim_kernels(dtype, dimension):
    # A bare iota stored by an element-wise kernel must keep its loop dimension when the
    # kernel's iteration space is flattened.
    check_jit(lambda a: lax.broadcasted_iota(dtype, (4, 5), dimension), (A,))
    check_jit(lambda a: lax.broadcasted_iota(dtype, (2, 3, 4), dimension + 1), (A,))


@pytest.mark.parametrize("fn", [
    lambda a: tnp.argsort(a, axis=1),
    lambda a: tnp.argsort(a, axis=0),
    lambda a: tnp.take_along_axis(a, tnp.argsort(a, axis=1), axis=1),
    lambda a: tnp.arange(4)[:, None] * tnp.ones((4, 5), int),
    lambda a: tnp.broadcast_to(tnp.arange(5), (4, 5)),
    lambda a: tnp.arange(5) + tnp.zeros((4, 1), int),
])
def test_iota_programs_match_eager(fn):
    check_jit(fn, (A,))


def test_vmap_of_jitted_argsort():
    got = tracer.vmap(tracer.jit(lambda a: tnp.argsort(a)))(A)
    np.testing.assert_array_equal(np.asarray(got), np.argsort(A, axis=1))


def test_numpy_functions_on_tracers_raise_instead_of_dropping_derivatives():
    with pytest.raises(tracer.TracerArrayConversionError):
        tracer.grad(lambda x: np.sin(x))(1.0)
    with pytest.raises(tracer.TracerArrayConversionError):
        tracer.jvp(lambda x: np.sin(x), (1.0,), (1.0,))
    with pytest.raises(tracer.ConcretizationTypeError, match="float"):
        tracer.grad(lambda x: float(x) * x)(2.0)
    # bool() and int() of a known value keep working under grad, as in JAX.
    assert float(tracer.grad(lambda x: x * 2 if x > 0 else x)(1.0)) == 2.0
    assert float(tracer.grad(lambda x: tnp.arange(3.0)[int(x)] * x)(1.0)) == 1.0


def test_pow_with_scalar_exponent_is_elementwise_c_pow():
    # x ** 0.5 is pow, not NumPy's sqrt fast path: (-inf) ** 0.5 = inf, (-0.) ** 0.5 = 0.
    x = tnp.array([-np.inf, -0.0, -4.0, 4.0])
    for f in (lambda a: a ** 0.5, lambda a: tnp.power(a, 0.5), lambda a: lax.pow(a, 0.5)):
        got = np.asarray(f(x))
        np.testing.assert_array_equal(got, [np.inf, 0.0, np.nan, 2.0])
        assert not np.signbit(got[1])
        check_jit(f, (x,))


def test_lax_is_importable_from_tracer():
    from tracer import lax as tl
    import tracer.lax
    assert tl is lax and tracer.lax is lax


def test_jit_outputs_never_alias_a_callers_writable_array():
    """An output that passes an argument through (or a view of it) is a copy: writing to
    the caller's array afterwards changes no Array (JAX copies arguments onto its device)."""
    x = np.arange(4.0)
    outs = [tracer.jit(f)(x) for f in (lambda x: x, lambda x: x[1:], lambda x: x.reshape(2, 2),
                                       lambda x: (x, x + 1))]
    x[:] = -7.0
    np.testing.assert_array_equal(np.asarray(outs[0]), [0., 1., 2., 3.])
    np.testing.assert_array_equal(np.asarray(outs[1]), [1., 2., 3.])
    np.testing.assert_array_equal(np.asarray(outs[2]), [[0., 1.], [2., 3.]])
    np.testing.assert_array_equal(np.asarray(outs[3][0]), [0., 1., 2., 3.])
    assert x.flags.writeable
    # arguments that are views themselves: of another array, of a buffer object
    base = np.arange(8.0)
    buf = bytearray(np.arange(4.0).tobytes())
    for arg, owner in ((base[2:6], base), (base.reshape(2, 4)[1], base),
                       (np.frombuffer(buf, np.float64), None)):
        want = np.array(arg)
        outs = [tracer.jit(f)(arg) for f in (lambda x: x, lambda x: x.reshape(2, 2)[0],
                                            lambda x: (x * 2.0, x))]
        if owner is None:
            buf[:] = bytes(len(buf))
        else:
            owner[:] = -1.0
        np.testing.assert_array_equal(np.asarray(outs[0]), want)
        np.testing.assert_array_equal(np.asarray(outs[1]), want[:2])
        np.testing.assert_array_equal(np.asarray(outs[2][1]), want)
        assert not np.asarray(outs[0]).flags.writeable


def test_jit_python_int_out_of_range_names_the_value_and_the_fix():
    with pytest.raises(OverflowError, match=r"9223372036854775808 is out of range for int64.*uint64"):
        tracer.jit(lambda x: x + 1)(2 ** 63)
    # in arithmetic too, eager and traced (JAX raises; a wrap would be silent)
    for f in (lambda x: x + 2 ** 63, lambda x: x * (2 ** 64 - 1)):
        with pytest.raises(OverflowError, match="out of range for int64"):
            f(tnp.asarray(np.int64(1)))
        with pytest.raises(OverflowError, match="out of range for int64"):
            tracer.jit(f)(np.int64(1))
    # a Python int that fits int64 converts to the other operand's dtype, wrapping as
    # in JAX and NumPy's casts
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, tnp.int8) + 300), [45, 45])
    assert int(tnp.asarray(np.int64(1)) + (2 ** 63 - 2)) == 2 ** 63 - 1


def test_a_lowering_bug_is_logged_and_the_program_runs_on_numpy(monkeypatch, caplog):
    """Outside strict mode (the tests' default), a lowering rule that raises is reported
    as a bug and the jitted function still gives the eager answer."""
    from numba_backend import executor
    from tracer import _jit_backend

    def broken(closed):
        raise RuntimeError("a rule's bug")

    monkeypatch.setattr(executor, "STRICT", False)
    monkeypatch.setattr(_jit_backend, "_lower_program", broken)
    f = lambda x: tnp.sin(x) * 3.0 + 0.5
    x = np.linspace(-1, 1, 5)
    with caplog.at_level("WARNING", logger="tracer"):
        out = tracer.jit(f)(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(f(x)))
    assert "lowering" in caplog.text and "a rule's bug" in caplog.text
    # lower() shows the jaxpr and why there is no loop IR; compile() still runs it
    jf = tracer.jit(lambda x: tnp.cos(x) * 2.0)
    text = jf.lower(x).as_text()
    assert "# jaxpr of" in text and "lowering failed (RuntimeError: a rule's bug)" in text
    np.testing.assert_array_equal(np.asarray(jf.lower(x).compile()(x)), np.cos(x) * 2.0)
