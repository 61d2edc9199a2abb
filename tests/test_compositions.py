"""The composition checker: random small programs (``tests/program_gen.py``) under every
transformation and their compositions, each against an independent oracle.

The defects users find are compositions: a primitive rule meeting another transformation,
a tie, or a value used twice. The programs reuse values, reduce, broadcast, index, branch,
loop and call (inner jit, checkpoint, custom_jvp), and each is checked under

- grad against central finite differences (float64; at random points, and at ties too for
  smooth programs, whose one-sided derivatives agree there; a direction along which the
  forward and backward differences disagree crosses a kink and is skipped),
- vjp against jvp (the dot-product test <ct, J t> == <J^T ct, t>),
- vmap against a Python loop, vmap(grad) against a loop of grads, grad of the sum of a
  vmap against the loop (unmapped arguments sum their members' gradients),
- jit(vmap(grad)) against the eager run: with the generated kernels run as Python (the
  full budget), and compiled by Numba (a fifth of it: every program compiles),
- jacfwd against jacrev, and the symmetry of the hessian (smooth programs, or random
  points),

at random points and at ties and kinks (inputs equal to each other, repeated values,
zeros), in float64 and (a quarter of the programs) with 32-bit defaults. Gradients of these
finite programs must be finite everywhere. At ties the JAX conventions are pinned
directly: ``TIE_CONVENTIONS`` holds gradients recorded with JAX 0.10.2, checked under
grad, jacobians, vmap, grad of vmap and jit.

Budget: ``TRACER_COMPOSE_EXAMPLES`` programs per check (default 40; the compiled check runs
a fifth, at least 8). Examples are derandomized: CI sees the same programs every run, and
the kernel cache serves the compiled ones. A longer run by hand::

    TRACER_COMPOSE_EXAMPLES=1000 python -m pytest -q -n 2 tests/test_compositions.py

A failure prints ``repro: Case(...)`` (paste it into an ``@example``) and the program as
pseudo-Python. ``KNOWN`` pins the defects this checker was written to catch, ``FOUND`` the
ones it found; the check functions also run outside hypothesis (``check_vmap_vs_loop(
Case(...))`` in a shell reproduces one).
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import (HealthCheck, assume, currently_in_test_context, event, example,
                        given, note, settings)
from hypothesis import strategies as st

import lax
import tracer
import tracer.numpy as tnp
from tracer import nn
from tracer.core import get_aval
from tracer.test_util import check_close, check_vjp, check_vmap

import program_gen as pg
from program_gen import op

EXAMPLES = int(os.environ.get("TRACER_COMPOSE_EXAMPLES", "40"))
JIT_EXAMPLES = max(8, EXAMPLES // 5)
BATCH = 3
_settings = dict(deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                        HealthCheck.data_too_large])


# ======================================== cases ==========================================

@dataclasses.dataclass(frozen=True)
class Case:
    """A program, its input signature and point (``mode``, ``seed``), the vmap axes of its
    arguments (``None``: unmapped; extra entries are ignored), and whether it runs with
    32-bit defaults (float32 inputs, ``enable_x64=False``)."""
    prog: tuple
    sig: int = 0
    mode: str = "random"
    seed: int = 0
    in_axes: tuple = (0, 0, 0)
    x32: bool = False

    @property
    def dtype(self):
        return np.dtype(np.float32 if self.x32 else np.float64)

    @property
    def tol(self):
        """Tolerance of comparisons between two ways of computing one value."""
        return 1e-4 if self.x32 else 1e-10

    def flags(self, **extra):
        # Inner jits of the programs run their optimized jaxpr through the NumPy impls in
        # the eager checks (a compile per program would dominate); the jit checks compile.
        return pg.flags(enable_x64=not self.x32, **{"jit_compile": "none", **extra})

    def args(self, member=0):
        return pg.inputs(self.sig, self.mode, self.seed + member, self.dtype)

    def axes(self):
        """in_axes normalized to the arguments: rank-0 arguments map axis 0, axis 1 needs
        rank >= 1, and at least one argument is mapped."""
        shapes = pg.SIGNATURES[self.sig % len(pg.SIGNATURES)]
        out = []
        for s, ax in zip(shapes, tuple(self.in_axes) + (0,) * len(shapes)):
            if ax is not None and (len(s) == 0 or ax >= len(s) + 1):
                ax = 0
            out.append(ax)
        if all(ax is None for ax in out):
            out[0] = 0
        return tuple(out)

    def members(self):
        """The arguments of each of the BATCH members (unmapped ones are member 0's)."""
        axes = self.axes()
        m0 = self.args(0)
        return [tuple(m0[i] if ax is None else a for i, (a, ax) in
                      enumerate(zip(self.args(k), axes))) for k in range(BATCH)]

    def batched(self):
        """(batched arguments, in_axes): the members stacked along each mapped axis."""
        members = self.members()
        axes = self.axes()
        return tuple(members[0][i] if ax is None else np.stack([m[i] for m in members], axis=ax)
                     for i, ax in enumerate(axes)), axes


_AXIS = st.sampled_from((0, None, 1, -1))


def cases(max_ops=5, depth=1):
    return st.builds(Case, pg.programs(max_ops, depth),
                     st.integers(0, len(pg.SIGNATURES) - 1), st.sampled_from(pg.MODES),
                     st.integers(0, 2 ** 16), st.tuples(_AXIS, _AXIS, _AXIS),
                     st.sampled_from((False, False, False, True)))


def f_of(case):
    return pg.build(case.prog)


def objective(case):
    """The program's scalar objective (a weighted sum of its outputs)."""
    f = f_of(case)
    return lambda *xs: pg.scalarize(f(*xs))


def _argnums(case):
    return tuple(range(len(case.args())))


def _finite_outputs(f, args, bound=1e4):
    return all(np.all(np.isfinite(np.asarray(o))) and np.all(np.abs(np.asarray(o)) <= bound)
               for o in f(*args))


def setup(case, batched=False):
    """Note the program (printed with a failing example); reject programs whose outputs
    overflow at this point. Returns whether the program is smooth."""
    args = case.args()
    listing, smooth = pg.analyze(case.prog, args)
    if currently_in_test_context():        # the checks also run outside hypothesis
        note(f"repro: {case!r}\n{listing}\n# mode={case.mode} smooth={smooth} "
             f"in_axes={case.axes()} dtype={case.dtype}")
    f = f_of(case)
    assume(all(_finite_outputs(f, a) for a in (case.members() if batched else [args])))
    return smooth


def _event(what):
    if currently_in_test_context():
        event(what)


def _np(x):
    return np.asarray(x)


def assert_finite(tree, what):
    for i, leaf in enumerate(tracer.tree_util.tree_leaves(tree)):
        a = _np(leaf)
        assert np.all(np.isfinite(a)), f"{what}: non-finite entries in output {i}: {a}"


# ============================ the known defects, pinned =================================

KNOWN = {
    # logaddexp's gradient at equal arguments: (0, 1) instead of (0.5, 0.5) (the max in
    # its overflow-safe form meets the abs of the difference at the tie).
    "logaddexp_tie": Case((op("composite", "logaddexp", a=0, c=1),), sig=0, mode="equal"),
    # vmap(grad) of a function using an unmapped input twice: the cotangents of the two
    # uses (one batched, one not) meet in add_any ("operands must have equal types").
    "unmapped_used_twice": Case((op("binary", "mul", a=0, c=1), op("binary", "add", a=0, c=1)),
                                sig=4, in_axes=(0, None)),
    # The same through a cond whose operand is also closed over by its branches (all
    # inputs mapped): what hypothesis shrinks a vmap(grad) failure to.
    "used_twice_through_cond": Case(
        (op("unary", "neg"), op("cond", "cond", body=((op("unary", "neg"),), (op("unary", "neg"),)))),
        sig=2),
    # grad of the sum of a vmap of cond(s > 0, log(s) * x, ...): the batched predicate
    # runs both branches, and the untaken lanes' NaN derivative leaks into the gradient.
    "cond_untaken_branch_nan": Case(
        (op("cond", "guarded", a=1, c=1, body=((op("binary", "mul", a=0, c=3),), ())),),
        sig=4, seed=2, in_axes=(0, 0)),
}


# Defects this checker found beyond those (minimal programs, shrunk by hand from its
# failures):
FOUND = {
    # grad of checkpoint(f) where f holds a lax.cond: "primal output depends on a tangent"
    # (partial evaluation of the remat'd cond); jvp and vmap are fine.
    "checkpoint_of_cond": Case((op("call", "checkpoint", body=((op("cond", "cond"),),)),)),
    # scipy.special.xlogy / xlog1py of a scalar x and an array y: select_n shape error
    # (the custom_jvp body does not broadcast its operands; JAX broadcasts).
    "xlogy_scalar_and_array": Case((op("composite", "xlogy", a=0, c=1),), sig=2),
}


# ======================================== checks ==========================================
# Plain functions of a Case (the tests below give them programs; a driver can too).

def _fd_direction(F, args, i, rng, h=1e-6):
    """Central differences of F along a random direction t of argument i: (derivative,
    t), or (None, t) when the one-sided differences disagree (a kink within h)."""
    t = rng.standard_normal(np.shape(args[i]))

    def at(s):
        xs = list(args)
        xs[i] = args[i] + s * t
        return float(_np(F(*xs)))
    fp, f0, fm = at(h), at(0.0), at(-h)
    central, fwd, bwd = (fp - fm) / (2 * h), (fp - f0) / h, (f0 - fm) / h
    return (None if abs(fwd - bwd) > 1e-3 * (1 + abs(central)) else central), t


def check_grad_vs_finite_differences(case):
    """grad against central differences (float64) at random points, and for smooth
    programs at ties too (a program with kinks is differenced at a random point instead);
    gradients are finite everywhere."""
    case = dataclasses.replace(case, x32=False)
    with case.flags():
        smooth = setup(case)
        F = objective(case)
        grads = tracer.grad(F, argnums=_argnums(case))(*case.args())
        assert_finite(grads, "grad")
        if not (smooth or case.mode == "random"):
            _event("grad: kinks at the tie; finite differences at a random point")
            case = dataclasses.replace(case, mode="random")
            assume(_finite_outputs(f_of(case), case.args()))
            grads = tracer.grad(F, argnums=_argnums(case))(*case.args())
            assert_finite(grads, "grad")
        args = case.args()
        rng = np.random.default_rng(case.seed)
        for i, g in enumerate(grads):
            fd, t = _fd_direction(F, args, i, rng)
            if fd is None:
                _event("grad: a direction across a kink skipped")
                continue
            ad = float(np.sum(_np(g) * t))
            assert abs(ad - fd) <= 1e-5 * (1 + abs(fd)), \
                f"grad of argument {i} along t at the {case.mode} point: AD {ad!r} vs " \
                f"finite differences {fd!r}"


def check_vjp_vs_jvp(case):
    """The dot-product test <ct, J t> == <J^T ct, t>."""
    with case.flags():
        setup(case)
        f = f_of(case)
        check_vjp(f, lambda *a: tracer.vjp(f, *a), case.args())


def check_vmap_vs_loop(case):
    with case.flags():
        setup(case, batched=True)
        args, axes = case.batched()
        check_vmap(f_of(case), args, in_axes=axes, atol=case.tol, rtol=case.tol)


def check_vmap_of_grad_vs_loop(case):
    """vmap(grad f) against grad f at each member."""
    with case.flags():
        setup(case, batched=True)
        args, axes = case.batched()
        check_vmap(tracer.grad(objective(case), argnums=_argnums(case)), args, in_axes=axes,
                   atol=case.tol, rtol=case.tol)


def check_grad_of_vmap_vs_loop(case):
    """grad(sum(vmap(f))) against the loop of grads: mapped arguments stack their
    members' gradients along their axis, unmapped ones sum them."""
    with case.flags():
        setup(case, batched=True)
        args, axes = case.batched()
        F = objective(case)
        got = tracer.grad(lambda *xs: tnp.sum(tracer.vmap(F, in_axes=axes)(*xs)),
                          argnums=_argnums(case))(*args)
        per = [tracer.grad(F, argnums=_argnums(case))(*m) for m in case.members()]
        for i, ax in enumerate(axes):
            gs = [_np(p[i]) for p in per]
            want = np.sum(gs, axis=0) if ax is None else np.stack(gs, axis=ax)
            assert _np(got[i]).dtype == want.dtype
            np.testing.assert_allclose(_np(got[i]), want, rtol=case.tol, atol=case.tol,
                                       err_msg=f"grad of sum(vmap(f)), argument {i}")


def check_jit_of_vmap_of_grad_vs_eager(case, python_kernels=False):
    """jit(vmap(grad f)) against the eager vmap(grad f): compiled (synchronously), or with
    ``python_kernels`` the generated kernels run as Python (the same fusion and index
    algebra, no Numba compile)."""
    with case.flags(disable_jit=True):          # the programs' inner jits eager too
        setup(case, batched=True)
        args, axes = case.batched()
        g = tracer.vmap(tracer.grad(objective(case), argnums=_argnums(case)), in_axes=axes)
        want = g(*args)
    with case.flags(jit_compile="sync", debug_kernels=python_kernels):
        got = tracer.jit(g)(*args)
    for i, (w, v) in enumerate(zip(want, got)):
        wa, va = get_aval(w), get_aval(v)
        assert (wa.shape, wa.dtype, wa.weak_type) == (va.shape, va.dtype, va.weak_type), \
            f"gradient {i}: jit gives {va.str_short()}, eager {wa.str_short()}"
        np.testing.assert_allclose(_np(v), _np(w), rtol=case.tol, atol=case.tol * 1e-2,
                                   err_msg=f"jit(vmap(grad)) vs eager, gradient {i}")


def check_jacfwd_vs_jacrev(case):
    with case.flags():
        setup(case)
        f, args = f_of(case), case.args()
        fwd = tracer.jacfwd(f, argnums=_argnums(case))(*args)
        rev = tracer.jacrev(f, argnums=_argnums(case))(*args)
        assert_finite(rev, "jacrev")
        check_close(fwd, rev, atol=case.tol, rtol=case.tol, err_msg="jacfwd vs jacrev")


def check_hessian_symmetric(case):
    """The hessian of the scalar objective is symmetric (smooth programs anywhere; programs
    with kinks at random points, where they are smooth)."""
    case = dataclasses.replace(case, x32=False)
    with case.flags():
        smooth = setup(case)
        assume(smooth or case.mode == "random")
        args = case.args()
        H = tracer.hessian(objective(case), argnums=_argnums(case))(*args)
        sizes = [int(np.size(a)) for a in args]
        full = np.block([[_np(H[i][j]).reshape(sizes[i], sizes[j]) for j in range(len(args))]
                         for i in range(len(args))])
        assert np.all(np.isfinite(full)), f"hessian has non-finite entries:\n{full}"
        np.testing.assert_allclose(full, full.T, rtol=1e-8, atol=1e-8,
                                   err_msg="hessian not symmetric")


# ========================================= tests ==========================================

@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["logaddexp_tie"])
@example(FOUND["checkpoint_of_cond"])
def test_grad_vs_finite_differences(case):
    check_grad_vs_finite_differences(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["unmapped_used_twice"])
