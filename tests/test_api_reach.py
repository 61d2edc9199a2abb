"""The public surface around the transformations, checked against JAX's behaviour (error
types and messages as JAX 0.10 gives them, noted beside each case): subpackage attributes
after ``import tracer``, argument validation of jit/grad/vmap & co., the scalar type
objects of tracer.numpy, tracer.ops' segment reductions, Python-int overflow errors, and
the transformations' docstrings."""
import inspect
import subprocess
import sys

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer import ops


# --- subpackages ---

def test_subpackages_are_attributes_after_import_tracer_without_numba():
    code = ("import sys, tracer\n"
            "import numpy as np\n"
            "for m in ('scipy.linalg', 'scipy.special', 'ops', 'numpy.linalg', 'numpy.fft',\n"
            "          'random', 'nn', 'tree_util', 'lax', 'debug', 'ffi'):\n"
            "    obj = tracer\n"
            "    for part in m.split('.'):\n"
            "        obj = getattr(obj, part)\n"
            "assert 'numba' not in sys.modules, 'import tracer imported numba'\n"
            "a = tracer.numpy.asarray([[4.0, 2.0], [2.0, 3.0]])\n"
            "c, low = tracer.scipy.linalg.cho_factor(a, lower=True)\n"
            "assert np.allclose(np.tril(np.asarray(c)) @ np.tril(np.asarray(c)).T, a)\n"
            "assert tracer.ops.segment_sum(tracer.numpy.ones(3),\n"
            "                              tracer.numpy.array([0, 0, 1]), 2).shape == (2,)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --- argument validation (JAX's error types) ---

def _f(x):
    return x * 2


def _g(x, y=1.0):
    return x * y


def test_jit_validates_its_arguments_at_definition():
    # JAX: ValueError "Jitted function has static_argnums=(3,), but only accepts 1
    # positional arguments." -- at jit(...) time.
    with pytest.raises(ValueError, match=r"jit\(_f\): static_argnums=\(3,\) but _f accepts "
                                         r"only 1 positional argument \(x\)"):
        tracer.jit(_f, static_argnums=3)
    with pytest.raises(ValueError, match="static_argnums"):
        tracer.jit(_f, static_argnums=-2)
    with pytest.raises(ValueError, match=r"donate_argnums=\(3,\)"):
        tracer.jit(_f, donate_argnums=3)
    with pytest.raises(ValueError, match=r"invalid argnames \['z'\] in static_argnames"):
        tracer.jit(_f, static_argnames="z")
    with pytest.raises(ValueError, match="donate_argnames"):
        tracer.jit(_f, donate_argnames=("z",))
    with pytest.raises(ValueError, match="both static and donated"):
        tracer.jit(_g, static_argnums=0, donate_argnums=0)
    with pytest.raises(ValueError, match="takes no positional arguments"):
        tracer.jit(lambda *, x: x, static_argnums=0)
    # Misspelled keywords are Python's TypeError (JAX: "jit() got an unexpected keyword
    # argument 'static_argnum'").
    with pytest.raises(TypeError, match="unexpected keyword argument 'static_argnum'"):
        tracer.jit(_f, static_argnum=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'static_argnum'"):
        tracer.jit(static_argnum=1)
    with pytest.raises(TypeError, match="static_argnums must be an int"):
        tracer.jit(_f, static_argnums="x")
    with pytest.raises(TypeError, match="static_argnames must be a str"):
        tracer.jit(_f, static_argnames=3)
    with pytest.raises(TypeError, match="expected a callable value, got 3"):
        tracer.jit(3)


def test_jit_accepts_what_jax_accepts():
    # Out-of-range static_argnums are fine with *args (they apply when passed) and a
    # static_argnum beyond the call's arguments is ignored, as in JAX.
    assert float(tracer.jit(_g, static_argnums=1)(2.0)) == 2.0
    h = tracer.jit(lambda *a: a[0] * a[1], static_argnums=1)
    assert float(h(2.0, 3)) == 6.0
    k = tracer.jit(lambda x, **kw: x * kw["s"], static_argnames="s")
    assert float(k(2.0, s=4)) == 8.0
    # Names and numbers map through the signature.
    calls = []

    def f(x, n):
        calls.append(n)
        return x * n
    fj = tracer.jit(f, static_argnames="n")
    assert float(fj(2.0, 3)) == 6.0 and float(fj(2.0, n=3)) == 6.0 and calls == [3, 3]
    # Compatibility keywords are accepted and ignored; the decorator form takes them too.
    dec = tracer.jit(static_argnums=1, donate_argnums=0, keep_unused=True, inline=True,
                     device=None, backend="cpu", in_shardings=None, out_shardings=None,
                     compiler_options={})
    assert float(dec(_g)(2.0, 5.0)) == 10.0


def test_transformations_validate_fun_and_argnums():
    for t in (tracer.grad, tracer.value_and_grad, tracer.vmap, tracer.jacfwd,
              tracer.jacrev, tracer.hessian, tracer.make_jaxpr, tracer.checkpoint):
        with pytest.raises(TypeError, match="expected a callable value, got 3"):
            t(3)
    with pytest.raises(TypeError, match="expected a callable value"):
        tracer.jvp(3, (1.0,), (1.0,))
    with pytest.raises(TypeError, match="expected a callable value"):
        tracer.vjp(3, 1.0)
    # JAX: TypeError "differentiating with respect to argnums=2 requires at least 3
    # positional arguments to be passed by the caller, but got only 1"; a negative one out
    # of range is a ValueError there, and jacfwd/jacrev/hessian raise ValueError.
    with pytest.raises(TypeError, match=r"argnums=2 requires at least 3 positional"):
        tracer.grad(_f, argnums=2)(1.0)
    with pytest.raises(TypeError, match=r"argnums=2 requires at least 3"):
        tracer.value_and_grad(_f, argnums=2)(1.0)
    with pytest.raises(ValueError, match=r"argnums=-2"):
        tracer.grad(_f, argnums=-2)(1.0)
    for t in (tracer.jacfwd, tracer.jacrev, tracer.hessian):
        with pytest.raises(ValueError, match=r"of _f: differentiating with respect to argnums=2"):
            t(_f, argnums=2)(1.0)
    for t in (tracer.grad, tracer.jacfwd, tracer.jacrev):
        with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
            t(_f, argnums="x")
    with pytest.raises(TypeError, match="unexpected keyword argument 'argnum'"):
        tracer.grad(_f, argnum=1)
    # vmap: in_axes of the wrong length is a ValueError, a float leaf a TypeError (JAX's).
    with pytest.raises(ValueError, match="tuple of length 3 for 2 positional arguments"):
        tracer.vmap(_g, in_axes=(0, 0, 0))(tnp.ones(3), tnp.ones(3))
    with pytest.raises(TypeError, match="in_axes must be an int, None"):
        tracer.vmap(_f, in_axes=1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'in_axis'"):
        tracer.vmap(_f, in_axis=1)
    # make_jaxpr and checkpoint: static_argnums out of range (JAX: ValueError), also
    # when checkpoint runs without a transformation.
    with pytest.raises(ValueError, match=r"make_jaxpr\(_f\): static_argnums entry 3"):
        tracer.make_jaxpr(_f, static_argnums=3)(1.0)
    with pytest.raises(ValueError, match=r"checkpoint\(_f\): static_argnums entry 3"):
        tracer.checkpoint(_f, static_argnums=3)(1.0)


# --- scalar types ---

SCALAR_NAMES = ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "float16", "float32", "float64", "complex64", "complex128"]
ALIASES = {"bool": "bool_", "int_": "int64", "uint": "uint64", "float_": "float64",
           "complex_": "complex128", "single": "float32", "double": "float64",
           "csingle": "complex64", "cdouble": "complex128"}


@pytest.mark.parametrize("name", SCALAR_NAMES + sorted(ALIASES))
def test_scalar_types_are_dtypes_and_constructors(name):
    t = getattr(tnp, name)
    want = np.dtype(ALIASES.get(name, name).rstrip("_") if name != "bool_" else "bool")
    assert np.dtype(t) == want and tnp.dtype(t) == want and t.dtype == want
    # A constructor: a 0-d Array of the type (as jnp.float32(0.5)), arrays from data.
    v = t(1)
    assert isinstance(v, tnp.ndarray) and v.shape == () and v.dtype == want
    assert np.asarray(v).item() == want.type(1).item()
    assert t([1, 0]).dtype == want and t([1, 0]).shape == (2,)
    # Wherever a dtype goes.
    assert tnp.zeros(2, dtype=t).dtype == want
    assert tnp.ones(2).astype(t).dtype == want
    assert np.zeros(2, dtype=t).dtype == want
    assert tnp.zeros(2, dtype=want).dtype == t and t == want.type and hash(t) == hash(want.type)
    assert t != want.name   # as jnp.float32 != "float32"
    assert isinstance(want.type(1), t) and not isinstance(1.5, tnp.int8)
    kind = {"b": None, "i": tnp.signedinteger, "u": tnp.unsignedinteger,
            "f": tnp.floating, "c": tnp.complexfloating}[want.kind]
    if kind is not None:
        assert tnp.issubdtype(t, kind) and tnp.issubdtype(tnp.zeros(1, t).dtype, kind)
        assert not tnp.issubdtype(t, tnp.bool_)


def test_scalar_types_convert_under_transformations_and_x32(x32):
    # Under jit/vmap the call is a convert_element_type (as jnp.float32(tracer)).
    jaxpr = tracer.make_jaxpr(lambda x: tnp.float32(x))(tnp.ones(3, tnp.int32))
    assert "convert_element_type" in str(jaxpr) and "f32[3]" in str(jaxpr)
    out = tracer.jit(tracer.vmap(lambda x: tnp.int8(x)))(tnp.array([1.9, -2.9, 100.0]))
    assert out.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(out), [1, -2, 100])
    g = tracer.grad(lambda x: tnp.float32(x) * 3.0)(tnp.float32(2.0))
    assert float(g) == 3.0 and g.dtype == np.float32
    # Without x64 the 64-bit types give 32-bit arrays, as in JAX.
    assert tnp.float64(1.0).dtype == np.float32 and tnp.int_(1).dtype == np.int32
    with pytest.raises(OverflowError, match="out of range for int32"):
        tnp.int32(2 ** 40)


# --- tracer.ops ---

def _segment_loop(op, data, ids, n):
    """The NumPy reference: a loop over rows, ids outside [0, n) dropped."""
    data = np.asarray(data)
    if data.dtype == bool:
        ident = {"max": False, "min": True, "sum": False, "prod": True}[op]
    elif data.dtype.kind in "iu":
        info = np.iinfo(data.dtype)
        ident = {"max": info.min, "min": info.max, "sum": 0, "prod": 1}[op]
    else:
        ident = {"max": -np.inf, "min": np.inf, "sum": 0, "prod": 1}[op]
    out = np.full((n,) + data.shape[1:], ident, data.dtype)
    f = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    for row, s in zip(data, ids):
        if 0 <= s < n:
            out[s] = f(out[s], row)
    return out


SEGMENT_OPS = {"sum": ops.segment_sum, "prod": ops.segment_prod, "max": ops.segment_max,
               "min": ops.segment_min}


@pytest.mark.parametrize("op", sorted(SEGMENT_OPS))
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8"])
def test_segments_match_a_numpy_loop(op, dtype):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 5, (9, 2)).astype(dtype)
    # Empty segments 1 and 4 get the identity; -1 and 6 are dropped (no wrapping).
    ids = np.array([0, 2, 2, -1, 6, 0, 3, 3, 3])
    got = SEGMENT_OPS[op](tnp.asarray(data), tnp.asarray(ids), 5)
    want = _segment_loop(op, data, ids, 5)
    assert got.dtype == want.dtype and got.shape == (5, 2)
    np.testing.assert_array_equal(np.asarray(got), want)
    # bucket_size: the same values (integers, so the order of additions does not matter).
    np.testing.assert_array_equal(
        np.asarray(SEGMENT_OPS[op](tnp.asarray(data), tnp.asarray(ids), 5, bucket_size=2)),
        want)
    # Default num_segments: max(ids) + 1.
    assert SEGMENT_OPS[op](tnp.asarray(data), tnp.asarray(ids)).shape == (7, 2)


