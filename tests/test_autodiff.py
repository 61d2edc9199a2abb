"""Automatic differentiation: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,
hessian, stop_gradient and checkpoint, over pytrees, to higher order, composed with jit and
vmap. Oracles: closed forms and hand-written backprop, central finite differences
(check_grads), and values recorded from JAX 0.10.2 (x64) for kinks, singular points and
complex inputs (JAX itself is never imported here).
"""
import re

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer import dtypes
from tracer.ad_checkpoint import checkpoint_name, checkpoint_policies
from tracer.interpreters import ad
from tracer.test_util import check_grads

N, L = tnp, lax  # the kink table below is written over (numpy module, lax)
inf, nan = np.inf, np.nan


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol, equal_nan=True)


def tree_close(a, b, tol=1e-10):
    la, ta = tracer.tree_util.tree_flatten(a)
    lb, tb = tracer.tree_util.tree_flatten(b)
    assert ta == tb, f"{ta} != {tb}"
    for x, y in zip(la, lb):
        assert np.shape(x) == np.shape(y)
        close(x, y, tol)


def eqns_of(closed, recursive=True):
    """All equations of a jaxpr, with those of its sub-jaxprs."""
    out = []
    for e in closed.jaxpr.eqns if hasattr(closed, "jaxpr") else closed.eqns:
        out.append(e)
        if recursive:
            for v in e.params.values():
                if hasattr(v, "jaxpr") and hasattr(v, "consts"):
                    out.extend(eqns_of(v))
    return out


def materialized_zeros(closed):
    """Equations that build an all-zero array from a literal zero (broadcast_in_dim 0.0),
    the sign of a symbolic zero that was instantiated."""
    bad = []
    for e in eqns_of(closed):
        if e.primitive.name in ("broadcast_in_dim", "full"):
            x = e.invars[0]
            if hasattr(x, "val") and np.all(np.asarray(x.val) == 0):
                bad.append(e)
    return bad


# ------------------------------------------ jvp -------------------------------------------

def test_jvp_pytrees_and_closed_form():
    def f(p, x):
        return {"y": tnp.sin(p["w"]) * x, "z": (p["b"] * x, x)}

    p = {"w": np.array([0.3, 0.5]), "b": 2.0}
    x = np.array([1.5, -2.0])
    tp = {"w": np.array([1.0, 0.5]), "b": 0.25}
    tx = np.array([0.1, 0.2])
    out, t = tracer.jvp(f, (p, x), (tp, tx))
    tree_close(out, {"y": np.sin(p["w"]) * x, "z": (2.0 * x, x)})
    tree_close(t, {"y": np.cos(p["w"]) * tp["w"] * x + np.sin(p["w"]) * tx,
                   "z": (0.25 * x + 2.0 * tx, tx)})


def test_jvp_has_aux():
    out, t, aux = tracer.jvp(lambda x: (x * x, {"x": x, "c": 3}), (2.0,), (1.0,), has_aux=True)
    close(out, 4.0)
    close(t, 4.0)
    assert not isinstance(aux["x"], tracer.core.Tracer)
    close(aux["x"], 2.0)
    assert aux["c"] == 3


def test_jvp_integer_primals_take_float0():
    f = lambda x, n: x * n
    out, t = tracer.jvp(f, (2.0, 3), (1.0, np.zeros((), dtypes.float0)))
    close(out, 6.0)
    close(t, 3.0)
    _, t_int = tracer.jvp(lambda n: n * 2, (3,), (np.zeros((), dtypes.float0),))
    assert t_int.dtype == dtypes.float0
    with pytest.raises(TypeError, match="float0"):
        tracer.jvp(f, (2.0, 3), (1.0, 1))


def test_jvp_errors():
    with pytest.raises(TypeError, match="tuples or lists"):
        tracer.jvp(lambda x: x, 1.0, 1.0)
    with pytest.raises(ValueError, match="equal shapes"):
        tracer.jvp(lambda x: x, (np.ones(2),), (np.ones(3),))
    with pytest.raises(TypeError, match="equal dtypes"):
        tracer.jvp(lambda x: x, (np.ones(2, np.float32),), (np.ones(2),))
    with pytest.raises(TypeError, match="tree structure"):
        tracer.jvp(lambda x, y: x, (1.0, 2.0), (1.0,))
    with pytest.raises(TypeError, match="pair"):
        tracer.jvp(lambda x: x, (1.0,), (1.0,), has_aux=True)


# --------------------------------------- linearize ----------------------------------------

def test_linearize_matches_jvp_and_has_aux():
    f = lambda x, y: (tnp.sin(x) * y, tnp.sum(x * y))
    x, y = np.array([0.1, 0.7]), np.array([2.0, -1.0])
    out, f_jvp = tracer.linearize(f, x, y)
    tree_close(out, f(x, y))
    for tx, ty in [(np.ones(2), np.zeros(2)), (np.array([0.3, -1.0]), np.array([2.0, 0.5]))]:
        tree_close(f_jvp(tx, ty), tracer.jvp(f, (x, y), (tx, ty))[1])
    out, f_jvp, aux = tracer.linearize(lambda x: (x * x, x + 1.0), 2.0, has_aux=True)
    close(out, 4.0)
    close(f_jvp(1.0), 4.0)
    close(aux, 3.0)
    assert not isinstance(aux, tracer.core.Tracer)
    with pytest.raises(TypeError, match="structure"):
        f_jvp(1.0, 2.0)


