"""Derivatives in composition: ties of max/min-based rules, cotangent accumulation under
vmap, vmapped conditionals under grad, and zero-safe derivative rules (masked gradients
are exactly zero). Each behaviour is checked eagerly and under jit, in reverse and
forward mode, with vmap inside and outside grad.

Oracles: values recorded from JAX 0.10.2 (x64; JAX is never imported here), closed forms,
and a Python loop over the batch. Where tracer deliberately differs from JAX the test
says so (logaddexp's derivative at infinities; masked gradients, where JAX gives NaN).
"""
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from lax import elementwise as ew
from tracer import nn
from tracer.interpreters import ad

inf, nan = np.inf, np.nan


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                               equal_nan=True)


def all_modes(f, argnums=0):
    """grad of ``f`` eagerly, under jit, and in forward mode (jacfwd): three functions
    that must agree."""
    return {"grad": tracer.grad(f, argnums=argnums),
            "jit_grad": tracer.jit(tracer.grad(f, argnums=argnums)),
            "jacfwd": tracer.jacfwd(f, argnums=argnums)}


def check_all_modes(f, args, expected, argnums=0, tol=1e-12):
    for mode, g in all_modes(f, argnums).items():
        got = g(*args)
        if isinstance(argnums, tuple):
            assert len(got) == len(expected), mode
            for gi, ei in zip(got, expected):
                close(gi, ei, tol)
        else:
            close(got, expected, tol)


# ======================================== 1. ties ========================================

def test_logaddexp_gradient_at_a_tie_is_one_half_in_both_orders():
    z = np.zeros(3)
    for f in (lambda v: tnp.sum(tnp.logaddexp(0.0, v)), lambda v: tnp.sum(tnp.logaddexp(v, 0.0)),
              lambda v: tnp.sum(tnp.logaddexp2(0.0, v)), lambda v: tnp.sum(tnp.logaddexp2(v, 0.)),
              lambda v: tnp.sum(nn.softplus(v))):
        check_all_modes(f, (z,), [0.5, 0.5, 0.5])
        close(tracer.vmap(tracer.grad(lambda s: f(s[None])))(z), [0.5, 0.5, 0.5])


# (x1, x2) -> (d/dx1, d/dx2): the softmax weights exp(x - logaddexp(x1, x2)).
LOGADDEXP_GRADS = [
    ((0.0, 0.0), (0.5, 0.5)),
    ((1.0, 2.0), (0.2689414213699951, 0.7310585786300049)),  # JAX
    ((-inf, 0.0), (0.0, 1.0)),                                # JAX
    ((-inf, -inf), (0.5, 0.5)),                               # JAX: nan, nan
    ((inf, inf), (0.5, 0.5)),                                 # JAX: 1, 1
    ((inf, 0.0), (1.0, 0.0)),                                 # JAX: 1, 1
    ((0.0, inf), (0.0, 1.0)),                                 # JAX: 1, 1
    ((inf, -inf), (1.0, 0.0)),
    ((nan, 0.0), (nan, nan)),                                 # JAX
]


@pytest.mark.parametrize("args,expected", LOGADDEXP_GRADS, ids=[str(a) for a, _ in LOGADDEXP_GRADS])
def test_logaddexp_derivative_is_the_softmax_weights_and_finite_at_infinities(args, expected):
    check_all_modes(lambda x, y: tnp.logaddexp(x, y), args, expected, argnums=(0, 1))
    # base 2: the weights are 2**(x - out); equal at ties and infinities
    w2 = expected if args != (1.0, 2.0) else (1 / 3, 2 / 3)
    check_all_modes(lambda x, y: tnp.logaddexp2(x, y), args, w2, argnums=(0, 1))


def test_logaddexp_second_derivative_and_batching():
    h = tracer.hessian(lambda x: tnp.logaddexp(x[0], x[1]))(np.array([0.3, 1.0]))
    close(h, [[0.22171287, -0.22171287], [-0.22171287, 0.22171287]], 1e-8)  # JAX
    xs = np.array([0.0, 1.0, -inf, inf, -3.0])
    want = 1 / (1 + np.exp(-xs))  # d/dx logaddexp(x, 0) = sigmoid(x)
    close(tracer.vmap(tracer.grad(lambda x: tnp.logaddexp(x, 0.0)))(xs), want)
    close(tracer.jit(tracer.vmap(tracer.grad(lambda x: tnp.logaddexp(0.0, x))))(xs), want)
    # values are unchanged by the custom rule
    close(tnp.logaddexp(np.array([0.0, inf, -inf, 1.0]), np.array([0.0, inf, -inf, 2.0])),
          np.logaddexp([0.0, inf, -inf, 1.0], [0.0, inf, -inf, 2.0]))


