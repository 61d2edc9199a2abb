"""tracer.numpy.vectorize against numpy.vectorize: broadcasting of loop dimensions, core
dimensions from gufunc signatures, excluded arguments, batched jaxprs, errors."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_close


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_scalar_function_broadcasts_like_numpy():
    f = lambda x, y: x * 2.0 + tnp.sin(y)
    ref = np.vectorize(lambda x, y: x * 2.0 + np.sin(y))
    x, y = _rng().standard_normal((3, 1)), _rng(1).standard_normal(4)
    got = tnp.vectorize(f)(x, y)
    assert got.shape == (3, 4)
    check_close(got, ref(x, y))
    # scalars and 0-d arrays
    check_close(tnp.vectorize(f)(1.5, y), ref(1.5, y))
    check_close(tnp.vectorize(f)(np.float64(0.5), np.float64(2.0)), ref(0.5, 2.0))


def test_signature_core_dims():
    rng = _rng()
    dot = tnp.vectorize(lambda a, b: tnp.sum(a * b), signature="(n),(n)->()")
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal(4)
    check_close(dot(a, b), np.vectorize(np.dot, signature="(n),(n)->()")(a, b))
    matvec = tnp.vectorize(lambda m, v: m @ v, signature="(m,n),(n)->(m)")
    m, v = rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((5, 4))
    got = matvec(m, v)
    assert got.shape == (2, 5, 3)
    check_close(got, np.vectorize(np.matmul, signature="(m,n),(n)->(m)")(m, v))
    # whitespace in the signature is ignored; a new output dimension
    stack = tnp.vectorize(lambda x: tnp.stack([x, x ** 2, x ** 3]), signature="() -> (k)")
    x = rng.standard_normal((2, 3))
    check_close(stack(x), np.stack([x, x ** 2, x ** 3], axis=-1))


def test_multiple_outputs():
    f = tnp.vectorize(lambda x: (tnp.sum(x), tnp.max(x)), signature="(n)->(),()")
    x = _rng().standard_normal((3, 2, 5))
    s, m = f(x)
    check_close(s, x.sum(-1))
    check_close(m, x.max(-1))
    g = tnp.vectorize(lambda x, y: (x + y, x * y))
    a, b = g(np.arange(3.0)[:, None], np.arange(2.0))
    check_close(a, np.arange(3.0)[:, None] + np.arange(2.0))
    check_close(b, np.arange(3.0)[:, None] * np.arange(2.0))


def test_size_one_loop_dims_broadcast_and_are_kept():
    f = tnp.vectorize(lambda a, b: tnp.sum(a) * b, signature="(n),()->()")
    a = _rng().standard_normal((1, 3, 4))
    b = _rng(1).standard_normal((2, 1))
    ref = np.vectorize(lambda a, b: np.sum(a) * b, signature="(n),()->()")
    got = f(a, b)
    assert got.shape == (2, 3)
    check_close(got, ref(a, b))
    # every loop dim of size 1
    got = f(np.ones((1, 1, 4)), np.ones((1,)))
    assert got.shape == (1, 1)
    check_close(got, np.full((1, 1), 4.0))


def test_empty_loop_dims():
    f = tnp.vectorize(lambda a: tnp.sum(a), signature="(n)->()")
    assert f(np.zeros((0, 3))).shape == (0,)
    g = tnp.vectorize(lambda x, y: x + y)
    assert g(np.zeros((2, 0)), np.zeros((1, 1))).shape == (2, 0)


def test_excluded_positional_and_keyword():
    def f(x, powers, *, scale=1.0, name=None):
        assert isinstance(powers, tuple) and name in (None, "id")
        return sum(x ** p for p in powers) * scale

    vf = tnp.vectorize(f, excluded={1, "name"})
    x = np.arange(4.0)
    check_close(vf(x, (1, 2), name="id"), x + x ** 2)
    # a non-excluded keyword argument is vectorized (broadcast) too
    check_close(vf(x, (1,), scale=np.array([[1.0], [2.0]])), np.stack([x, 2 * x]))
    # None arguments pass through
    g = tnp.vectorize(lambda x, opt: x if opt is None else x + opt)
    check_close(g(x, None), x)


def test_vectorized_function_sees_core_shapes_only():
    seen = []

    def f(m, v):
        seen.append((m.shape, v.shape))
        return m @ v

    tnp.vectorize(f, signature="(m,n),(n)->(m)")(np.ones((7, 2, 3)), np.ones((5, 1, 3)))
    assert seen == [((2, 3), (3,))]


def test_jaxpr_is_batched_not_a_loop():
    f = tnp.vectorize(lambda a, b: tnp.sum(a * b), signature="(n),(n)->()")
    counts = set()
    for n in (2, 11):
        closed = tracer.make_jaxpr(f)(np.ones((n, 4)), np.ones(4))
        counts.add(len(closed.jaxpr.eqns))
        assert closed.jaxpr.outvars[0].aval.shape == (n,)
    assert len(counts) == 1
    closed = tracer.make_jaxpr(tnp.vectorize(lambda m, v: m @ v, signature="(m,n),(n)->(m)"))(
        np.ones((6, 2, 3)), np.ones(3))
    assert [e.primitive.name for e in closed.jaxpr.eqns].count("dot_general") == 1


def test_composes_with_grad_jit_vmap():
    f = tnp.vectorize(lambda a, b: tnp.sum(tnp.sin(a) * b), signature="(n),(n)->()")
    x, w = _rng().standard_normal((3, 4)), _rng(1).standard_normal(4)
    g = tracer.grad(lambda x: tnp.sum(f(x, w)))(x)
    check_close(g, np.cos(x) * w, atol=1e-12)
    check_close(tracer.jit(f)(x, w), (np.sin(x) * w).sum(-1))
    check_close(tracer.vmap(f, in_axes=(1, None))(x.T, w), (np.sin(x) * w).sum(-1))
    tracer.test_util.check_grads(lambda x: f(x, w), (x,), order=1)


# ======================================= errors ==========================================

def test_error_malformed_signature():
    for sig in ["(n->()", "(n)", "(n)->(m", "n->m", "(n),->()", "(n;m)->()"]:
        with pytest.raises(ValueError, match="not a valid gufunc signature"):
            tnp.vectorize(lambda x: x, signature=sig)
    with pytest.raises(TypeError, match="signature must be a string"):
        tnp.vectorize(lambda x: x, signature=("(n)", "()"))


def test_error_mismatched_core_dims():
    f = tnp.vectorize(lambda m, v: m @ v, signature="(m,n),(n)->(m)")
    with pytest.raises(ValueError, match=r"inconsistent size for core dimension 'n'.*4 in "
                                         r"input 0 \(shape \(2, 3, 4\)\) but 5 in input 1"):
        f(np.ones((2, 3, 4)), np.ones(5))
    with pytest.raises(ValueError, match=r"input 0 has shape \(3,\).*core dimensions \(m,n\).*"
                                         r"at least 2 dimensions"):
        f(np.ones(3), np.ones(3))
    g = tnp.vectorize(lambda v: v[:2], signature="(n)->(n)")
    with pytest.raises(ValueError, match=r"core dimension 'n'.*3 in input 0.*2 in output 0"):
        g(np.ones((4, 3)))


def test_error_outputs_not_matching_signature():
    with pytest.raises(ValueError, match=r"output 0 has shape \(3,\).*\(n,n\).*exactly 2"):
        tnp.vectorize(lambda x: x, signature="(n)->(n,n)")(np.ones(3))
    with pytest.raises(TypeError, match="2 outputs, so the function must return a tuple"):
        tnp.vectorize(lambda x: x, signature="(n)->(),()")(np.ones(3))
    with pytest.raises(TypeError, match="has 2 outputs, but the function returned 3"):
        tnp.vectorize(lambda x: (x[0], x[1], x[2]), signature="(n)->(),()")(np.ones(3))
    with pytest.raises(ValueError, match=r"output 1 has shape \(\).*\(k\)"):
        tnp.vectorize(lambda x: (x, x[0]), signature="(k)->(k),(k)")(np.ones(3))
    with pytest.raises(ValueError, match=r"inconsistent size for core dimension 'k'.*output 0"
                                         r".*output 1"):
        tnp.vectorize(lambda x: (tnp.stack([x, x]), tnp.stack([x, x, x])),
                      signature="()->(k),(k)")(np.ones(3))


def test_error_loop_dims_and_argument_counts():
    f = tnp.vectorize(lambda x, y: x + y)
    with pytest.raises(ValueError, match=r"loop \(non-core\) dimensions .* do not broadcast.*"
                                         r"input 0 \(3,\), input 1 \(4,\)"):
        f(np.ones(3), np.ones(4))
    g = tnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")
    with pytest.raises(TypeError, match="signature '\\(n\\),\\(n\\)->\\(\\)' has 2 inputs, "
                                        "but 1 vectorized positional argument was given"):
        g(np.ones(3))
    with pytest.raises(TypeError, match=r"keyword argument\(s\) \['b'\] are not covered"):
        g(np.ones(3), b=np.ones(3))
    with pytest.raises(TypeError, match="excluded must hold non-negative"):
        tnp.vectorize(lambda x: x, excluded={-1})