def test_linearize_keeps_only_the_linear_computation():
    # The residuals of sin(x) * y are cos(x) and y; the linear jaxpr holds no sin/cos.
    _, lin = ad._linearize(lambda x, y: [tnp.sin(x) * y], [tnp.asarray(0.5), tnp.asarray(2.0)])
    names = {e.primitive.name for e in lin.jaxpr.eqns}
    assert not names & {"sin", "cos"}, lin.jaxpr
    close(lin(1.0, 0.0)[0], np.cos(0.5) * 2.0)


# ------------------------------------------ vjp -------------------------------------------

def test_vjp_pytrees_has_aux_and_int_inputs():
    def f(p, n):
        return {"a": p[0] * p[1]["k"] * n, "b": tnp.sum(p[1]["v"])}, {"aux": p[0]}

    p = (2.0, {"k": 3.0, "v": np.array([1.0, 2.0])})
    out, f_vjp, aux = tracer.vjp(f, p, 4, has_aux=True)
    tree_close(out, {"a": 24.0, "b": 3.0})
    close(aux["aux"], 2.0)
    (gp, gn) = f_vjp({"a": 1.0, "b": 2.0})
    tree_close(gp, (12.0, {"k": 8.0, "v": np.array([2.0, 2.0])}))
    assert gn.dtype == dtypes.float0 and gn.shape == ()


def test_vjp_errors():
    _, f_vjp = tracer.vjp(lambda x: (x * 2.0, x), np.ones(2))
    with pytest.raises(TypeError, match="structure"):
        f_vjp(np.ones(2))
    with pytest.raises(ValueError, match=r"expected shape \(2,\)"):
        f_vjp((np.ones(3), np.ones(2)))
    _, f_vjp32 = tracer.vjp(lambda x: x * 2, np.float32(1.0))
    with pytest.raises(TypeError, match="expected dtype float32"):
        f_vjp32(np.float64(1.0))
    # Integer outputs take float0 (or any, ignored) cotangents, as in JAX.
    _, f_vjp_int = tracer.vjp(lambda x: (x * 2.0, 3), 1.0)
    close(f_vjp_int((1.0, 1))[0], 2.0)
    close(f_vjp_int((1.0, np.zeros((), dtypes.float0)))[0], 2.0)


# ------------------------------------------ grad ------------------------------------------

def test_grad_argnums_and_value_and_grad():
    f = lambda x, y, z: x * y ** 2 + z
    close(tracer.grad(f)(2.0, 3.0, 1.0), 9.0)
    close(tracer.grad(f, argnums=1)(2.0, 3.0, 1.0), 12.0)
    close(tracer.grad(f, argnums=-1)(2.0, 3.0, 1.0), 1.0)
    g = tracer.grad(f, argnums=(0, 2))(2.0, 3.0, 1.0)
    assert isinstance(g, tuple) and len(g) == 2
    close(g[0], 9.0)
    close(g[1], 1.0)
    v, g = tracer.value_and_grad(f, argnums=(1,))(2.0, 3.0, 1.0)
    close(v, 19.0)
    close(g[0], 12.0)
    close(tracer.grad(lambda x, y=2.0: x * y)(1.0, y=3.0), 3.0)


def test_grad_has_aux():
    g, aux = tracer.grad(lambda x: (x * x, {"h": x + 1.0}), has_aux=True)(3.0)
    close(g, 6.0)
    close(aux["h"], 4.0)
    (v, aux), g = tracer.value_and_grad(lambda x: (tnp.sum(x ** 2), x * 2), has_aux=True)(
        np.array([1.0, 2.0]))
    close(v, 5.0)
    close(aux, [2.0, 4.0])
    close(g, [2.0, 4.0])
    with pytest.raises(TypeError, match="pair"):
        tracer.grad(lambda x: x * x, has_aux=True)(2.0)


def test_grad_pytree_params_dicts_lists_tuples():
    params = {"layers": [(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, -0.5])),
                         (np.array([[0.1], [0.2]]), np.array([0.3]))],
              "scale": 2.0}
    x = np.array([[1.0, -1.0], [0.5, 2.0]])

    def loss(p, x):
        h = x
        for W, b in p["layers"]:
            h = tnp.tanh(h @ W + b)
        return p["scale"] * tnp.sum(h ** 2)

    g = tracer.grad(loss)(params, x)
    assert tracer.tree_util.tree_structure(g) == tracer.tree_util.tree_structure(params)
    # Finite differences on every leaf.
    leaves, tree = tracer.tree_util.tree_flatten(params)
    g_leaves = tracer.tree_util.tree_leaves(g)
    eps = 1e-6
    for i, leaf in enumerate(leaves):
        leaf = np.asarray(leaf, dtype=float)
        fd = np.zeros(leaf.shape)
        for idx in np.ndindex(leaf.shape):
            for sgn in (1, -1):
                ls = list(leaves)
                pert = leaf.copy()
                pert[idx] += sgn * eps
                ls[i] = pert
                fd[idx] += sgn * float(loss(tracer.tree_util.tree_unflatten(tree, ls), x))
        close(g_leaves[i], fd / (2 * eps), 1e-6)
    flat = lambda *ls: loss(tracer.tree_util.tree_unflatten(tree, ls), x)
    check_grads(flat, [np.asarray(l, float) for l in leaves], order=2)


def test_grad_weak_types_follow_the_inputs():
    assert tracer.grad(lambda x: x * x)(2.0).weak_type          # Python float in (JAX: weak)
    assert not tracer.grad(lambda x: x * x)(np.array(2.0)).weak_type
    g32 = tracer.grad(lambda x: x * x)(np.array(2.0, np.float32))
    assert g32.dtype == np.float32 and not g32.weak_type


