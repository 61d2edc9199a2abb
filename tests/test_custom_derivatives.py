"""custom_jvp and custom_vjp: the rules are used (rules that differ from the true
derivative make that visible), they compose with jit (one staged equation), vmap (function
and rule batched), grad/jvp/vjp to higher order, and bad rules get clear errors.
"""
from functools import partial

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer import dtypes
from tracer.custom_derivatives import (CustomVJPPrimal, SymbolicZero, closure_convert,
                                       custom_jvp, custom_vjp)
from tracer.test_util import check_grads


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol, equal_nan=True)


def eqn_names(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


# ---------------------------------------- fixtures ----------------------------------------

@custom_jvp
def sin_x3(x):
    """sin(x), whose custom derivative is 3 * cos(x) (visibly not autodiff's)."""
    return tnp.sin(x)


@sin_x3.defjvp
def _sin_x3_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin_x3(x), 3.0 * tnp.cos(x) * t


@custom_vjp
def sin_v3(x):
    return tnp.sin(x)


def _sin_v3_fwd(x):
    return tnp.sin(x), tnp.cos(x)


def _sin_v3_bwd(cos_x, g):
    return (3.0 * cos_x * g,)


sin_v3.defvjp(_sin_v3_fwd, _sin_v3_bwd)


@custom_jvp
def log1pexp(x):
    return tnp.log(1.0 + tnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + tnp.exp(x)))


# -------------------------------------- custom_jvp ----------------------------------------

def test_custom_jvp_rule_is_used_in_every_mode():
    x = np.array([0.2, 0.9])
    close(sin_x3(x), np.sin(x))
    close(tracer.jvp(sin_x3, (x,), (np.ones(2),))[1], 3 * np.cos(x))
    close(tracer.grad(lambda x: tnp.sum(sin_x3(x)))(x), 3 * np.cos(x))
    close(tracer.jacfwd(sin_x3)(x), np.diag(3 * np.cos(x)))
    close(tracer.jacrev(sin_x3)(x), np.diag(3 * np.cos(x)))
    close(tracer.linearize(sin_x3, x)[1](np.ones(2)), 3 * np.cos(x))
    # Higher order differentiates the rule: d/dx 3 cos x = -3 sin x (the rule calls sin_x3,
    # whose derivative is again the custom one: d2/dx2 -> 3 * d/dx cos ... via autodiff).
    close(tracer.grad(tracer.grad(sin_x3))(0.4), -3 * np.sin(0.4))
    close(tracer.grad(tracer.grad(tracer.grad(sin_x3)))(0.4), -3 * np.cos(0.4))
    close(tracer.hessian(lambda x: tnp.sum(sin_x3(x)))(x), np.diag(-3 * np.sin(x)))


def test_custom_jvp_numerically_stable_rule():
    # The classic: autodiff of log(1 + exp(x)) gives nan at large x; the rule does not.
    close(log1pexp(3.0), np.log1p(np.exp(3.0)))
    close(tracer.grad(log1pexp)(1000.0), 1.0)
    close(tracer.jit(tracer.grad(log1pexp))(1000.0), 1.0)
    close(tracer.vmap(tracer.grad(log1pexp))(np.array([0.0, 1000.0])), [0.5, 1.0])
    check_grads(log1pexp, (np.array([-1.0, 0.5, 2.0]),), order=2)


def test_custom_jvp_pytrees_and_multiple_args():
    @custom_jvp
    def f(p, x):
        return {"y": p["a"] * x, "z": (tnp.sum(x), p["b"])}

    @f.defjvp
    def f_jvp(primals, tangents):
        (p, x), (tp, tx) = primals, tangents
        out = f(p, x)
        return out, {"y": tp["a"] * x + p["a"] * tx, "z": (tnp.sum(tx), tp["b"])}

    p = {"a": np.array([1.0, 2.0]), "b": 3.0}
    x = np.array([0.5, -1.0])
    check_grads(lambda a, b, x: f({"a": a, "b": b}, x)["y"], (p["a"], 3.0, x), order=2)
    g = tracer.grad(lambda p, x: tnp.sum(f(p, x)["y"]) + f(p, x)["z"][1] * 2.0)(p, x)
    close(g["a"], x)
    close(g["b"], 2.0)