def test_segment_edge_values_and_modes():
    x = tnp.array([1.0, np.nan, -0.0, 0.0, np.inf])
    ids = tnp.array([0, 0, 1, 1, 2])
    assert np.isnan(np.asarray(ops.segment_max(x, ids, 3))[0])
    assert np.isnan(np.asarray(ops.segment_min(x, ids, 3))[0])
    assert np.asarray(ops.segment_max(x, ids, 3))[2] == np.inf
    s = np.asarray(ops.segment_sum(x, ids, 4))
    assert s[1] == 0 and s[3] == 0 and s[2] == np.inf
    b = np.asarray(ops.segment_max(tnp.array([True, False]), tnp.array([0, 0]), 3))
    np.testing.assert_array_equal(b, [True, False, False])
    # mode='clip' clamps out-of-range ids into the first/last segment (as JAX).
    c = ops.segment_sum(tnp.array([1.0, 2.0, 4.0]), tnp.array([-3, 1, 9]), 3, mode="clip")
    np.testing.assert_array_equal(np.asarray(c), [1.0, 2.0, 4.0])
    assert ops.segment_sum(tnp.ones((0, 2)), tnp.zeros(0, tnp.int32), 2).shape == (2, 2)
    with pytest.raises(TypeError, match="segment_ids must be integers"):
        ops.segment_sum(tnp.ones(2), tnp.ones(2), 2)
    with pytest.raises(ValueError, match="one id per row"):
        ops.segment_sum(tnp.ones(3), tnp.zeros(2, tnp.int32), 2)
    with pytest.raises(ValueError, match="non-negative"):
        ops.segment_sum(tnp.ones(2), tnp.zeros(2, tnp.int32), -1)
    with pytest.raises(ValueError, match="segment_ids is empty"):
        ops.segment_sum(tnp.ones(0), tnp.zeros(0, tnp.int32))


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("op", sorted(SEGMENT_OPS))
def test_segment_gradients_match_finite_differences(op):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((7, 2))          # distinct values: max/min have no ties
    ids = np.array([0, 2, 2, 5, 0, 1, 2])
    w = rng.standard_normal((4, 2))
    seg = SEGMENT_OPS[op]

    def loss(d):
        out = seg(d, tnp.asarray(ids), 4)
        return tnp.sum(tnp.where(tnp.isfinite(out), out, 0.0) * w)

    g = np.asarray(tracer.grad(loss)(tnp.asarray(data)))
    np.testing.assert_allclose(g, _fd_grad(lambda d: float(loss(tnp.asarray(d))), data),
                               rtol=1e-6, atol=1e-8)
    # The same gradient under jit, and per example under vmap(grad).
    np.testing.assert_allclose(np.asarray(tracer.jit(tracer.grad(loss))(tnp.asarray(data))),
                               g, rtol=1e-12)
    batch = np.stack([data, data[::-1].copy()])
    gv = np.asarray(tracer.vmap(tracer.grad(loss))(tnp.asarray(batch)))
    np.testing.assert_allclose(gv[1], np.asarray(tracer.grad(loss)(tnp.asarray(batch[1]))),
                               rtol=1e-12)