def test_grad_in_32_bit_mode(x32):
    g = tracer.grad(lambda x: tnp.sum(tnp.sin(x) * x))(np.array([0.5, 1.0], np.float32))
    assert g.dtype == np.float32
    close(g, np.sin([0.5, 1.0]) + np.array([0.5, 1.0]) * np.cos([0.5, 1.0]), 1e-6)
    g = tracer.grad(lambda x: x * x)(2.0)
    assert g.dtype == np.float32 and g.weak_type
    H = tracer.hessian(lambda x: tnp.sum(x ** 3))(np.array([1.0, 2.0], np.float32))
    assert H.dtype == np.float32
    close(H, np.diag([6.0, 12.0]), 1e-6)


def test_grad_of_empty_and_size_one_arrays():
    g = tracer.grad(lambda x: tnp.sum(x * x))(np.zeros((2, 0)))
    assert g.shape == (2, 0)
    close(tracer.grad(lambda x: tnp.sum(x * x))(np.full((1, 1), 3.0)), [[6.0]])
    assert tracer.jacrev(lambda x: x * 2.0)(np.zeros(0)).shape == (0, 0)
    assert tracer.jacfwd(lambda x: x[:0] * 2.0)(np.zeros(2)).shape == (0, 2)


def test_grad_errors_name_what_was_expected():
    with pytest.raises(TypeError, match=r"scalar-output.*shape: \(3,\)"):
        tracer.grad(lambda x: x * x)(np.ones(3))
    with pytest.raises(TypeError, match="real-valued outputs.*int64"):
        tracer.grad(lambda x: lax.convert_element_type(x, np.int64))(2.0)
    with pytest.raises(TypeError, match="real-valued outputs.*complex128.*holomorphic"):
        tracer.grad(lambda x: x * x)(1 + 1j)
    with pytest.raises(TypeError, match="scalar-output.*list"):
        tracer.grad(lambda x: [x])(1.0)
    with pytest.raises(TypeError, match=r"argnums=3 requires at least 4 positional arguments"
                                        r".*got only 1"):
        tracer.grad(lambda x: x, argnums=3)(2.0)
    with pytest.raises(TypeError, match=r"argnums=\(0, 1\)|argnums=1 requires at least 2"):
        tracer.grad(lambda x: x, argnums=(0, 1))(2.0)
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints, got 'a'"):
        tracer.grad(lambda x: x, argnums="a")
    with pytest.raises(TypeError, match="argument 0 of type str"):
        tracer.grad(lambda x: 1.0)("a")
    with pytest.raises(TypeError, match="inputs.*got int64.*allow_int"):
        tracer.grad(lambda x: x * 1.0)(2)
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex"):
        tracer.grad(lambda x: x * x, holomorphic=True)(1.0)
    with pytest.raises(TypeError, match="holomorphic=True requires outputs with complex"):
        tracer.grad(lambda z: tnp.real(z), holomorphic=True)(1 + 1j)
    with pytest.raises(TypeError, match="argnums=0 requires at least 1"):
        tracer.grad(lambda: 1.0)()


def test_allow_int_gives_float0():
    gx, gn = tracer.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    close(gx, 3.0)
    assert gn.dtype == dtypes.float0 and gn.shape == ()
    gb = tracer.grad(lambda b: 1.0 * tnp.sum(b), allow_int=True)(np.array([True, False]))
    assert gb.dtype == dtypes.float0 and gb.shape == (2,)


# ----------------------------- complex differentiation (JAX values) -----------------------

@pytest.mark.parametrize("name,f,z,expected", [
    ("holo_sq", lambda z: z * z, (1+2j), complex(2.0, 4.0)),
    ("holo_sin", lambda z: N.sin(z), (1+2j), complex(2.0327230070196656, -3.0518977991518)),
    ("holo_exp", lambda z: N.exp(z), (0.5-1j), complex(0.8908079042931287, -1.3873511113297634)),
    ("holo_log", lambda z: N.log(z), (1+1j), complex(0.5, -0.5)),
    ("holo_cube", lambda z: z ** 3, (1-1j), complex(0.0, -6.0)),
])
def test_holomorphic_grad_matches_jax(name, f, z, expected):
    close(tracer.grad(f, holomorphic=True)(z), expected, 1e-12)


def test_complex_jacobians_follow_jax():
    close(tracer.jacfwd(lambda z: z * z, holomorphic=True)(1 + 1j), 2 + 2j)
    close(tracer.jacrev(lambda z: z * z, holomorphic=True)(1 + 1j), 2 + 2j)
    close(tracer.hessian(lambda z: z ** 3, holomorphic=True)(1 + 1j), 6 + 6j)
    close(tracer.jacfwd(lambda x: x * (1 + 1j))(1.0), 1 + 1j)          # real in, complex out
    close(tracer.jacrev(lambda z: tnp.abs(z) ** 2)(1 + 1j), 2 - 2j)    # conj convention
    with pytest.raises(TypeError, match="jacfwd.*real-valued inputs.*complex128"):
        tracer.jacfwd(lambda z: z * z)(1 + 1j)
    with pytest.raises(TypeError, match="jacrev.*real-valued outputs.*complex128"):
        tracer.jacrev(lambda z: z * z)(1 + 1j)
    with pytest.raises(TypeError, match="jacrev.*real-valued outputs.*complex128"):
        tracer.jacrev(lambda x: x * (1 + 1j))(1.0)
    with pytest.raises(TypeError, match="jacfwd.*real-valued inputs.*int64"):
        tracer.jacfwd(lambda x: x * 1.0)(2)
    with pytest.raises(TypeError, match="jacrev.*inputs.*int64.*allow_int"):
        tracer.jacrev(lambda x: x * 1.0)(2)