def test_logaddexp_second_derivative_at_a_tie_is_not_cut():
    # d2/dx2 logaddexp(x, 0) = sigmoid'(x) = 1/4 at x = 0 (JAX: 0.25); a rule that replaced
    # the difference by a constant at every tie gave 0 here and for every program built
    # on it (softplus, log_sigmoid, a logistic regression's Hessian at zero weights).
    ln2 = np.log(2.0)
    cases = [
        (lambda x: tnp.logaddexp(x, 0.0), 0.25),
        (lambda x: tnp.logaddexp(0.0, x), 0.25),
        (lambda x: tnp.logaddexp2(x, 0.0), ln2 / 4),   # d/dx 1/(1 + 2**-x) = ln2/4 at 0
        (lambda x: nn.softplus(x), 0.25),
        (lambda x: nn.log_sigmoid(x), -0.25),
    ]
    for f, want in cases:
        for g in (tracer.grad(tracer.grad(f)), tracer.jit(tracer.grad(tracer.grad(f)))):
            close(g(0.0), want, 1e-12)
        close(tracer.vmap(tracer.grad(tracer.grad(f)))(np.zeros(3)), [want] * 3, 1e-12)
    h = tracer.hessian(lambda x: tnp.logaddexp(x[0], x[1]))(np.array([0.5, 0.5]))
    close(h, [[0.25, -0.25], [-0.25, 0.25]], 1e-12)

    # Logistic regression's loss Hessian at w = 0 is X^T X / 4 / n.
    X = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -2.0]])
    y = np.array([1.0, 0.0, 1.0])

    def loss(w):
        z = X @ w
        return tnp.mean(nn.softplus(z) - y * z)
    close(tracer.hessian(loss)(np.zeros(2)), X.T @ X / 4 / 3, 1e-12)
    close(tracer.jit(tracer.hessian(loss))(np.zeros(2)), X.T @ X / 4 / 3, 1e-12)


T4 = np.array([1.0, 3.0, 3.0, -3.0])
MAT = np.array([[1.0, -2.0], [-2.0, 1.0]])