@pytest.mark.parametrize("op", sorted(SEGMENT_OPS))
def test_segment_vmap_matches_a_loop_and_jit_matches_eager(op):
    rng = np.random.default_rng(3)
    seg = SEGMENT_OPS[op]
    data = rng.standard_normal((3, 6, 2))
    ids = rng.integers(-1, 5, (3, 6))
    got = tracer.vmap(lambda d, i: seg(d, i, 4))(tnp.asarray(data), tnp.asarray(ids))
    want = np.stack([_segment_loop(op, data[b], ids[b], 4) for b in range(3)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    shared = tracer.vmap(lambda d: seg(d, tnp.asarray(ids[0]), 4))(tnp.asarray(data))
    np.testing.assert_allclose(np.asarray(shared),
                               np.stack([_segment_loop(op, data[b], ids[0], 4)
                                         for b in range(3)]), rtol=1e-12)
    jitted = tracer.jit(seg, static_argnums=2)(tnp.asarray(data[0]), tnp.asarray(ids[0]), 4)
    np.testing.assert_allclose(np.asarray(jitted), want[0], rtol=1e-12)
    with pytest.raises(tracer.ConcretizationTypeError, match="pass num_segments"):
        tracer.jit(seg)(tnp.asarray(data[0]), tnp.asarray(ids[0]))


# --- Python ints that do not fit ---

def test_python_int_overflow_errors_name_value_dtype_and_fix():
    # JAX: OverflowError "Python int 18446744073709551616 too large to convert to int64".
    with pytest.raises(OverflowError, match=r"tracer.numpy.array: Python int "
                                            r"18446744073709551616 is out of range for int64 "
                                            r".*wider than 64 bits"):
        tnp.array(2 ** 64)
    with pytest.raises(OverflowError, match=r"tracer.numpy.asarray: Python int "
                                            r"18446744073709551616"):
        tnp.asarray(2 ** 64)
    with pytest.raises(OverflowError, match=r"9223372036854775808 is out of range for "
                                            r"int64.*pass dtype=uint64"):
        tnp.array(2 ** 63)
    assert tnp.array(2 ** 63, dtype=tnp.uint64).dtype == np.uint64
    with pytest.raises(OverflowError, match=r"out of range for int32.*pass dtype=int64"):
        tnp.array([1, 2 ** 40], dtype=tnp.int32)
    with pytest.raises(OverflowError, match="18446744073709551616"):
        tnp.array([[1], [2 ** 64]])
    with pytest.raises(OverflowError, match="tracer.numpy.full: Python int"):
        tnp.full(3, 2 ** 64)
    with pytest.raises(OverflowError, match=r"x.at\[idx\].set: Python int"):
        tnp.ones(3, tnp.int32).at[0].set(2 ** 64)
    x = tnp.ones(3, tnp.int32)
    with pytest.raises(OverflowError, match=r"Python int 18446744073709551616 is too large "
                                            r"to combine with an array of dtype int32"):
        x + 2 ** 64
    with pytest.raises(OverflowError, match="18446744073709551616"):
        tnp.add(x, 2 ** 64)
    # Floats take big ints (as JAX), and in-range ints wrap into narrow arrays as in JAX.
    assert tnp.array([1.5, 2 ** 64]).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, tnp.uint8) + 300), [45, 45])


def test_python_int_overflow_without_x64(x32):
    with pytest.raises(OverflowError, match=r"out of range for int32.*enable_x64"):
        tnp.array(2 ** 40)


# --- docstrings ---

TRANSFORMATIONS = ["jit", "grad", "value_and_grad", "jvp", "vjp", "linearize", "vmap",
                   "jacfwd", "jacrev", "hessian", "make_jaxpr", "eval_shape", "checkpoint",
                   "custom_jvp", "custom_vjp"]


@pytest.mark.parametrize("name", TRANSFORMATIONS)
def test_transformation_docstrings_document_arguments_result_and_errors(name):
    obj = getattr(tracer, name)
    doc = inspect.getdoc(obj) or ""
    sig = inspect.signature(obj)
    for p in sig.parameters:
        assert f"{p}" in doc, f"{name}'s docstring does not document {p!r}"
    assert "Returns" in doc and "Raises" in doc and f"jax.{name}" in doc
    if name == "jit":
        for word in (".lower(", ".compile()", "as_text()", "Lowered", "Compiled"):
            assert word in doc