def test_complex_check_grads():
    z = np.array([0.3 + 0.4j, -1.0 + 0.5j])
    check_grads(lambda z: tnp.sin(z) * tnp.conj(z) + z ** 2, (z,), order=2)
    check_grads(lambda z: tnp.abs(z * z) + tnp.real(z), (z,), order=2)


# --------------------------------- kinks (values from JAX) --------------------------------

KINKS = [
    ('abs_0', lambda x: N.abs(x), (0.0,), 0, 1.0),
    ('abs_neg0', lambda x: N.abs(x), (-0.0,), 0, 1.0),
    ('maximum_relu_0', lambda x: N.maximum(x, 0.), (0.0,), 0, 0.5),
    ('maximum_relu_neg', lambda x: N.maximum(x, 0.), (-1.0,), 0, 0.0),
    ('maximum_relu_pos', lambda x: N.maximum(x, 0.), (1.0,), 0, 1.0),
    ('max_tie', lambda x, y: N.maximum(x, y), (1.0, 1.0,), (0, 1), (0.5, 0.5)),
    ('min_tie', lambda x, y: N.minimum(x, y), (1.0, 1.0,), (0, 1), (0.5, 0.5)),
    ('lax_max_tie', lambda x, y: L.max(x, y), (2.0, 2.0,), (0, 1), (0.5, 0.5)),
    ('sqrt_0', lambda x: N.sqrt(x), (0.0,), 0, inf),
    ('sqrt_neg', lambda x: N.sqrt(x), (-1.0,), 0, nan),
    ('cbrt_0', lambda x: N.cbrt(x), (0.0,), 0, inf),
    ('rsqrt_0', lambda x: L.rsqrt(x), (0.0,), 0, -inf),
    ('pow_half_0', lambda x: x ** 0.5, (0.0,), 0, inf),
    ('pow_two_float_0', lambda x: N.power(x, 2.), (0.0,), 0, 0.0),
    ('pow_zero_0', lambda x: N.power(x, 0.), (0.0,), 0, nan),
    ('pow_base0_dy', lambda x, y: N.power(x, y), (0.0, 2.0,), (0, 1), (0.0, 0.0)),
    ('pow_00', lambda x, y: N.power(x, y), (0.0, 0.0,), (0, 1), (nan, 0.0)),
    ('int_pow3_0', lambda x: x ** 3, (0.0,), 0, 0.0),
    ('int_pow_neg1_0', lambda x: L.integer_pow(x, -1), (0.0,), 0, -inf),
    ('clamp_lo', lambda x: L.clamp(0., x, 1.), (0.0,), 0, 0.0),
    ('clamp_hi', lambda x: L.clamp(0., x, 1.), (1.0,), 0, 0.0),
    ('clamp_mid', lambda x: L.clamp(0., x, 1.), (0.5,), 0, 1.0),
    ('clip_lo', lambda x: N.clip(x, 0., 1.), (0.0,), 0, 0.5),
    ('clip_hi', lambda x: N.clip(x, 0., 1.), (1.0,), 0, 0.5),
    ('sign_0', lambda x: N.sign(x), (0.0,), 0, 0.0),
    ('floor', lambda x: N.floor(x), (1.5,), 0, 0.0),
    ('round', lambda x: N.round(x), (0.5,), 0, 0.0),
    ('ceil', lambda x: N.ceil(x), (1.5,), 0, 0.0),
    ('reduce_max_ties', lambda x: N.max(x), (np.array([1.0, 3.0, 3.0]),), 0, [0.0, 0.5, 0.5]),
    ('reduce_min_ties', lambda x: N.min(x), (np.array([1.0, 1.0, 3.0]),), 0, [0.5, 0.5, 0.0]),
    ('reduce_max_axis_ties', lambda x: N.sum(N.max(x, axis=1)),
     (np.array([[1.0, 1.0], [2.0, 3.0]]),), 0, [[0.5, 0.5], [0.0, 1.0]]),
    ('where_0', lambda x: N.where(x > 0, x, 0.), (0.0,), 0, 0.0),
    ('log_0', lambda x: N.log(x), (0.0,), 0, inf),
    ('log_neg', lambda x: N.log(x), (-1.0,), 0, -1.0),
    ('atan2_00', lambda x, y: N.arctan2(x, y), (0.0, 0.0,), (0, 1), (nan, nan)),
    # JAX: nan. Here the cotangent reaching log is x * 1 = 0, which log's rule maps to
    # exactly 0 (zero-safe derivative rules), leaving log(0) = -inf, the true limit.
    ('xlogx_0', lambda x: x * N.log(x), (0.0,), 0, -inf),
    ('expm1_0', lambda x: N.expm1(x), (0.0,), 0, 1.0),
    ('log1p_0', lambda x: N.log1p(x), (0.0,), 0, 1.0),
    ('div_y0', lambda x, y: x / y, (1.0, 0.0,), (0, 1), (inf, -inf)),
    ('erf_0', lambda x: L.erf(x), (0.0,), 0, 1.1283791670955126),
    ('tanh_big', lambda x: N.tanh(x), (30.0,), 0, 0.0),
    ('logistic_big', lambda x: L.logistic(x), (-800.0,), 0, 0.0),
    ('prod_one_zero', lambda x: N.prod(x), (np.array([0.0, 2.0, 3.0]),), 0, [6.0, 0.0, 0.0]),
    ('prod_two_zeros', lambda x: N.prod(x), (np.array([0.0, 0.0, 3.0]),), 0, [0.0, 0.0, 0.0]),
    ('abs_complex_0', lambda z: N.abs(z), (0j,), 0, complex(0.0, 0.0)),
    ('abs_complex', lambda z: N.abs(z), ((3+4j),), 0, complex(0.6, -0.8)),
    ('abs2_complex', lambda z: N.real(z * N.conj(z)), ((1+2j),), 0, complex(2.0, -4.0)),
    ('real_complex', lambda z: N.real(z), ((1+2j),), 0, complex(1.0, 0.0)),
    ('imag_complex', lambda z: N.imag(z), ((1+2j),), 0, complex(0.0, -1.0)),
    ('real_sin_complex', lambda z: N.real(N.sin(z)), ((1+2j),), 0,
     complex(2.0327230070196656, -3.0518977991518)),
    ('abs_exp_complex', lambda z: N.abs(N.exp(z)), ((0.5-1j),), 0,
     complex(1.6487212707001282, -5.077785107149966e-17)),
    ('angle_complex', lambda z: N.angle(z), ((1+1j),), 0, complex(-0.5, -0.5)),
    ('rem', lambda x, y: L.rem(x, y), (5.5, 2.0,), (0, 1), (1.0, -2.0)),
    ('exp_neginf', lambda x: N.exp(x), (-inf,), 0, 0.0),
    ('sq_inf', lambda x: x * x, (inf,), 0, inf),
    ('sqrt_inf', lambda x: N.sqrt(x), (inf,), 0, 0.0),
    ('max_nan', lambda x, y: N.maximum(x, y), (nan, 1.0,), (0, 1), (0.0, 0.0)),
    ('mean_', lambda x: N.mean(x * x), (np.array([1.0, 2.0]),), 0, [1.0, 2.0]),
    ('std_const', lambda x: N.std(x), (np.array([1.0, 1.0]),), 0, [nan, nan]),
    ('norm_zero', lambda x: N.sqrt(N.sum(x * x)), (np.array([0.0, 0.0]),), 0, [nan, nan]),
]