# Rules built on max/min/select at ties of their operands; expected values from JAX.
TIES = [
    ("maximum", lambda x, y: tnp.maximum(x, y), (1.0, 1.0), (0, 1), (0.5, 0.5)),
    ("minimum", lambda x, y: tnp.minimum(x, y), (1.0, 1.0), (0, 1), (0.5, 0.5)),
    ("clip_lo", lambda x, lo, hi: tnp.clip(x, lo, hi), (0.0, 0.0, 1.0), (0, 1, 2),
     (0.5, 0.5, 0.0)),
    ("clip_hi", lambda x, lo, hi: tnp.clip(x, lo, hi), (1.0, 0.0, 1.0), (0, 1, 2),
     (0.5, 0.0, 0.5)),
    ("clamp_lo", lambda lo, x, hi: lax.clamp(lo, x, hi), (0.0, 0.0, 1.0), (0, 1, 2),
     (0.0, 0.0, 0.0)),
    ("max", lambda x: tnp.max(x), (T4,), 0, [0.0, 0.5, 0.5, 0.0]),
    ("min", lambda x: tnp.min(-x), (T4,), 0, [0.0, -0.5, -0.5, 0.0]),
    ("amax_all_tied", lambda x: tnp.amax(x), (np.ones(4),), 0, [0.25] * 4),
    ("amin", lambda x: tnp.amin(-x), (T4,), 0, [0.0, -0.5, -0.5, 0.0]),
    ("max_axis", lambda x: tnp.sum(tnp.max(x, axis=0)), (np.array([[1., 2.], [1., 0.]]),), 0,
     [[0.5, 1.0], [0.5, 0.0]]),
    ("max_initial_tied", lambda x: tnp.max(x, initial=3.0), (T4,), 0, [0.0, 0.25, 0.25, 0.0]),
    ("nanmax", lambda x: tnp.nanmax(x), (T4,), 0, [0.0, 0.5, 0.5, 0.0]),
    ("ptp", lambda x: tnp.ptp(x), (T4,), 0, [0.0, 0.5, 0.5, -1.0]),
    ("sort", lambda x: tnp.sum(tnp.sort(x) * tnp.arange(4.0)), (T4,), 0, [1.0, 2.0, 3.0, 0.0]),
    ("median", lambda x: tnp.median(x), (np.array([1., 2., 2., 2., 3.]),), 0,
     [0.0, 0.0, 1.0, 0.0, 0.0]),
    ("quantile", lambda x: tnp.quantile(x, 0.5), (np.array([1., 2., 2., 3.]),), 0,
     [0.0, 0.5, 0.5, 0.0]),
    ("norm_inf", lambda x: tnp.linalg.norm(x, ord=inf), (T4,), 0, [0.0, 1 / 3, 1 / 3, -1 / 3]),
    ("norm_ninf", lambda x: tnp.linalg.norm(x, ord=-inf), (T4,), 0, [1.0, 0.0, 0.0, 0.0]),
    ("norm_1", lambda x: tnp.linalg.norm(x, ord=1), (np.array([1., 0., -2.]),), 0,
     [1.0, 1.0, -1.0]),
    ("matrix_norm_1", lambda x: tnp.linalg.norm(x, ord=1), (MAT,), 0,
     [[0.5, -0.5], [-0.5, 0.5]]),
    ("matrix_norm_inf", lambda x: tnp.linalg.norm(x, ord=inf), (MAT,), 0,
     [[0.5, -0.5], [-0.5, 0.5]]),
    ("matrix_norm_m1", lambda x: tnp.linalg.norm(x, ord=-1), (MAT,), 0,
     [[0.5, -0.5], [-0.5, 0.5]]),
    ("matrix_norm_minf", lambda x: tnp.linalg.norm(x, ord=-inf), (np.abs(MAT),), 0,
     [[0.5, 0.5], [0.5, 0.5]]),
    ("relu_0", lambda x: nn.relu(x), (0.0,), 0, 0.0),
    ("relu6_6", lambda x: nn.relu6(x), (6.0,), 0, 0.0),
    ("abs_0", lambda x: tnp.abs(x), (0.0,), 0, 1.0),
    ("hard_tanh_1", lambda x: nn.hard_tanh(x), (1.0,), 0, 1.0),
    ("leaky_relu_0", lambda x: nn.leaky_relu(x), (0.0,), 0, 1.0),
    ("softplus_0", lambda x: nn.softplus(x), (0.0,), 0, 0.5),
    ("logsumexp_tied", lambda x: nn.logsumexp(x), (np.ones(4),), 0, [0.25] * 4),
    ("hypot_tied", lambda x, y: tnp.hypot(x, y), (1.0, 1.0), (0, 1),
     (0.7071067811865476, 0.7071067811865476)),
]


@pytest.mark.parametrize("name,f,args,argnums,expected", TIES, ids=[t[0] for t in TIES])
def test_tie_derivatives_match_jax(name, f, args, argnums, expected):
    check_all_modes(f, args, expected, argnums)


def test_fmax_fmin_give_ties_to_x2_like_jax():
    # jax.numpy's fmax/fmin are where(x1 > x2 | isnan(x2), x1, x2): a tie's value and its
    # whole derivative come from x2 (unlike maximum/minimum, which split it 0.5/0.5).
    check_all_modes(lambda x, y: tnp.fmax(x, y), (1.0, 1.0), (0.0, 1.0), (0, 1))
    check_all_modes(lambda x, y: tnp.fmin(x, y), (1.0, 1.0), (0.0, 1.0), (0, 1))
    check_all_modes(lambda x, y: tnp.fmax(x, y), (nan, 1.0), (0.0, 1.0), (0, 1))


# ============================ 2. cotangent accumulation under vmap ============================