def test_custom_jvp_defjvps():
    @custom_jvp
    def f(x, y):
        return tnp.sin(x) * y

    f.defjvps(lambda x_dot, ans, x, y: tnp.cos(x) * x_dot * y,
              lambda y_dot, ans, x, y: tnp.sin(x) * y_dot)
    x, y = np.array([0.3, 1.0]), np.array([2.0, -1.0])
    check_grads(f, (x, y), order=2)
    gx, gy = tracer.grad(lambda x, y: tnp.sum(f(x, y)), argnums=(0, 1))(x, y)
    close(gx, np.cos(x) * y)
    close(gy, np.sin(x))

    @custom_jvp
    def g(x, y):
        return x * y

    g.defjvps(None, lambda y_dot, ans, x, y: x * y_dot)     # x is treated as constant
    close(tracer.grad(g, argnums=(0, 1))(2.0, 3.0), (0.0, 2.0))


def test_custom_jvp_nondiff_argnums_function_argument():
    @partial(custom_jvp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return apply(fn, x), 7.0 * t

    close(apply(tnp.sin, 0.5), np.sin(0.5))
    close(tracer.grad(apply, 1)(tnp.sin, 0.5), 7.0)
    close(tracer.vmap(tracer.grad(apply, 1), (None, 0))(tnp.sin, np.ones(2)), [7.0, 7.0])
    close(tracer.grad(tracer.jit(apply, static_argnums=0), 1)(tnp.sin, 0.5), 7.0)

    # An array argument in nondiff_argnums is not differentiated (zero gradient).
    @partial(custom_jvp, nondiff_argnums=(1,))
    def scale(x, c):
        return x * c

    scale.defjvp(lambda c, p, t: (scale(p[0], c), c * t[0]))
    close(tracer.grad(lambda c: scale(2.0, c) + c)(3.0), 1.0)
    close(tracer.grad(scale)(2.0, 3.0), 3.0)


def test_custom_jvp_integer_inputs_get_float0_tangents():
    seen = []

    @custom_jvp
    def f(x, n):
        return x * n

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, n), (tx, tn) = primals, tangents
        seen.append(tn.dtype)
        return f(x, n), tx * n

    close(tracer.grad(f)(2.0, 3), 3.0)
    assert seen[-1] == dtypes.float0
    close(tracer.vmap(tracer.grad(f))(np.ones(2), np.array([2, 5])), [2.0, 5.0])


def test_custom_jvp_integer_output_tangent_is_float0():
    @custom_jvp
    def f(x):
        return x * 2.0, lax.convert_element_type(x, np.int64)

    f.defjvp(lambda p, t: (f(p[0]), (2.0 * t[0], np.zeros((), dtypes.float0))))
    out, t = tracer.jvp(f, (3.0,), (1.0,))
    close(t[0], 2.0)
    assert t[1].dtype == dtypes.float0


def test_custom_jvp_symbolic_zeros():
    kinds = []

    @custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        kinds.append((isinstance(tx, SymbolicZero), isinstance(ty, SymbolicZero)))
        t = 0.0
        if not isinstance(tx, SymbolicZero):
            t = t + tx * y
        if not isinstance(ty, SymbolicZero):
            t = t + x * ty
        return f(x, y), t

    f.defjvp(f_jvp, symbolic_zeros=True)
    close(tracer.grad(f)(2.0, 3.0), 3.0)
    assert kinds[-1] == (False, True)
    close(tracer.grad(f, 1)(2.0, 3.0), 2.0)
    assert kinds[-1] == (True, False)
    close(tracer.vmap(tracer.grad(f))(np.ones(2), np.array([3.0, 4.0])), [3.0, 4.0])
    close(tracer.grad(lambda x, y: tnp.sum(tracer.vmap(f)(x, y)))(np.ones(2),
                                                                  np.array([3.0, 4.0])),
          [3.0, 4.0])
    assert kinds[-1] == (False, True)