@pytest.mark.parametrize("name,f,args,argnums,expected", KINKS, ids=[k[0] for k in KINKS])
def test_kinks_and_singular_points_match_jax(name, f, args, argnums, expected):
    g = tracer.grad(f, argnums=argnums)(*args)
    if isinstance(argnums, tuple):
        assert isinstance(g, tuple) and len(g) == len(expected)
        for gi, ei in zip(g, expected):
            close(gi, ei, 1e-14)
    else:
        close(g, expected, 1e-14)


def test_relu_derivative_at_zero_is_zero():
    # jax.nn.relu'(0) == 0 (while maximum(x, 0) splits the tie: 0.5, tested above).
    g = tracer.vmap(tracer.grad(tracer.nn.relu))(np.array([-1.0, 0.0, 2.0]))
    close(g, [0.0, 0.0, 1.0])


def test_kink_values_same_under_jit_and_forward_mode():
    for name, f, args, argnums, expected in KINKS[:12]:
        g = tracer.jit(tracer.grad(f, argnums=argnums))(*args)
        gs = g if isinstance(g, tuple) else (g,)
        es = expected if isinstance(expected, tuple) else (expected,)
        for gi, ei in zip(gs, es):
            close(gi, ei, 1e-14)
        if argnums == 0:
            close(tracer.jvp(f, args, (1.0,))[1], expected, 1e-14)


# --------------------------------------- jacobians ----------------------------------------

def test_jacobians_closed_form_and_layout():
    A = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    f = lambda x: tnp.tanh(A @ x)
    x = np.array([0.1, -0.2, 0.3])
    expected = (1 - np.tanh(A @ x) ** 2)[:, None] * A
    close(tracer.jacfwd(f)(x), expected)
    close(tracer.jacrev(f)(x), expected)
    # Multiple inputs and outputs, pytrees: output structure outside, input inside.
    g = lambda a, b: {"s": a * b[0], "t": tnp.sum(a) + b[1]}
    a, b = np.array([1.0, 2.0]), (3.0, np.array([4.0, 5.0]))
    for jac in (tracer.jacfwd, tracer.jacrev):
        J = jac(g, argnums=(0, 1))(a, b)
        close(J["s"][0], 3.0 * np.eye(2))
        close(J["s"][1][0], a)
        close(J["s"][1][1], np.zeros((2, 2)))
        close(J["t"][0], np.ones((2, 2)))
        close(J["t"][1][1], np.eye(2))
        assert J["t"][1][0].shape == (2,)


def test_jacobians_has_aux():
    f = lambda x: (tnp.sin(x), {"n": tnp.sum(x)})
    x = np.array([0.5, 1.0])
    for jac in (tracer.jacfwd, tracer.jacrev):
        J, aux = jac(f, has_aux=True)(x)
        close(J, np.diag(np.cos(x)))
        close(aux["n"], 1.5)
        assert not isinstance(aux["n"], tracer.core.Tracer)


def test_hessian_is_jacfwd_of_jacrev():
    A = np.array([[2.0, 0.5], [0.5, 1.0]])
    f = lambda x: 0.5 * x @ (A @ x) + tnp.sum(tnp.sin(x))
    x = np.array([0.3, -0.4])
    H = tracer.hessian(f)(x)
    close(H, A - np.diag(np.sin(x)))
    close(H, tracer.jacfwd(tracer.jacrev(f))(x))
    close(tracer.jacrev(tracer.jacfwd(f))(x), H)
    # Pytree Hessian blocks.
    p = {"w": np.array([1.0, 2.0]), "b": 0.5}
    h = tracer.hessian(lambda p: tnp.sum(p["w"] ** 2) * p["b"] ** 2)(p)
    close(h["w"]["w"], 2 * 0.25 * np.eye(2))
    close(h["w"]["b"], 4 * p["w"] * 0.5)
    close(h["b"]["b"], 2 * 5.0)