def _logsumexp_via_max(l):
    # The max is used twice: its two cotangents are one batched and one not under vmap.
    m = tnp.max(l)
    return m + tnp.log(tnp.sum(tnp.exp(l - m)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_vmap_of_grad_of_a_value_used_twice():
    got = tracer.vmap(tracer.grad(_logsumexp_via_max))(np.ones((8, 10), np.float32))
    assert got.shape == (8, 10) and got.dtype == np.float32
    close(got, np.full((8, 10), 0.1), 1e-6)
    # Ties of the max (10-way above, 3-way here) cancel: the gradient is softmax (JAX).
    x = np.arange(20.0).reshape(2, 10) % 3
    for f in (tracer.vmap(tracer.grad(_logsumexp_via_max)),
              tracer.jit(tracer.vmap(tracer.grad(_logsumexp_via_max))),
              tracer.vmap(tracer.jit(tracer.grad(_logsumexp_via_max))),
              tracer.vmap(tracer.jacfwd(_logsumexp_via_max))):
        close(f(x), _softmax(x))


def test_add_any_batches_mixed_and_different_axes():
    x = np.arange(6.0).reshape(2, 3)
    add = ad.add_any_p.bind
    # batched along different axes: x's axis 0, x.T's axis 1 (both the same members)
    got = tracer.vmap(add, in_axes=(0, 1))(x, x.T.copy())
    close(got, 2 * x)
    # one batched, one not (both orders), scalars and arrays
    close(tracer.vmap(add, in_axes=(0, None))(x, np.ones(3)), x + 1)
    close(tracer.vmap(add, in_axes=(None, 0))(np.ones(3), x), x + 1)
    close(tracer.vmap(add, in_axes=(0, None))(np.arange(3.0), 5.0), np.arange(3.0) + 5)
    close(tracer.vmap(add, in_axes=(1, None), out_axes=1)(x, np.ones(2)), x + 1)


def test_jvp_tangent_accumulation_with_an_unbatched_tangent():
    # f uses x three times; with the tangent unbatched, the `+ x` term's tangent is the
    # unbatched t while the others depend on the member.
    f = lambda x: tnp.sin(x) * x + x
    xs = np.array([0.5, 1.0, 2.0])
    _, t_out = tracer.vmap(lambda x, t: tracer.jvp(f, (x,), (t,)), in_axes=(0, None))(xs, 2.0)
    close(t_out, 2.0 * (np.cos(xs) * xs + np.sin(xs) + 1))
    jv = tracer.jit(tracer.vmap(lambda x, t: tracer.jvp(f, (x,), (t,))[1], in_axes=(0, None)))
    close(jv(xs, 2.0), 2.0 * (np.cos(xs) * xs + np.sin(xs) + 1))


def test_grad_of_vmap_with_an_unbatched_value_used_twice():
    xs = np.array([1.0, 2.0, 4.0])
    f = lambda w: tnp.sum(tracer.vmap(lambda x: w * x + w * w)(xs))
    check_all_modes(f, (3.0,), xs.sum() + 2 * 3.0 * len(xs))
    # and a per-example Hessian: each row's max used twice, at second order
    x = np.array([[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    h = tracer.vmap(tracer.hessian(_logsumexp_via_max))(x)
    s = _softmax(x)
    want = np.stack([np.diag(r) - np.outer(r, r) for r in s])
    close(h, want)


# ======================= 3. vmapped conditionals: no NaN from the untaken branch =======================

def _cond_log(x):
    return lax.cond(x > 0, tnp.log, lambda v: 0. * v, x)


def _cond_inf(x):
    # The false branch's derivative is infinite everywhere, also on members that take
    # the true branch.
    return lax.cond(x > 0, lambda v: v * 2.0, lambda v: v * inf, x)


def _both_compositions(f):
    return {"vmap_grad": tracer.vmap(tracer.grad(f)),
            "grad_vmap": tracer.grad(lambda x: tnp.sum(tracer.vmap(f)(x))),
            "jit_vmap_grad": tracer.jit(tracer.vmap(tracer.grad(f))),
            "jit_grad_vmap": tracer.jit(tracer.grad(lambda x: tnp.sum(tracer.vmap(f)(x)))),
            "grad_jit_vmap": tracer.grad(lambda x: tnp.sum(tracer.jit(tracer.vmap(f))(x))),
            "jvp_vmap": lambda x: tracer.jvp(tracer.vmap(f), (x,), (np.ones_like(x),))[1]}


@pytest.mark.parametrize("f,x,expected", [
    (_cond_log, [1.0, 0.0], [1.0, 0.0]),          # JAX
    (_cond_inf, [1.0, -1.0], [2.0, inf]),         # JAX
], ids=["log", "inf_branch"])
def test_vmapped_cond_gradient_ignores_the_branch_not_taken(f, x, expected):
    x = np.array(x)
    for name, g in _both_compositions(f).items():
        close(g(x), expected)


def test_vmapped_switch_gradient_ignores_the_branches_not_taken():
    branches = [lambda v: v * 3.0, tnp.log, lambda v: v * inf]
    f = lambda i, x: lax.switch(i, branches, x)
    i, x = np.array([0, 1, 1]), np.array([0.0, 1.0, 2.0])
    want = [3.0, 1.0, 0.5]  # JAX
    close(tracer.vmap(tracer.grad(f, argnums=1))(i, x), want)
    close(tracer.grad(lambda x: tnp.sum(tracer.vmap(f)(i, x)))(x), want)
    close(tracer.jit(tracer.grad(lambda x: tnp.sum(tracer.vmap(f)(i, x))))(x), want)
    # switch clamps an out-of-range index, as without vmap
    close(tracer.grad(lambda x: tnp.sum(tracer.vmap(f)(np.array([0, 5, -1]), x)))(
        np.array([1.0, 2.0, 3.0])), [3.0, inf, 3.0])


def _cond_multi(x, w):
    return lax.cond(x > 0, lambda a, b: (tnp.log(a) * b, a * b),
                    lambda a, b: (a * inf * b, tnp.sqrt(a) * b), x, w)


def test_vmapped_cond_with_several_operands_and_outputs():
    x, w = np.array([1.0, 2.0]), 3.0

    def loss(x, w):
        o1, o2 = tracer.vmap(_cond_multi, in_axes=(0, None))(x, w)
        return tnp.sum(o1) + tnp.sum(o2)

    want_x, want_w = [6.0, 4.5], 3.69314718055994530942  # JAX (log(1)+1 + log(2)+2)
    for g in (tracer.grad(loss, argnums=(0, 1)), tracer.jit(tracer.grad(loss, argnums=(0, 1)))):
        gx, gw = g(x, w)
        close(gx, want_x)
        close(gw, want_w)
    per = tracer.vmap(tracer.grad(lambda x, w: sum(_cond_multi(x, w)), argnums=(0, 1)),
                      in_axes=(0, None))(x, w)
    close(per[0], want_x)
    close(per[1], [1.0, 2 + np.log(2.0)])  # JAX


def test_vmapped_cond_masking_is_free_once_optimized():
    # Traced (here by make_jaxpr), each branch sees select(taken, x, stop_gradient(x));
    # after the jit pipeline drops stop_gradient, those selects of x or x are x itself.
    from lowering import pipeline
    closed = tracer.make_jaxpr(tracer.vmap(_cond_log))(np.ones(3))
    names = [e.primitive.name for e in closed.jaxpr.eqns]
    assert names.count("stop_gradient") == 2
    opt = [e.primitive.name for e in pipeline.optimize(closed).jaxpr.eqns]
    assert "stop_gradient" not in opt
    assert opt.count("select_n") == 2  # the index clamp and the choice of output
    x = np.array([1.0, -1.0, 2.0])
    close(tracer.jit(tracer.vmap(_cond_log))(x), [0.0, -0.0, np.log(2.0)])


def test_eager_vmapped_cond_values_match_a_loop():
    x = np.array([1.0, -1.0, 0.5, 0.0])
    close(tracer.vmap(_cond_log)(x), [_cond_log(v) for v in x])
    close(tracer.vmap(lambda v: _cond_multi(v, 2.0)[1])(np.array([1.0, 4.0])),
          [2.0, 8.0])


# ============================ 4. masked gradients are exactly zero ============================

def _where_sqrt(r2):
    return tnp.where(r2 > 0, tnp.sqrt(r2), 0.0)


def _safe_norm(x):
    return tnp.where(tnp.sum(x ** 2) > 0, tnp.linalg.norm(x), 0.0)


def _masked_atan2(y, x):
    return tnp.where((x == 0) & (y == 0), 0.0, tnp.arctan2(y, x))


def test_masked_sqrt_norm_and_atan2_have_zero_gradients():
    check_all_modes(_where_sqrt, (0.0,), 0.0)
    check_all_modes(_safe_norm, (np.zeros(3),), np.zeros(3))
    check_all_modes(_masked_atan2, (0.0, 0.0), (0.0, 0.0), argnums=(0, 1))
    close(tracer.hessian(_where_sqrt)(0.0), 0.0)
    close(tracer.hessian(_safe_norm)(np.zeros(2)), np.zeros((2, 2)))
    # batched: the masked member is 0, the others are the true derivatives
    r2 = np.array([0.0, 4.0])
    close(tracer.vmap(tracer.grad(_where_sqrt))(r2), [0.0, 0.25])
    close(tracer.jit(tracer.vmap(tracer.grad(_where_sqrt)))(r2), [0.0, 0.25])
    xs = np.array([[0.0, 0.0], [3.0, 4.0]])
    close(tracer.vmap(tracer.grad(_safe_norm))(xs), [[0.0, 0.0], [0.6, 0.8]])
    # where the mask is open, nothing changes
    check_all_modes(_safe_norm, (np.array([3.0, 4.0]),), [0.6, 0.8])
    check_all_modes(_masked_atan2, (1.0, 1.0), (0.5, -0.5), argnums=(0, 1))


def test_unmasked_singular_derivatives_and_nans_still_propagate():
    for g in all_modes(tnp.sqrt).values():
        assert g(0.0) == inf
        assert np.isnan(g(-1.0))
        assert np.isnan(g(nan))
    close(tracer.vmap(tracer.grad(tnp.sqrt))(np.array([0.0, 4.0])), [inf, 0.25])
    close(tracer.grad(tnp.log)(0.0), inf)
    # a NaN tangent flowing into a zero-safe rule stays NaN; an inf one gives inf
    _, t = tracer.jvp(tnp.sqrt, (4.0,), (nan,))
    assert np.isnan(t)
    _, t = tracer.jvp(tnp.log, (2.0,), (inf,))
    assert t == inf
    # a NaN reaching the cotangent from elsewhere propagates through sqrt's rule
    check_all_modes(lambda x: tnp.sqrt(x) * nan, (4.0,), nan)
    # the unmasked norm at 0 is NaN, as in JAX (0 * inf in the square's own rule)
    assert np.all(np.isnan(tracer.grad(lambda x: tnp.sqrt(tnp.sum(x * x)))(np.zeros(2))))


# Primitives whose derivative is infinite or undefined at a point: masked by where at
# that point, every mode gives exactly 0 (JAX: NaN); unmasked, the derivative is still
# the non-finite value (recorded from JAX where JAX defines it).
SINGULAR = [
    ("sqrt", tnp.sqrt, 0.0, inf),
    ("rsqrt", lax.rsqrt, 0.0, -inf),
    ("cbrt", tnp.cbrt, 0.0, inf),
    ("log", tnp.log, 0.0, inf),
    ("log1p", tnp.log1p, -1.0, inf),
    ("pow_base", lambda x: x ** 0.5, 0.0, inf),
    ("pow_exponent", lambda y: tnp.power(-1.0, y), 0.5, nan),
    ("div", lambda y: 1.0 / y, 0.0, -inf),
    ("integer_pow_neg", lambda x: lax.integer_pow(x, -2), 0.0, -inf),
    ("rem", lambda y: lax.rem(1.0, y), 0.0, -inf),
    ("atan2_y", lambda y: tnp.arctan2(y, 0.0), 0.0, nan),
    ("atan2_x", lambda x: tnp.arctan2(0.0, x), 0.0, nan),
    ("asin", tnp.arcsin, 1.0, inf),
    ("acos", tnp.arccos, 1.0, -inf),
    ("atanh", tnp.arctanh, 1.0, inf),
    ("acosh", tnp.arccosh, 1.0, inf),
    ("lgamma", lax.lgamma, 0.0, -inf),        # JAX: nan (its digamma(0) is nan)
    ("digamma", lax.digamma, 0.0, inf),
    ("polygamma", lambda x: lax.polygamma(1.0, x), 0.0, -inf),  # JAX: nan
    ("zeta", lambda q: lax.zeta(2.0, q), 0.0, -inf),           # JAX: no rule
    ("erf_inv", lax.erf_inv, 1.0, inf),
    ("igamma", lambda x: lax.igamma(0.5, x), 0.0, inf),
    ("betainc", lambda x: lax.betainc(0.5, 2.0, x), 0.0, inf),
]


@pytest.mark.parametrize("name,f,x0,unmasked", SINGULAR, ids=[s[0] for s in SINGULAR])
def test_masked_singular_point_gives_exact_zero(name, f, x0, unmasked):
    masked = lambda v: tnp.where(v != x0, f(v), 0.0)
    for mode, g in all_modes(masked).items():
        got = g(x0)
        assert got == 0, (mode, got)
    assert tracer.hessian(masked)(x0) == 0
    xs = np.array([x0, x0])
    assert np.all(tracer.vmap(tracer.grad(masked))(xs) == 0)
    close(tracer.grad(f)(x0), unmasked)


def test_zero_safe_scaling_primitives():
    t = np.array([0.0, -0.0, 1.0, 2.0, nan, 0.0])
    d = np.array([inf, nan, inf, 0.5, 1.0, 0.0])
    with np.errstate(all="ignore"):
        want_mul = np.where(t == 0, t, t * d)
        want_div = np.where(t == 0, t, t / d)
    close(ew.safe_mul(t, d), want_mul)
    close(tracer.jit(ew.safe_mul)(t, d), want_mul)
    close(ew.safe_div(t, d), want_div)
    close(tracer.jit(ew.safe_div)(t, d), want_div)
    assert np.signbit(np.asarray(ew.safe_mul(t, d))[1])  # a zero passes through as itself
    # linear in t: its transpose is the same zero-safe scaling of the cotangent
    _, f_vjp = tracer.vjp(lambda t: ew.safe_mul(t, d), t)
    close(f_vjp(np.array([0.0, 0.0, 1.0, 1.0, 1.0, 2.0]))[0],
          [0.0, 0.0, inf, 0.5, 1.0, 0.0])
    # complex operands, compiled too
    tc, dc = np.array([0j, 1 + 1j]), np.array([inf + 0j, 2j])
    with np.errstate(all="ignore"):
        want_c = np.where(tc == 0, tc, tc * dc)
    close(tracer.jit(ew.safe_mul)(tc, dc), want_c)
    close(ew.safe_mul(tc, dc), want_c)


# ============================ found by the composition checker ============================

def test_grad_of_checkpoint_around_control_flow():
    # the remat split used to send a cond/fori_loop with a known and an unknown operand
    # wholly to the unknown side ("primal output depends on a tangent")
    def body(x):
        return lax.cond(tnp.sum(x) > 0, lambda v: v * 2.0 + tnp.sin(v), lambda v: v * 3.0, x)
    f = lambda x: tnp.sum(tracer.checkpoint(body)(x))
    x = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(np.asarray(tracer.grad(f)(x)), 2 + np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(tracer.jit(tracer.grad(f))(-x)), np.full(3, 3.0))
    np.testing.assert_allclose(np.asarray(tracer.vmap(tracer.grad(f))(np.stack([x, -x]))),
                               np.stack([2 + np.cos(x), np.full(3, 3.0)]), rtol=1e-14)
    loop = lambda v: lax.fori_loop(0, 3, lambda i, c: tnp.sin(c) * v, v)
    g = lambda x: tnp.sum(tracer.checkpoint(loop)(x))
    np.testing.assert_allclose(np.asarray(tracer.grad(g)(x)),
                               np.asarray(tracer.grad(lambda x: tnp.sum(loop(x)))(x)), rtol=1e-14)


def test_xlogy_broadcasts_a_scalar_against_an_array():
    import tracer.scipy.special as tss
    y = np.array([0.5, 1.0, 3.0])
    for f, ref in ((tss.xlogy, lambda y: 2.0 * np.log(y)), (tss.xlog1py, lambda y: 2.0 * np.log1p(y))):
        np.testing.assert_allclose(np.asarray(f(np.array(2.0), y)), ref(y), rtol=1e-15)
        np.testing.assert_allclose(np.asarray(tracer.vmap(f, in_axes=(None, 0))(np.array(2.0), y)),
                                   ref(y), rtol=1e-15)
        g = tracer.grad(lambda x: tnp.sum(f(x, y)))(np.array(2.0))
        np.testing.assert_allclose(float(g), float(np.sum(ref(y)) / 2.0), rtol=1e-14)
