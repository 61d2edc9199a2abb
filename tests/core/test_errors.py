"""Each error a user can meet in the core: the tracer-conversion classes (JAX's names and
hierarchy) with messages that say what to do instead, escaped tracers, and shape/dtype
errors of lax operations that name the operation, the shapes and what would be valid."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import tracer
import lax
import tracer.numpy as tnp
from tracer import (ConcretizationTypeError, TracerArrayConversionError,
                    TracerBoolConversionError, TracerIntegerConversionError,
                    UnexpectedTracerError)
from tracer.core import concrete_or_error


def _staged(f, *args):
    return tracer.make_jaxpr(f)(*args)


def test_hierarchy_matches_jax():
    assert issubclass(TracerBoolConversionError, ConcretizationTypeError)
    assert issubclass(ConcretizationTypeError, TypeError)
    assert issubclass(TracerArrayConversionError, TypeError)
    assert issubclass(TracerIntegerConversionError, TypeError)


@pytest.mark.parametrize("transform", ["make_jaxpr", "jit", "vmap"])
def test_python_if_on_a_traced_value(transform):
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    call = {"make_jaxpr": lambda: tracer.make_jaxpr(f)(np.ones(3)),
            "jit": lambda: tracer.jit(f)(np.ones(3)),
            "vmap": lambda: tracer.vmap(f)(np.ones((2, 3)))}[transform]
    with pytest.raises(TracerBoolConversionError,
                       match=r"(?s)converted to bool.*lax\.cond.*static_argnums"):
        call()


def test_bool_conversion_names_the_traced_shape():
    with pytest.raises(TracerBoolConversionError, match=r"bool\[3\]"):
        _staged(lambda x: bool(x > 0), np.ones(3))


def test_float_of_a_traced_value():
    with pytest.raises(ConcretizationTypeError, match=r"(?s)f64\[\].*static_argnums"):
        _staged(lambda x: float(x), 1.0)


def test_int_and_index_conversions():
    with pytest.raises(TracerIntegerConversionError, match="converted to a Python int"):
        _staged(lambda n: list(range(n)), np.int64(3))
    with pytest.raises(TracerIntegerConversionError):
        _staged(lambda i: [10, 20, 30][i], np.int64(1))
    with pytest.raises(TracerIntegerConversionError):
        _staged(lambda x: operator.index(x), np.int32(2))


def test_traced_shapes_are_rejected():
    with pytest.raises(TracerIntegerConversionError):
        _staged(lambda n: lax.reshape(np.ones(3), (n,)), np.int64(3))
    with pytest.raises(TracerIntegerConversionError):
        _staged(lambda n: lax.broadcast_in_dim(1.0, (n, 2), ()), np.int64(3))
    with pytest.raises(TypeError, match="shape"):          # as in JAX, a TypeError
        _staged(lambda n: tnp.zeros((n,)), np.int64(3))


def test_numpy_on_a_traced_value():
    with pytest.raises(TracerArrayConversionError, match=r"(?s)np\.asarray.*tracer\.numpy"):
        _staged(lambda x: np.sin(x), np.ones(3))
    with pytest.raises(TracerArrayConversionError, match=r"f32\[2\]"):
        _staged(lambda x: np.asarray(x), np.ones(2, np.float32))


def test_concrete_values_under_grad_are_usable():
    # grad evaluates eagerly: Python control flow on the (concrete) primal is fine.
    f = lambda x: x * 2 if x > 0 else -x
    assert float(tracer.grad(f)(3.0)) == 2.0 and float(tracer.grad(f)(-3.0)) == -1.0
    # float() would silently drop the derivative: it raises, as in JAX.
    with pytest.raises(ConcretizationTypeError, match="float"):
        tracer.grad(lambda x: x * float(x))(3.0)


def test_concrete_or_error_names_the_context():
    with pytest.raises(ConcretizationTypeError, match="the size argument of foo"):
        _staged(lambda x: concrete_or_error(int, x, "the size argument of foo"), 1)


def test_escaped_tracer():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2

    tracer.make_jaxpr(f)(np.ones(2))
    with pytest.raises(UnexpectedTracerError, match=r"(?s)escaped.*Return values"):
        lax.sin(leaked[0])
    tracer.vmap(f)(np.ones((3, 2)))
    with pytest.raises(UnexpectedTracerError):
        leaked[-1] + 1
    tracer.grad(lambda x: f(x).sum())(np.ones(2))
    with pytest.raises(UnexpectedTracerError):
        tnp.exp(leaked[-1])


def test_tracer_from_an_outer_transformation_used_in_a_finished_inner_one():
    inner_leak = []

    def outer(x):
        def inner(y):
            inner_leak.append(y)
            return y + x
        tracer.vmap(inner)(tnp.ones(3))
        return x

    tracer.make_jaxpr(outer)(1.0)
    with pytest.raises(UnexpectedTracerError):
        inner_leak[0] * 2


# ----------------------------- shape and dtype errors of lax ----------------------------

@pytest.mark.parametrize("call,pattern", [
    (lambda: lax.add(np.ones((2, 3)), np.ones((3, 2))),
     r"add requires arguments of equal shapes, got f64\[2,3\], f64\[3,2\]; broadcast"),
    (lambda: lax.mul(np.ones(3, np.float32), np.ones(3)),
     r"mul requires arguments of the same dtype, got f32\[3\], f64\[3\]"),
    (lambda: lax.sin(np.ones(3, np.int32)),
     r"sin does not accept dtype int32.*it accepts floating or complex dtypes"),
    (lambda: lax.reshape(np.ones((2, 3)), (4, 2)),
     r"reshape: cannot reshape f64\[2,3\] \(size 6\) to shape \(4, 2\) \(size 8\)"),
    (lambda: lax.broadcast_in_dim(np.ones(3), (2, 4), (1,)),
     r"broadcast_in_dim: operand f64\[3\] dimension 0 \(size 3\) cannot broadcast to output "
     r"dimension 1.*must be 1 or 4"),
    (lambda: lax.transpose(np.ones((2, 3)), (0, 0)),
     r"transpose: permutation \(0, 0\) is not a permutation"),
    (lambda: lax.slice(np.ones(4), (1,), (6,)),
     r"slice: dimension 0: need 0 <= start \(1\) <= limit \(6\) <= size \(4\)"),
    (lambda: lax.concatenate([np.ones((2, 3)), np.ones((3, 2))], 0),
     r"concatenate: operands must have equal sizes outside dimension 0"),
    (lambda: lax.pad(np.ones(2), 0.0, [(-2, -2, 0)]),
     r"pad: padding_config .* gives a negative size"),
    (lambda: lax.dot_general(np.ones((2, 3)), np.ones((4, 5)), (((1,), (0,)), ((), ()))),
     r"dot_general: contracting dimension sizes differ: lhs f64\[2,3\] dim 1 vs rhs "
     r"f64\[4,5\] dim 0"),
    (lambda: lax.dot(np.ones((2, 2, 2)), np.ones(2)),
     r"dot: operands must be 1-D or 2-D.*use dot_general"),
    (lambda: lax.reduce_sum(np.ones((2, 3)), (2,)), r"axis 2 is out of bounds.*rank 2"),
    (lambda: lax.argmax(np.ones((0, 3)), 0, np.int32), r"argmax: cannot take the argmax of an "
                                                        r"empty axis"),
    (lambda: lax.select_n(np.ones(3, bool), np.ones(3), np.ones(3), np.ones(3)),
     r"select_n: a bool `which` selects between 2 cases, got 3"),
    (lambda: lax.clamp(np.zeros(2), np.ones(3), 1.0),
     r"clamp: min must be a scalar or have the operand's shape f64\[3\], got f64\[2\]"),
    (lambda: lax.bitcast_convert_type(np.ones(3, np.float32), np.float64),
     r"bitcast_convert_type: converting f32\[3\] to the wider float64 needs a last "
     r"dimension of size 2"),
    (lambda: lax.convert_element_type(np.ones(2), "U3"), r"dtype <U3 is not supported"),
    (lambda: lax.integer_pow(np.ones(2, np.int32), -1),
     r"integer_pow: negative exponent -1 for integer operand i32\[2\]"),
    (lambda: lax.squeeze(np.ones((2, 3)), (0,)),
     r"squeeze: dimension 0 of shape \(2, 3\) has size 2, not 1"),
    (lambda: lax.iota(np.bool_, 3), r"iota: dtype must be numeric, got bool"),
])
def test_lax_errors_name_the_op_and_shapes(call, pattern):
    with pytest.raises((TypeError, ValueError), match=pattern):
        call()


_OBJ = np.array([1.0, 2.0], dtype=object)


@pytest.mark.parametrize("call, pattern", [
    (lambda: tnp.sin(_OBJ), r"sin: argument 0 is an array of shape \(2,\) and dtype object"),
    (lambda: tnp.add(1.0, _OBJ), r"add: argument 1 is an array of shape \(2,\) and dtype obj"),
    (lambda: tnp.sum(np.array(["x"])), r"sum: an argument is an array of shape \(1,\) and "
                                       r"dtype <U1"),
    (lambda: tnp.reshape(_OBJ, (2,)), r"reshape: an argument .* dtype object"),
    (lambda: lax.add(_OBJ, _OBJ), r"add: operand 0 is an array of shape \(2,\) and dtype obj"),
    (lambda: tracer.jit(lambda x: x + 1)(_OBJ), r"jit\(<lambda>\): argument 0 is an array of "
                                                r"shape \(2,\) and dtype object"),
    (lambda: tracer.jit(lambda t: t[0])([np.ones(2), _OBJ]),
     r"jit\(<lambda>\): argument 0\[1\] is an array of shape \(2,\) and dtype object"),
    (lambda: tracer.grad(lambda x: x.sum())(_OBJ), r"grad of <lambda>: argument 0 is an array"),
    (lambda: tracer.vmap(lambda x: x)(_OBJ), r"vmap\(<lambda>\): argument x is an array of "
                                             r"shape \(2,\) and dtype object"),
    (lambda: tnp.sin(np.longdouble(1.0)) if np.dtype(np.longdouble).itemsize > 8 else
     tnp.sin(np.array([1], dtype="U1")), r"sin: argument 0 is an array of shape .* and dtype"),
])
def test_unsupported_numpy_dtypes_name_the_function_shape_and_fix(call, pattern):
    """A NumPy argument of a dtype outside tracer's set (object, strings, float128)
    is a TypeError naming the function, the argument, its shape and dtype, the supported
    dtypes and the conversion to make."""
    with pytest.raises(TypeError, match=pattern) as info:
        call()
    assert "float32" in str(info.value) and ".astype(" in str(info.value)


def test_a_jit_fast_path_met_before_still_names_an_unsupported_dtype():
    f = tracer.jit(lambda x, t: x + t[0])
    f(np.ones(2), [np.ones(2)])               # (the plain-array and matcher paths exist)
    f(np.ones(2), [np.ones(2)])
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 1\[0\] is an array of "
                                        r"shape \(2,\) and dtype object"):
        f(np.ones(2), [_OBJ])
    g = tracer.jit(lambda x: x * 2)
    g(np.ones(2))
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 0 is an array .* object"):
        g(_OBJ)


def test_array_constructor_refuses_unsupported_dtypes():
    for v in (_OBJ, np.array(["a"]), np.array([1], dtype="datetime64[s]")):
        with pytest.raises(TypeError, match=r"Array: its value is an array of shape \(.*\) "
                                            r"and dtype .*astype"):
            tracer.Array(v)