# ------------------------------------- higher order ---------------------------------------

def test_third_order_grad():
    f = lambda x: tnp.sin(x) * x
    # f''' = -3 sin x - x cos x
    for x in (0.3, 1.7):
        close(tracer.grad(tracer.grad(tracer.grad(f)))(x), -3 * np.sin(x) - x * np.cos(x))
    g = lambda x: tnp.exp(2.0 * x) / (1.0 + x * x)
    check_grads(g, (np.array([0.2, -0.4]),), order=3, modes=("rev",))
    check_grads(g, (np.array([0.2, -0.4]),), order=3, modes=("fwd",))


def test_hessian_vector_product_jvp_of_grad():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    f = lambda x: tnp.sum(tnp.exp(x)) + 0.5 * x @ (A @ x)
    x, v = np.array([0.1, 0.2]), np.array([1.0, -1.0])
    H = A + np.diag(np.exp(x))
    close(tracer.jvp(tracer.grad(f), (x,), (v,))[1], H @ v)
    close(tracer.grad(lambda x: tracer.grad(f)(x) @ v)(x), H @ v)        # reverse-over-reverse
    close(tracer.linearize(tracer.grad(f), x)[1](v), H @ v)


def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = 1 at any x, y (Siskind & Pearlmutter).
    f = lambda x: x * tracer.grad(lambda y: x + y)(1.0)
    close(tracer.grad(f)(2.0), 1.0)
    close(tracer.jvp(f, (2.0,), (1.0,))[1], 1.0)
    # d/dx [x * d/dy (x * y)] = 2x.
    close(tracer.grad(lambda x: x * tracer.grad(lambda y: x * y)(5.0))(3.0), 6.0)
    # Mixed modes and nesting orders.
    close(tracer.grad(lambda x: x * tracer.jvp(lambda y: x * y, (5.0,), (1.0,))[1])(3.0), 6.0)
    close(tracer.jvp(lambda x: x * tracer.grad(lambda y: x * y)(5.0), (3.0,), (1.0,))[1], 6.0)
    # d/dx [d/dy (x * y^2) at y = x] = d/dx 2x^2 = 4x.
    close(tracer.grad(lambda x: tracer.grad(lambda y: x * y ** 2)(x))(3.0), 12.0)
    # Under vmap: per-example nested derivatives.
    close(tracer.vmap(tracer.grad(lambda x: x * tracer.grad(lambda y: x * y)(5.0)))(
        np.array([1.0, 2.0])), [2.0, 4.0])


# ----------------------------------- symbolic zeros ---------------------------------------

@pytest.mark.parametrize("f,args", [
    (lambda x: tnp.sum(tnp.sin(x) * x), (np.arange(3.0),)),
    (lambda x, y: tnp.sum(x * y + tnp.exp(x)), (np.arange(3.0), np.ones(3))),
    (lambda x: tnp.sum(tnp.tanh(x @ np.ones((3, 2)))), (np.arange(3.0),)),
    (lambda x, n: tnp.sum(x ** 2) * n, (np.arange(3.0), 2)),
    (lambda x: tnp.max(x) + tnp.sum(lax.stop_gradient(x) * x), (np.arange(3.0),)),
    (lambda x: tnp.sum(x[1:] * 2.0), (np.arange(3.0),)),
])
def test_grad_jaxpr_has_no_materialized_zeros(f, args):
    closed = tracer.make_jaxpr(tracer.grad(f))(*args)
    assert not materialized_zeros(closed), str(closed)
    assert not re.search(r"broadcast_in_dim\[[^\]]*\] 0\.0", str(closed)), str(closed)


def test_zero_tangent_inputs_do_no_work():
    # Differentiating with respect to x only: the y-dependent branch contributes a symbolic
    # zero, so the linear jaxpr holds no multiplication by y's (absent) tangent.
    f = lambda x, y: [tnp.sin(x) + tnp.exp(y)]
    outs, lin = ad._linearize(lambda x: f(x, tnp.asarray(2.0)), [tnp.asarray(0.5)])
    assert [e.primitive.name for e in lin.jaxpr.eqns] == ["mul"], lin.jaxpr
    # An output that does not depend on the input is zero without computing anything.
    _, lin2 = ad._linearize(lambda x: [x * 0 + 1.0, tnp.ones(2)], [tnp.asarray(0.5)])
    assert lin2.zero_out[1]


def test_grad_jaxpr_printed_form():
    closed = tracer.make_jaxpr(tracer.grad(lambda x: tnp.sum(tnp.sin(x) * x)))(np.arange(3.0))
    text = str(closed)
    assert "add_any" in text and "cos" in text and " 0.0" not in text


# ------------------------------------- compositions ---------------------------------------

def _mlp_params(rng):
    return {"W1": rng.standard_normal((3, 4)) * 0.5, "b1": rng.standard_normal(4) * 0.1,
            "W2": rng.standard_normal((4, 2)) * 0.5, "b2": rng.standard_normal(2) * 0.1}


def _mlp_loss(p, x, y):
    h = tnp.tanh(x @ p["W1"] + p["b1"])
    out = h @ p["W2"] + p["b2"]
    return 0.5 * tnp.mean(tnp.sum((out - y) ** 2, axis=1))