@example(FOUND["checkpoint_of_cond"])
@example(FOUND["xlogy_scalar_and_array"])
def test_vjp_vs_jvp(case):
    check_vjp_vs_jvp(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["unmapped_used_twice"])
@example(KNOWN["cond_untaken_branch_nan"])
@example(FOUND["xlogy_scalar_and_array"])
def test_vmap_vs_loop(case):
    check_vmap_vs_loop(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["unmapped_used_twice"])
@example(KNOWN["cond_untaken_branch_nan"])
@example(KNOWN["used_twice_through_cond"])
def test_vmap_of_grad_vs_loop(case):
    check_vmap_of_grad_vs_loop(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["cond_untaken_branch_nan"])
@example(KNOWN["unmapped_used_twice"])
def test_grad_of_vmap_vs_loop(case):
    check_grad_of_vmap_vs_loop(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["unmapped_used_twice"])
def test_jit_python_kernels_of_vmap_of_grad(case):
    check_jit_of_vmap_of_grad_vs_eager(case, python_kernels=True)


@settings(max_examples=JIT_EXAMPLES, **_settings)
@given(cases(max_ops=3))
@example(KNOWN["unmapped_used_twice"])
def test_jit_compiled_of_vmap_of_grad(case):
    check_jit_of_vmap_of_grad_vs_eager(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["logaddexp_tie"])