def test_custom_jvp_rule_may_use_python_control_flow_on_primals():
    @custom_jvp
    def f(x):
        return tnp.abs(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (t if float(x) > 0 else -2.0 * t)

    close(tracer.grad(f)(3.0), 1.0)
    close(tracer.grad(f)(-3.0), -2.0)


def test_custom_jvp_staged_as_one_equation():
    closed = tracer.make_jaxpr(sin_x3)(1.0)
    assert eqn_names(closed) == ["custom_jvp_call"]
    (eqn,) = closed.jaxpr.eqns
    assert eqn_names(eqn.params["call_jaxpr"]) == ["sin"]
    assert eqn.params["num_consts"] == 0 and eqn.params["symbolic_zeros"] is False
    text = str(closed)
    assert "custom_jvp_call[" in text and "jvp=_sin_x3_jvp" in text and "name=sin_x3" in text
    # vmap keeps one equation with the batched function inside.
    closed_v = tracer.make_jaxpr(tracer.vmap(sin_x3))(np.ones(3))
    assert eqn_names(closed_v) == ["custom_jvp_call"]
    assert closed_v.jaxpr.eqns[0].params["call_jaxpr"].in_avals[0].shape == (3,)
    # grad: the rule was applied; the primal call stays, the tangent is the rule's.
    closed_g = tracer.make_jaxpr(tracer.grad(sin_x3))(1.0)
    assert "custom_jvp_call" in eqn_names(closed_g) and "cos" in eqn_names(closed_g)


def test_custom_jvp_with_jit():
    x = np.array([0.2, 0.9])
    jf = tracer.jit(sin_x3)
    close(jf(x), np.sin(x))
    close(tracer.grad(lambda x: tnp.sum(jf(x)))(x), 3 * np.cos(x))
    close(tracer.jit(tracer.grad(lambda x: tnp.sum(sin_x3(x))))(x), 3 * np.cos(x))
    close(tracer.jvp(jf, (x,), (np.ones(2),))[1], 3 * np.cos(x))
    close(tracer.vmap(tracer.grad(tracer.jit(sin_x3)))(x), 3 * np.cos(x))


def test_custom_jvp_with_vmap():
    x = np.array([[0.2, 0.9], [0.1, -0.5]])
    close(tracer.vmap(sin_x3)(x), np.sin(x))
    close(tracer.vmap(tracer.grad(lambda v: tnp.sum(sin_x3(v))))(x), 3 * np.cos(x))
    close(tracer.grad(lambda x: tnp.sum(tracer.vmap(sin_x3)(x)))(x), 3 * np.cos(x))
    close(tracer.jvp(tracer.vmap(sin_x3), (x,), (np.ones((2, 2)),))[1], 3 * np.cos(x))
    # Unmapped arguments stay unmapped inside the batched rule.
    @custom_jvp
    def f(x, w):
        return x * w

    f.defjvp(lambda p, t: (f(*p), t[0] * p[1] + p[0] * t[1]))
    w = np.array([1.0, 2.0])
    close(tracer.vmap(tracer.grad(lambda x, w: tnp.sum(f(x, w)), argnums=1), (0, None))(x, w),
          x)
    close(tracer.grad(lambda w: tnp.sum(tracer.vmap(f, (0, None))(x, w)))(w), x.sum(0))


def test_custom_jvp_closures_over_vmapped_values():
    # The function and the rule close over a value batched by an enclosing vmap: batching
    # the rule happens inside that same vmap (JAX gives 20 for the grad below).
    def g(c, x):
        c = c * 1.0

        @custom_jvp
        def f(x):
            return c * x

        f.defjvp(lambda p, t: (f(p[0]), 10.0 * c * t[0]))
        return f(x)

    close(tracer.vmap(g, (0, None))(np.array([1.0, 2.0]), 3.0), [3.0, 6.0])
    close(tracer.vmap(tracer.grad(g, 1), (0, None))(np.array([1.0, 2.0]), 3.0), [10.0, 20.0])
    close(tracer.grad(lambda c, x: tnp.sum(tracer.vmap(g, (0, None))(c, x)), 1)(
        np.ones(2), 3.0), 20.0)
    closed = tracer.make_jaxpr(g)(2.0, 3.0)
    (cj,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "custom_jvp_call"]
    assert cj.params["num_consts"] == 1 and len(cj.invars) == 2
    close(tracer.grad(g, 1)(2.0, 3.0), 20.0)


def test_custom_jvp_closure_over_differentiated_value_is_an_error():
    def g(c, x):
        @custom_jvp
        def f(x):
            return c * x

        f.defjvp(lambda p, t: (f(p[0]), c * t[0]))
        return f(x)

    with pytest.raises(TypeError, match="custom_jvp function of 'f'.*explicit argument"):
        tracer.grad(g, 0)(2.0, 3.0)

    def h(c, x):
        @custom_jvp
        def f(x):
            return x * 2.0

        f.defjvp(lambda p, t: (f(p[0]), c * t[0]))
        return f(x)

    close(tracer.grad(h, 1)(2.0, 3.0), 2.0)
    with pytest.raises(TypeError, match="custom_jvp rule of 'f'"):
        tracer.grad(lambda c: h(c, c))(2.0)


def test_custom_jvp_bad_rules():
    def make(rule):
        @custom_jvp
        def f(x):
            return x * 2.0
        f.defjvp(rule)
        return f

    with pytest.raises(TypeError, match="must produce a pair"):
        tracer.jvp(make(lambda p, t: p[0]), (1.0,), (1.0,))
    with pytest.raises(TypeError, match="same container .* structure"):
        tracer.jvp(make(lambda p, t: ((p[0] * 2.0,), t[0])), (1.0,), (1.0,))
    with pytest.raises(TypeError, match="equal container .* structures"):
        tracer.jvp(make(lambda p, t: (p[0] * 2.0, (t[0],))), (1.0,), (1.0,))
    with pytest.raises(ValueError, match=r"tangent output 0.*expected shape \(\)"):
        tracer.jvp(make(lambda p, t: (p[0] * 2.0, tnp.ones(2))), (1.0,), (1.0,))
    with pytest.raises(TypeError, match=r"tangent output 0.*expected dtype float64"):
        tracer.jvp(make(lambda p, t: (p[0] * 2.0, tnp.ones((), np.float32))), (1.0,), (1.0,))
    with pytest.raises(TypeError, match=r"primal outputs with the shapes and dtypes"):
        tracer.jvp(make(lambda p, t: (tnp.ones(2), t[0])), (1.0,), (1.0,))

    @custom_jvp
    def no_rule(x):
        return x

    with pytest.raises(AttributeError, match="No JVP defined"):
        no_rule(1.0)

    @custom_jvp
    def takes_str(x, s):
        return x

    takes_str.defjvp(lambda p, t: (p[0], t[0]))
    with pytest.raises(TypeError, match="non-array arguments must be listed in nondiff_argnums"):
        tracer.grad(takes_str)(1.0, "a")


def test_custom_jvp_kwargs_and_methods():
    class Model:
        def __init__(self, s):
            self.s = s

        @partial(custom_jvp, nondiff_argnums=(0,))
        def apply(self, x, scale=1.0):
            return self.s * x * scale

    @Model.apply.defjvp
    def _(self, primals, tangents):
        (x, scale), (tx, ts) = primals, tangents
        return self.apply(x, scale), self.s * (tx * scale + x * ts)

    m = Model(2.0)
    close(m.apply(3.0, scale=2.0), 12.0)
    close(tracer.grad(lambda x: m.apply(x, scale=2.0))(3.0), 4.0)
    close(tracer.grad(lambda s: m.apply(3.0, scale=s))(2.0), 6.0)


# -------------------------------------- custom_vjp ----------------------------------------

def test_custom_vjp_rule_is_used_in_reverse_mode():
    x = np.array([0.2, 0.9])
    close(sin_v3(x), np.sin(x))
    close(tracer.grad(lambda x: tnp.sum(sin_v3(x)))(x), 3 * np.cos(x))
    close(tracer.jacrev(sin_v3)(x), np.diag(3 * np.cos(x)))
    _, f_vjp = tracer.vjp(sin_v3, x)
    close(f_vjp(np.array([1.0, 2.0]))[0], 3 * np.cos(x) * [1.0, 2.0])
    # grad of grad differentiates fwd/bwd: d/dx 3 cos x = -3 sin x (JAX gives the same).
    close(tracer.grad(tracer.grad(sin_v3))(0.4), -3 * np.sin(0.4))
    close(tracer.hessian(lambda x: tnp.sum(sin_v3(x)))(x), np.diag(-3 * np.sin(x)))


def test_custom_vjp_forward_mode_is_an_error():
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        tracer.jvp(sin_v3, (1.0,), (1.0,))
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        tracer.jacfwd(sin_v3)(np.ones(2))


def test_custom_vjp_check_grads_reverse():
    @custom_vjp
    def f(x, y):
        return tnp.sin(x) * y

    f.defvjp(lambda x, y: (f(x, y), (tnp.cos(x), tnp.sin(x), y)),
             lambda res, g: (res[0] * g * res[2], res[1] * g))
    x, y = np.array([0.3, -1.2]), np.array([2.0, 0.5])
    check_grads(f, (x, y), order=1, modes=("rev",))
    # The rule's bwd is differentiable: second order by reverse-over-reverse.
    check_grads(f, (x, y), order=2, modes=("rev",))


def test_custom_vjp_clip_gradient_with_nondiff_argnums():
    @partial(custom_vjp, nondiff_argnums=(0, 1))
    def clip_gradient(lo, hi, x):
        return x

    clip_gradient.defvjp(lambda lo, hi, x: (x, None),
                         lambda lo, hi, _, g: (tnp.clip(g, lo, hi),))
    f = lambda x: tnp.sum(clip_gradient(-0.5, 0.5, x) * np.array([2.0, 0.1, -3.0]))
    close(tracer.grad(f)(np.ones(3)), [0.5, 0.1, -0.5])
    close(tracer.jit(tracer.grad(f))(np.ones(3)), [0.5, 0.1, -0.5])


def test_custom_vjp_pytrees_none_cotangents_and_int_args():
    @custom_vjp
    def f(p, n):
        return p["w"] * p["b"] * n

    def f_fwd(p, n):
        return f(p, n), (p, n)

    def f_bwd(res, g):
        p, n = res
        return ({"w": g * p["b"] * n, "b": None}, None)

    f.defvjp(f_fwd, f_bwd)
    p = {"w": np.array([1.0, 2.0]), "b": 3.0}
    g, gn = tracer.grad(lambda p, n: tnp.sum(f(p, n)), argnums=(0, 1), allow_int=True)(p, 2)
    close(g["w"], [6.0, 6.0])
    close(g["b"], 0.0)
    assert gn.dtype == dtypes.float0


def test_custom_vjp_symbolic_zeros():
    seen = {}

    @custom_vjp
    def f(x, y):
        return x * y, x + y

    def f_fwd(x, y):
        seen["perturbed"] = (x.perturbed, y.perturbed)
        x, y = x.value, y.value
        return f(x, y), (x, y)

    def f_bwd(res, cts):
        x, y = res
        g1, g2 = cts
        seen["zero_cts"] = (isinstance(g1, SymbolicZero), isinstance(g2, SymbolicZero))
        gx = g2 if isinstance(g1, SymbolicZero) else g1 * y + g2
        return gx, None

    f.defvjp(f_fwd, f_bwd, symbolic_zeros=True)
    close(tracer.grad(lambda x, y: f(x, y)[1])(2.0, 3.0), 1.0)
    assert seen == {"perturbed": (True, False), "zero_cts": (True, False)}
    assert isinstance(CustomVJPPrimal(1.0, True).value, float)


def test_custom_vjp_staged_as_one_equation():
    closed = tracer.make_jaxpr(sin_v3)(1.0)
    assert eqn_names(closed) == ["custom_vjp_call"]
    (eqn,) = closed.jaxpr.eqns
    assert eqn_names(eqn.params["call_jaxpr"]) == ["sin"]
    text = str(closed)
    assert "fwd=_sin_v3_fwd" in text and "bwd=_sin_v3_bwd" in text
    closed_g = tracer.make_jaxpr(tracer.grad(sin_v3))(1.0)
    assert "cos" in eqn_names(closed_g) and "custom_lin" not in str(closed_g)


def test_custom_vjp_with_jit_and_vmap():
    x = np.array([[0.2, 0.9], [0.1, -0.5]])
    close(tracer.jit(sin_v3)(x), np.sin(x))
    close(tracer.grad(lambda x: tnp.sum(tracer.jit(sin_v3)(x)))(x), 3 * np.cos(x))
    close(tracer.jit(tracer.grad(lambda x: tnp.sum(sin_v3(x))))(x), 3 * np.cos(x))
    close(tracer.vmap(sin_v3)(x), np.sin(x))
    close(tracer.vmap(tracer.grad(lambda v: tnp.sum(sin_v3(v))))(x), 3 * np.cos(x))
    close(tracer.grad(lambda x: tnp.sum(tracer.vmap(sin_v3)(x)))(x), 3 * np.cos(x))
    assert eqn_names(tracer.make_jaxpr(tracer.vmap(sin_v3))(x)) == ["custom_vjp_call"]

    # An unmapped argument receives the sum of the per-example cotangents.
    @custom_vjp
    def f(x, w):
        return tnp.sin(x) * w

    f.defvjp(lambda x, w: (f(x, w), (tnp.cos(x), tnp.sin(x), w)),
             lambda r, g: (r[0] * g * r[2], r[1] * g))
    xs = np.array([0.1, 0.5, 1.0])
    close(tracer.grad(lambda w: tnp.sum(tracer.vmap(f, (0, None))(xs, w)))(2.0),
          np.sum(np.sin(xs)))
    close(tracer.grad(lambda w: tnp.sum(tracer.jit(tracer.vmap(f, (0, None)))(xs, w)))(2.0),
          np.sum(np.sin(xs)))
    gx, gw = tracer.vmap(tracer.grad(f, (0, 1)), (0, None))(xs, 2.0)
    close(gx, 2.0 * np.cos(xs))
    close(gw, np.sin(xs))


def test_custom_vjp_bad_rules():
    def make(fwd, bwd):
        @custom_vjp
        def f(x, y):
            return x * y
        f.defvjp(fwd, bwd)
        return f

    good_fwd = lambda x, y: (x * y, (x, y))
    x, y = np.ones(2), np.ones(2)
    loss = lambda f: tracer.grad(lambda x, y: tnp.sum(f(x, y)))(x, y)
    with pytest.raises(TypeError, match="must produce a tuple with one cotangent per argument"
                                        ".*length 1"):
        loss(make(good_fwd, lambda r, g: (g,)))
    with pytest.raises(TypeError, match="must produce a tuple with one cotangent per argument"):
        loss(make(good_fwd, lambda r, g: g))
    with pytest.raises(TypeError, match="container .* structure.*argument 1"):
        loss(make(good_fwd, lambda r, g: (g, (g, g))))
    with pytest.raises(ValueError, match=r"argument 0.*expected shape \(2,\).*got shape \(3,\)"):
        loss(make(good_fwd, lambda r, g: (tnp.ones(3), g)))
    with pytest.raises(TypeError, match=r"argument 1.*expected dtype float64.*got c128"):
        loss(make(good_fwd, lambda r, g: (g, g * 1j)))
    with pytest.raises(TypeError, match="fwd rule .* must produce a pair"):
        loss(make(lambda x, y: x * y, lambda r, g: (g, g)))
    with pytest.raises(TypeError, match="primal output .* structure"):
        loss(make(lambda x, y: ((x * y,), None), lambda r, g: (g, g)))
    with pytest.raises(TypeError, match="residuals must be a pytree of arrays"):
        loss(make(lambda x, y: (x * y, "res"), lambda r, g: (g, g)))

    @partial(custom_vjp, nondiff_argnums=(0,))
    def h(c, x):
        return c * x

    h.defvjp(lambda c, x: (h(c, x), None), lambda c, r, g: (c * g,))
    with pytest.raises(TypeError, match="nondiff_argnums but is a traced array"):
        tracer.grad(lambda c: h(c, 2.0))(3.0)

    @custom_vjp
    def no_rule(x):
        return x

    with pytest.raises(AttributeError, match="No VJP defined"):
        no_rule(1.0)


def test_closure_convert_for_custom_vjp():
    def outer(c, x):
        fn = lambda x: tnp.sin(c * x)
        converted, consts = closure_convert(fn, x)

        @custom_vjp
        def f(x, *consts):
            return converted(x, *consts)

        def f_fwd(x, *consts):
            return f(x, *consts), (x, consts)

        def f_bwd(res, g):
            x, consts = res
            _, vjp_fn = tracer.vjp(converted, x, *consts)
            return vjp_fn(g)

        f.defvjp(f_fwd, f_bwd)
        return f(x, *consts)

    gc, gx = tracer.grad(outer, argnums=(0, 1))(2.0, 0.5)
    close(gc, np.cos(1.0) * 0.5)
    close(gx, np.cos(1.0) * 2.0)


def test_custom_gradient():
    @tracer.custom_gradient
    def f(x):
        return tnp.sin(x), lambda g: 3.0 * g * tnp.cos(x)

    close(f(0.5), np.sin(0.5))
    close(tracer.grad(f)(0.5), 3 * np.cos(0.5))
    close(tracer.grad(tracer.grad(f))(0.5), -3 * np.sin(0.5))
    close(tracer.vmap(tracer.grad(f))(np.array([0.1, 0.5])), 3 * np.cos([0.1, 0.5]))
    close(tracer.jit(tracer.grad(f))(0.5), 3 * np.cos(0.5))

    @tracer.custom_gradient
    def g(x, y):
        return x * y, lambda c: (c * y, None)

    close(tracer.grad(g, (0, 1))(2.0, 3.0), (3.0, 0.0))


def test_public_names():
    from tracer import ad_checkpoint, custom_derivatives
    assert tracer.custom_jvp is custom_jvp and tracer.custom_vjp is custom_vjp
    assert tracer.checkpoint is ad_checkpoint.checkpoint is tracer.remat
    assert tracer.stop_gradient is lax.stop_gradient
    assert tracer.checkpoint_policies is ad_checkpoint.checkpoint_policies
    assert tracer.closure_convert is custom_derivatives.closure_convert


def test_rule_closing_over_values_traced_in_jit_gets_a_clear_error():
    # JAX has the same restriction; the message says what to do.
    @tracer.jit
    def g(c, x):
        c = c * 1.0

        @custom_jvp
        def f(x):
            return c * x

        f.defjvp(lambda p, t: (f(p[0]), 10.0 * c * t[0]))
        return f(x)

    close(g(2.0, 3.0), 6.0)
    with pytest.raises(tracer.UnexpectedTracerError,
                       match="custom_jvp rule of 'f'.*pass such values as arguments"):
        tracer.grad(g, 1)(2.0, 3.0)