def _mlp_backprop(p, x, y):
    z1 = x @ p["W1"] + p["b1"]
    h = np.tanh(z1)
    out = h @ p["W2"] + p["b2"]
    n = x.shape[0]
    d_out = (out - y) / n
    g_W2 = h.T @ d_out
    g_b2 = d_out.sum(0)
    d_h = d_out @ p["W2"].T
    d_z1 = d_h * (1 - h ** 2)
    return {"W1": x.T @ d_z1, "b1": d_z1.sum(0), "W2": g_W2, "b2": g_b2}


def test_two_layer_mlp_matches_hand_written_backprop():
    rng = np.random.default_rng(0)
    p = _mlp_params(rng)
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    expected = _mlp_backprop(p, x, y)
    tree_close(tracer.grad(_mlp_loss)(p, x, y), expected, 1e-12)
    tree_close(tracer.jit(tracer.grad(_mlp_loss))(p, x, y), expected, 1e-12)
    tree_close(tracer.grad(tracer.jit(_mlp_loss))(p, x, y), expected, 1e-12)
    keys = sorted(p)
    flat = lambda *ls: _mlp_loss(dict(zip(keys, ls)), x, y)
    check_grads(flat, [p[k] for k in keys], order=2)


def _softmax_xent(logits, labels):
    m = lax.stop_gradient(tnp.max(logits, axis=-1, keepdims=True))
    shifted = logits - m
    logp = shifted - tnp.log(tnp.sum(tnp.exp(shifted), axis=-1, keepdims=True))
    return -tnp.mean(tnp.sum(labels * logp, axis=-1))


def test_softmax_cross_entropy():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((4, 3)) * 3
    labels = np.eye(3)[[0, 2, 1, 2]]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    softmax = e / e.sum(-1, keepdims=True)
    close(tracer.grad(_softmax_xent)(logits, labels), (softmax - labels) / 4, 1e-12)
    check_grads(lambda l: _softmax_xent(l, labels), (logits,), order=2)
    # Large logits stay finite (the max is subtracted).
    g = tracer.grad(_softmax_xent)(logits * 1000, labels)
    assert np.all(np.isfinite(np.asarray(g)))


def _logsumexp(x, axis=-1):
    m = lax.stop_gradient(tnp.max(x, axis=axis, keepdims=True))
    m = tnp.where(tnp.isfinite(m), m, 0.0)
    return tnp.squeeze(tnp.log(tnp.sum(tnp.exp(x - m), axis=axis, keepdims=True)) + m, axis)


def test_logsumexp_with_neg_inf_entries():
    x = np.array([[0.5, -inf, 1.5], [-inf, -inf, 2.0]])
    close(_logsumexp(x), [np.log(np.exp(0.5) + np.exp(1.5)), 2.0], 1e-12)
    g = tracer.grad(lambda x: tnp.sum(_logsumexp(x)))(x)
    e = np.exp(np.where(np.isinf(x), -inf, x - 1.5))
    close(g[0], e[0] / e[0].sum(), 1e-12)
    close(g[1], [0.0, 0.0, 1.0])
    # All entries -inf: the value is -inf and the gradient is finite-or-nan like JAX's
    # (0/0); the rows above keep zero gradients at -inf entries.
    check_grads(lambda x: tnp.sum(_logsumexp(x)), (x,), order=2)
    w = np.array([0.5, 2.0])
    check_grads(lambda x: _logsumexp(x) @ w, (x,), order=2, modes=("rev",))


def test_grad_through_jit_both_ways():
    f = lambda x, y: tnp.sum(tnp.sin(x) * y) + tnp.prod(x)
    x, y = np.array([0.3, 1.2, -0.7]), np.array([2.0, -1.0, 0.5])
    expected = tracer.grad(f, argnums=(0, 1))(x, y)
    tree_close(tracer.jit(tracer.grad(f, argnums=(0, 1)))(x, y), expected, 1e-12)
    tree_close(tracer.grad(tracer.jit(f), argnums=(0, 1))(x, y), expected, 1e-12)
    tree_close(tracer.jit(tracer.grad(tracer.jit(f), argnums=(0, 1)))(x, y), expected, 1e-12)
    # Second and third order through jit, and a jitted closure over a traced value.
    fs = tracer.jit(lambda x: tnp.sin(x) * 2.0)
    close(tracer.grad(tracer.grad(tracer.grad(fs)))(0.5), -2 * np.cos(0.5))
    close(tracer.grad(lambda c: tracer.jit(lambda x: tnp.sum(x * c))(x))(2.0), np.sum(x))
    close(tracer.hessian(lambda x: tracer.jit(f)(x, y))(x), tracer.hessian(lambda x: f(x, y))(x))


def test_grad_of_vmap_and_vmap_of_grad():
    f = lambda w, x: tnp.tanh(x @ w)
    w, xs = np.array([0.5, -1.0]), np.array([[1.0, 2.0], [0.5, 0.1], [-1.0, 0.3]])
    per_ex = tracer.vmap(tracer.grad(f), in_axes=(None, 0))(w, xs)
    expected = (1 - np.tanh(xs @ w) ** 2)[:, None] * xs
    close(per_ex, expected)
    close(tracer.grad(lambda w: tnp.sum(tracer.vmap(f, in_axes=(None, 0))(w, xs)))(w),
          expected.sum(0))


# ------------------------------------- stop_gradient --------------------------------------