@example(KNOWN["unmapped_used_twice"])
@example(KNOWN["used_twice_through_cond"])
def test_jacfwd_vs_jacrev(case):
    check_jacfwd_vs_jacrev(case)


@settings(max_examples=EXAMPLES, **_settings)
@given(cases())
@example(KNOWN["logaddexp_tie"])
@example(KNOWN["used_twice_through_cond"])
def test_hessian_symmetric(case):
    check_hessian_symmetric(case)


# ============================== tie conventions (JAX) ===================================

_W2, _W3 = np.linspace(0.5, 1.5, 2), np.linspace(0.5, 1.5, 3)
# name: (f, args, the gradient with respect to every argument, recorded with JAX 0.10.2
# in float64: jax.grad(f, argnums=all)(*args)).
TIE_CONVENTIONS = {
    "maximum": (tnp.maximum, (1.0, 1.0), (0.5, 0.5)),
    "minimum": (tnp.minimum, (1.0, 1.0), (0.5, 0.5)),
    "maximum_of_self": (lambda x, y: tnp.maximum(x, x) * y, (1.0, 2.0), (2.0, 1.0)),
    "max_reduce": (tnp.max, (np.array([1., 3., 3.]),), ([0., 0.5, 0.5],)),
    "max_all_equal": (tnp.max, (np.array([2., 2., 2.]),), ([1 / 3, 1 / 3, 1 / 3],)),
    "min_axis1": (lambda x: tnp.sum(tnp.min(x, axis=1) * _W2),
                  (np.array([[1., 1., 0.], [2., 2., 2.]]),),
                  ([[0., 0., 0.5], [0.5, 0.5, 0.5]],)),
    "reduce_max_two_axes": (lambda x: lax.reduce_max(x, (0, 1)),
                            (np.array([[1., 2.], [2., 0.]]),), ([[0., 0.5], [0.5, 0.]],)),
    "abs_at_zero": (tnp.abs, (0.0,), (1.0,)),
    "relu_at_zero": (nn.relu, (0.0,), (0.0,)),
    "clip_at_bound": (lambda x: tnp.clip(x, -1.0, 1.0), (1.0,), (0.5,)),
    "where_gt_tie": (lambda x, y: tnp.where(x > y, x, y), (1.0, 1.0), (0.0, 1.0)),
    "sort_ties": (lambda x: tnp.sum(tnp.sort(x) * _W3), (np.array([1., 1., 3.]),),
                  ([0.5, 1.0, 1.5],)),
    "top_k_ties": (lambda x: tnp.sum(lax.top_k(x, 2)[0] * _W2),
                   (np.array([1., 3., 3.]),), ([0., 0.5, 1.5],)),
    "cummax_ties": (lambda x: tnp.sum(lax.cummax(x) * _W3), (np.array([1., 1., 0.]),),
                    ([1.75, 1.25, 0.],)),
    "max_pool_ties": (lambda x: tnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2,), (1,),
                                                          "VALID") * _W3),
                      (np.array([1., 1., 1., 0.]),), ([0.5, 1.0, 1.5, 0.],)),
    "logsumexp_ties": (nn.logsumexp, (np.array([1., 1., 0.]),),
                       ([0.4223187982515182, 0.4223187982515182, 0.1553624034969636],)),
    "logaddexp_equal": (tnp.logaddexp, (1.0, 1.0), (0.5, 0.5)),
    "logaddexp2_equal": (tnp.logaddexp2, (1.0, 1.0), (0.5, 0.5)),
    "softplus_at_zero": (nn.softplus, (0.0,), (0.5,)),
    "fmax_tie": (tnp.fmax, (1.0, 1.0), (0.0, 1.0)),
    "prod_with_zero": (tnp.prod, (np.array([0., 2., 3.]),), ([6., 0., 0.],)),
    "scatter_max_ties": (lambda x, w: tnp.sum(x.at[np.array([0, 0, 1])].max(w) * _W3),
                         (np.array([1., 2., 0.]), np.array([1., 1., 2.])),
                         ([1 / 6, 0.5, 1.5], [1 / 6, 1 / 6, 0.5])),
    "max_pool_2d_ties": (lambda x: tnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2, 2),
                                                             (1, 1), "VALID")),
                         (np.ones((2, 3)),), ([[1., 1., 0.], [0., 0., 0.]],)),
}
# Rows also checked compiled (a compile each: a few).
_JIT_TIE_ROWS = ("maximum", "max_reduce", "where_gt_tie", "logaddexp_equal")