def test_stop_gradient():
    close(tracer.grad(lambda x: x * lax.stop_gradient(x))(3.0), 3.0)
    tree = {"a": np.array([1.0, 2.0]), "n": np.array([1, 2]), "t": (3.0,)}
    out = lax.stop_gradient(tree)
    tree_close(out, tree)
    assert out["n"].dtype == np.array([1, 2]).dtype
    g = tracer.grad(lambda p: tnp.sum(lax.stop_gradient(p)["a"] * p["a"]) + p["t"][0],
                    allow_int=True)(tree)
    assert g["n"].dtype == dtypes.float0
    close(g["a"], [1.0, 2.0])
    close(g["t"][0], 1.0)
    assert tracer.stop_gradient is lax.stop_gradient
    # Staged as one equation; zero tangent in forward mode; the identity under vmap.
    assert "stop_gradient" in str(tracer.make_jaxpr(lax.stop_gradient)(1.0))
    close(tracer.jvp(lambda x: lax.stop_gradient(x) * 2.0, (1.0,), (1.0,))[1], 0.0)
    close(tracer.vmap(lambda x: lax.stop_gradient(x) * x)(np.array([1.0, 2.0])), [1.0, 4.0])
    close(tracer.vmap(tracer.grad(lambda x: lax.stop_gradient(x) * x))(np.array([1.0, 2.0])),
          [1.0, 2.0])
    close(tracer.grad(tracer.grad(lambda x: lax.stop_gradient(x) * x ** 2))(3.0), 6.0)


# --------------------------------------- checkpoint ---------------------------------------

def test_checkpoint_values_and_grads_unchanged():
    f = lambda x: tnp.sum(tnp.sin(tnp.sin(x)) * x)
    x = np.array([0.3, 0.7])
    cf = tracer.checkpoint(f)
    close(cf(x), f(x))
    close(tracer.grad(cf)(x), tracer.grad(f)(x))
    close(tracer.grad(tracer.jit(cf))(x), tracer.grad(f)(x))
    close(tracer.jit(tracer.grad(cf))(x), tracer.grad(f)(x))
    close(tracer.vmap(tracer.grad(lambda x: tnp.sin(tracer.remat(tnp.sin)(x))))(x),
          np.cos(np.sin(x)) * np.cos(x))
    close(tracer.hessian(cf)(x), tracer.hessian(f)(x))
    close(tracer.grad(tracer.grad(tracer.grad(tracer.checkpoint(lambda x: tnp.sin(x) * x))))(0.3),
          -3 * np.sin(0.3) - 0.3 * np.cos(0.3))
    check_grads(cf, (x,), order=2)
    s = tracer.checkpoint(lambda x, n: x ** n, static_argnums=1)
    close(tracer.grad(s)(2.0, 3), 12.0)


def test_checkpoint_recomputes_instead_of_saving():
    f = lambda x: tnp.sin(tnp.sin(x))
    x = tnp.asarray(np.array([0.3, 0.7]))
    _, lin_plain = ad._linearize(lambda x: [f(x)], [x])
    _, lin_remat = ad._linearize(lambda x: [tracer.checkpoint(f)(x)], [x])
    # Without checkpoint the residuals are cos(x) and cos(sin(x)); with it, only x.
    close(lin_plain.consts[0], np.cos(np.asarray(x)))
    assert len(lin_remat.consts) == 1
    close(lin_remat.consts[0], x)
    (eqn,) = lin_remat.jaxpr.eqns
    assert eqn.primitive.name == "checkpoint" and eqn.params["differentiated"]
    assert "sin" in [e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns]
    # In the grad jaxpr sin appears twice: the forward pass and the recomputation.
    text = str(tracer.make_jaxpr(tracer.grad(lambda x: tnp.sum(tracer.checkpoint(f)(x))))(x))
    assert len(re.findall(r"= sin ", text)) == 3, text  # 2 in the forward, 1 recomputed


def test_checkpoint_policies():
    W = np.random.default_rng(2).standard_normal((3, 3))
    xx = np.ones(3)

    def mlp(W):
        return tnp.sum(tnp.tanh(W @ tnp.tanh(W @ xx)))

    def residual_count(policy):
        _, lin = ad._linearize(lambda W: [tracer.checkpoint(mlp, policy=policy)(W)],
                               [tnp.asarray(W)])
        return len(lin.consts)

    n_none = residual_count(None)
    n_dots = residual_count(checkpoint_policies.dots_saveable)
    n_all = residual_count(checkpoint_policies.everything_saveable)
    assert n_none < n_dots <= n_all
    for pol in (None, checkpoint_policies.dots_saveable,
                checkpoint_policies.dots_with_no_batch_dims_saveable,
                checkpoint_policies.everything_saveable, checkpoint_policies.nothing_saveable):
        close(tracer.grad(tracer.checkpoint(mlp, policy=pol))(W), tracer.grad(mlp)(W))

    def named(x):
        a = checkpoint_name(tnp.sin(x), "a")
        return tnp.sin(a)

    g = tracer.checkpoint(named, policy=checkpoint_policies.save_only_these_names("a"))
    x = np.array([0.3, 0.7])
    _, lin = ad._linearize(lambda x: [g(x)], [tnp.asarray(x)])
    assert any(np.allclose(np.asarray(c), np.sin(x)) for c in lin.consts)
    close(tracer.grad(lambda x: tnp.sum(g(x)))(x), np.cos(np.sin(x)) * np.cos(x))


def test_accumulating_opposite_infinite_cotangents_is_nan_without_a_warning():
    # x*inf + x*-inf: the two cotangents of x add to NaN (as JAX), and NumPy's "invalid
    # value" warning for that sum is not the user's business.
    import warnings

    def f(x):
        return x * np.inf + x * -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for g in (tracer.grad(f), tracer.jit(tracer.grad(f))):
            assert np.isnan(g(1.0))
        assert np.isnan(tracer.vmap(tracer.grad(f))(np.ones(2))).all()