@pytest.mark.parametrize("name", sorted(TIE_CONVENTIONS))
def test_tie_conventions(name):
    """JAX's derivative conventions at ties (maximum/minimum split ties half and half,
    reduce_max shares among the tied maxima, where/sort/top_k/pools pick one), under grad,
    vmap(grad), grad(sum(vmap)), jacfwd/jacrev, and (some rows) jit(grad)."""
    f, args, want = TIE_CONVENTIONS[name]
    args = tuple(np.asarray(a, np.float64) for a in args)
    argnums = tuple(range(len(args)))
    want = [np.asarray(w, np.float64) for w in want]

    def close(got, what):
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(_np(g), w, rtol=1e-12, atol=1e-15,
                                       err_msg=f"{name}: {what}, argument {i}")
    g = tracer.grad(f, argnums=argnums)
    close(g(*args), "grad")
    close(tracer.jacrev(f, argnums=argnums)(*args), "jacrev")
    close(tracer.jacfwd(f, argnums=argnums)(*args), "jacfwd")
    # The tie point stacked with itself: every member of the batch gets the convention.
    stacked = tuple(np.stack([a, a]) for a in args)
    vg = tracer.vmap(g)(*stacked)
    close([v[1] for v in vg], "vmap(grad), member 1")
    close([v[0] for v in vg], "vmap(grad), member 0")
    gv = tracer.grad(lambda *xs: tnp.sum(tracer.vmap(f)(*xs)), argnums=argnums)(*stacked)
    close([v[0] for v in gv], "grad(sum(vmap))")
    # An unmapped operand collects both members' cotangents.
    if len(args) == 2:
        gu = tracer.grad(lambda x, y: tnp.sum(tracer.vmap(f, in_axes=(0, None))(x, y)),
                         argnums=(0, 1))(stacked[0], args[1])
        np.testing.assert_allclose(_np(gu[1]), 2 * want[1], rtol=1e-12,
                                   err_msg=f"{name}: grad(sum(vmap)) of an unmapped operand")
    if name in _JIT_TIE_ROWS:
        close(tracer.jit(g)(*args), "jit(grad)")
