"""The lowering pipeline: each jaxpr pass keeps the program's values (checked against the
un-passed program, loopy's auto_test_vs_ref), does its job, and fusion groups equations
into the kernels the design promises. These tests build loop IR but compile nothing."""
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from lowering import fusion, ir, passes, pipeline, rules, verify
from tracer.jaxpr import Literal, eval_jaxpr


def closed_of(f, *args):
    return tracer.make_jaxpr(f)(*args)


def prims(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def same_values(before, after, args):
    a = eval_jaxpr(before.jaxpr, before.consts, *args)
    b = eval_jaxpr(after.jaxpr, after.consts, *args)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


X = np.linspace(-2, 2, 6).astype(np.float32)


def test_inline_calls_splices_jit_and_keeps_values():
    inner = tracer.jit(lambda x: tnp.sin(x) * 2.0)
    closed = closed_of(lambda x: inner(x) + inner(x + 1.0), X)
    assert "jit" in prims(closed)
    flat = passes.inline_calls(closed)
    assert "jit" not in prims(flat) and prims(flat).count("sin") == 2
    same_values(closed, flat, [X])


def test_dce_and_cse():
    def f(x):
        unused = tnp.exp(x)            # noqa: F841
        return tnp.sin(x) + tnp.sin(x)
    closed = closed_of(f, X)
    out = passes.cse(passes.dce(closed))
    assert "exp" not in prims(out)
    assert prims(out).count("sin") == 1
    same_values(closed, out, [X])


def test_cse_merges_equations_whose_literals_differ_in_weak_type_only():
    """1 - s from user code (a weak literal) and 1 - s from a derivative rule (a strong
    float32 literal) are one equation: the outputs' avals are equal, the values too. A
    literal of another dtype or value, or an output of another weak type, is not merged."""
    s = np.linspace(0.1, 0.9, 4).astype(np.float32)

    def f(x):
        one = lax.full((), 1.0, np.float32)
        return (1.0 - x) * 2.0, lax.sub(one, x) * 3.0, (2.0 - x) * 4.0, (1.0 - x) * 5.0

    closed = closed_of(f, s)
    subs = [e for e in closed.jaxpr.eqns if e.primitive.name == "sub"]
    assert {e.invars[0].aval.weak_type for e in subs[:2]} == {True, False}
    out = passes.cse(closed)
    assert prims(out).count("sub") == 2
    same_values(closed, out, [s])
    w = closed_of(lambda x: (1.0 - x, lax.full((), 1.0, np.float64) - x), 0.5)
    assert prims(passes.cse(w)).count("sub") == 2     # (a weak and a strong result)


def test_effectful_equations_are_neither_removed_nor_merged():
    # rng_uniform is effectful (partial_eval.effectful_primitives, the one registry): two
    # draws stay two under jit, and an unused one is still drawn
    c = closed_of(lambda a: (lax.rng_uniform(a, 1., (3,)), lax.rng_uniform(a, 1., (3,)),
                             lax.rng_uniform(a, 1., (2,)))[:2], 0.)
    assert prims(passes.dce(passes.cse(c))).count("rng_uniform") == 3
    # a loop whose body has an effect is kept although its result is unused
    body = lambda i, v: (lax.dce_sink(v), v + 1.)[1]
    c = closed_of(lambda x: (lax.fori_loop(0, 3, body, x), x * 2.)[1], 1.)
    assert any(p in ("scan", "while") for p in prims(passes.dce(c)))


def test_fold_constants_and_simplify():
    def f(x, i):
        c = lax.exp(lax.convert_element_type(2.0, np.float32))    # a scalar of literals
        return (x * 1.0 - 0.0) / 1.0 * c, i + 0, x + 0.0, -(-x)
    i = np.arange(6, dtype=np.int32)
    closed = closed_of(f, X, i)
    out = pipeline.optimize(closed)
    names = prims(out)
    assert "exp" not in names and "convert_element_type" not in names   # folded
    assert names.count("mul") == 1          # x * 1.0 gone, x * c kept
    assert "sub" not in names and "div" not in names and "neg" not in names
    # x + 0.0 is not x (-0.0 + 0.0 == +0.0): kept; i + 0 is i: gone
    assert names.count("add") == 1
    lits = [a for e in out.jaxpr.eqns for a in e.invars if isinstance(a, Literal)]
    assert any(np.isclose(float(np.asarray(a.val)), np.exp(2.0)) for a in lits)
    same_values(closed, out, [X, i])


@pytest.mark.parametrize("dt", ["float64", "float32", "float16", "bfloat16"])
def test_simplify_keeps_signed_zeros(dt):
    """x - (-0.0) and x + 0.0 turn -0.0 into +0.0, so neither is x; x - 0.0 and
    x + (-0.0) are x for every x, in every float dtype (bfloat16's NumPy kind is "V").
    Checked on the compiled result too."""
    dt = tnp.bfloat16 if dt == "bfloat16" else np.dtype(dt)
    z, nz = np.array(0.0, dt), np.array(-0.0, dt)
    def f(x):
        return lax.sub(x, nz), lax.add(x, z), lax.sub(x, z), lax.add(x, nz)
    x = np.array([-0.0, 0.0, 1.5, -np.inf, np.nan]).astype(dt)
    names = prims(pipeline.optimize(closed_of(f, x)))
    assert names.count("sub") == 1 and names.count("add") == 1
    x32 = x.astype(np.float32)
    want = [np.subtract(x32, -0.0), np.add(x32, 0.0), x32, x32]
    for got, w in zip(tracer.jit(f)(x), want):
        got = np.asarray(got).astype(np.float32)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(w))
        np.testing.assert_array_equal(got, w)


def test_simplify_keeps_complex_multiplication_and_division_by_one():
    """(a+bj) * 1 and (a+bj) / 1 are NaN in both parts where a or b is not finite (NumPy's
    complex arithmetic), so neither is x for complex x (the mean of one element divides
    by 1); for real x both are x. Checked against eager, NaN parts included."""
    def f(x):
        return x * 1.0, x / 1.0, tnp.mean(x), tnp.sum(x) / 1.0
    vals = [np.nan, -np.inf, complex(1, np.inf), complex(np.nan, 2), 1.5 - 0.0j]
    x = np.array(vals[:1], np.complex64)
    names = prims(pipeline.optimize(closed_of(f, x)))
    # (x / 1, sum / 1, and the mean's division, in complex128 as NumPy's)
    assert names.count("mul") == 1 and names.count("div") == 3, names
    r = np.array([2.5])
    assert "mul" not in prims(pipeline.optimize(closed_of(lambda r: r * 1.0, r)))
    for v in vals:
        x = np.array([v], np.complex64)
        with np.errstate(all="ignore"):
            want = f(x)
        for got, w in zip(tracer.jit(f)(x), want):
            got, w = np.asarray(got), np.asarray(w)
            for part in (np.real, np.imag):
                np.testing.assert_array_equal(part(got), part(w))


def test_every_pass_keeps_values_on_a_mixed_program():
    def f(x, y):
        z = tnp.sum(tnp.exp(x) * y, axis=0) + 1.0
        return lax.pad(z, 0.0, ((1, 1, 1),)), tnp.max(x.T, axis=1), (x @ y.T)[::-1]
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    y = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    closed = closed_of(f, x, y)
    cur = closed
    for p in pipeline.JAXPR_PASSES:
        nxt = p(cur)
        same_values(cur, nxt, [x, y])
        cur = nxt


def lower(f, *args):
    return pipeline.lower(closed_of(f, *args))


def test_elementwise_chain_is_one_kernel():
    prog = lower(lambda x: tnp.sin(x) * tnp.cos(x) + tnp.exp(-x * x) / (1 + x * x), X)
    (step,) = prog.steps
    assert isinstance(step, ir.KernelStep) and len(step.kernel.inputs) == 1
    verify.check_program(prog)


def test_index_remaps_fuse_into_consumers():
    x = np.ones((4, 6), np.float32)
    prog = lower(lambda x: lax.rev(x.T, (0,))[1:, ::2].reshape(-1) * 2.0 + 1.0, x)
    (step,) = prog.steps
    assert step.kernel.ndim == 1 and step.ins == prog.invars


def test_reduction_with_prologue_and_shared_loop():
    x = np.ones((5, 7), np.float32)
    prog = lower(lambda x: (tnp.sum(tnp.exp(x) * 2.0, axis=1), tnp.max(x, axis=1)), x)
    (step,) = prog.steps            # both reductions in one loop nest over x
    assert len(step.kernel.reductions) == 2 and step.kernel.reduce_dims == (1,)


def test_expensive_value_with_two_consumers_is_stored_once():
    x = np.ones((5, 7), np.float32)

    def f(x):
        e = tnp.exp(x - tnp.max(x, axis=1, keepdims=True))
        return e / tnp.sum(e, axis=1, keepdims=True)

    prog = lower(f, x)
    kernels = prog.kernels()
    assert len(kernels) == 3
    calls = [n for k in kernels for s in k.stores for n in ir.walk(s.value)
             if isinstance(n, ir.Call) and "exp" in n.fn.name]
    calls += [n for k in kernels for r in k.reductions for c in r.combine
              for n in ir.walk(c) if isinstance(n, ir.Call) and "exp" in n.fn.name]
    assert len(set(calls)) == 1


def test_cheap_value_with_two_consumers_is_recomputed():
    x = np.ones((5, 7), np.float32)
    prog = lower(lambda x: (tnp.sum(x * 2.0, axis=1), tnp.sum(x * 2.0, axis=0)), x)
    assert all(isinstance(s, ir.KernelStep) for s in prog.steps)
    assert len(prog.buffers) == 3           # x and the two sums: x * 2 is not stored


def test_reshape_of_an_array_is_a_view_and_dot_is_a_library_call():
    x = np.ones((4, 6), np.float32)
    w = np.ones((3, 2), np.float32)
    prog = lower(lambda x, w: x.reshape(8, 3) @ w, x, w)
    kinds = [type(s).__name__ for s in prog.steps]
    assert kinds == ["LibraryCall", "LibraryCall"], prog.pretty()
    assert prog.steps[0].name.startswith("view")


def test_shape_generic_kernels_have_runtime_extents():
    f = lambda x: tnp.sum(lax.pad(x[1:], 0.0, ((2, 0, 1), (0, 1, 0))), axis=0)
    a = lower(f, np.ones((4, 5), np.float32)).kernels()
    b = lower(f, np.ones((9, 3), np.float32)).kernels()
    assert a == b            # same IR: shapes live in the steps' iparams only


def test_verify_catches_a_broken_program():
    prog = lower(lambda x: x * 2.0, X)
    step = prog.steps[0]
    bad = ir.Program(prog.invars, prog.consts, ("nowhere",), prog.out_avals, prog.buffers,
                     prog.steps, prog.jaxpr)
    with pytest.raises(verify.IRError, match="never defined"):
        verify.check_program(bad)
    assert isinstance(step, ir.KernelStep)


def test_primitive_without_rule_is_a_host_step():
    prog = lower(lambda x: lax.bitcast_convert_type(x, np.uint16), X)
    (step,) = prog.steps
    assert isinstance(step, ir.HostStep) and "host_step" in prog.pretty()


def test_registry_interface_new_scalar_rule():
    # the worked example of lowering.rules: a new element-wise primitive, one line
    from tracer.core import Primitive, ShapedArray
    p = Primitive("test_double_sin")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype, x.weak_type))
    p.def_impl(lambda x: (2 * np.sin(x)).astype(x.dtype))
    rules.scalar_exprs[p] = lambda ctx, x: ctx.op("mul", ctx.const(2, x.dtype),
                                                  ctx.call("np.sin", x, dtype=x.dtype))
    try:
        prog = lower(lambda x: p.bind(x) + 1.0, X)
        (step,) = prog.steps
        assert isinstance(step, ir.KernelStep)
        assert any(isinstance(n, ir.Call) and n.fn.name == "sin"
                   for n in ir.walk(step.kernel.stores[0].value))
    finally:
        del rules.scalar_exprs[p]


def test_transposed_dot_becomes_a_swapped_dot():
    a = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    b = np.random.default_rng(3).normal(size=(5, 4)).astype(np.float32)
    closed = closed_of(lambda a, b: lax.transpose(lax.dot_general(a, b, (((0,), (0,)), ((), ()))),
                                                  (1, 0)), a, b)
    out = passes.swap_transposed_dots(closed)
    assert prims(out) == ["dot_general"]
    ((lc, rc), _) = out.jaxpr.eqns[0].params["dimension_numbers"]
    assert (lc, rc) == ((0,), (0,)) and out.jaxpr.eqns[0].invars[0] is closed.jaxpr.invars[1]
    x = eval_jaxpr(closed.jaxpr, closed.consts, a, b)[0]
    y = eval_jaxpr(out.jaxpr, out.consts, a, b)[0]
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float32])
def test_complex_transposed_dots_keep_their_operand_order(dtype):
    # BLAS's complex GEMM with the operands' roles swapped rounds differently, so the
    # swap stays for real dtypes: einsum('bij,jk->bik') (a dot of (x, c), transposed)
    # equals eager bit for bit in both tiers, straight-line and in a scan
    rng = np.random.default_rng(4)
    cplx = np.dtype(dtype).kind == "c"

    def rand(*s):
        return (rng.normal(size=s) + (1j * rng.normal(size=s) if cplx else 0)).astype(dtype)
    c, x = rand(3, 8, 5), rand(5, 6)
    f = lambda c, x: tnp.einsum("bij,jk->bik", c, x)
    g = lambda c, x: lax.scan(lambda s, _: (s, f(c * s, x)), 1.0, None, length=2)[1][0]
    closed = closed_of(f, c, x)
    swapped = passes.swap_transposed_dots(closed)
    assert (swapped is closed) == cplx, prims(swapped)
    view = np.float32 if np.dtype(dtype).itemsize == 8 or dtype == np.float32 else np.float64
    for fn in (f, g):
        want = np.asarray(fn(c, x))
        for mode in ("none", "sync"):
            tracer.config.update("jit_compile", mode)
            try:
                got = np.asarray(tracer.jit(fn)(c, x))
            finally:
                tracer.config.update("jit_compile", "sync")
            np.testing.assert_array_equal(np.ascontiguousarray(got).view(view),
                                          np.ascontiguousarray(want).view(view))


_R = np.random.default_rng(5)


@pytest.mark.parametrize("f,shapes,folded", [
    (lambda a, b: a.T @ b, [(4, 3), (4, 5)], True),
    (lambda a, b: a @ b.T, [(4, 3), (5, 3)], True),
    (lambda a, b: a.T @ b.T, [(4, 3), (5, 4)], True),
    (lambda a: a.T @ a.T, [(4, 4)], True),                  # one transpose, both operands
    (lambda a: a.T @ a, [(4, 3)], True),
    (lambda a, v: a.T @ v, [(4, 3), (4,)], True),
    (lambda a, v: v @ a.T, [(4, 3), (3,)], True),
    (lambda a, b: tnp.matmul(tnp.transpose(a, (2, 1, 0)), b), [(3, 4, 2), (2, 3, 5)], True),
    # free dims out of order: the result's layout would change
    (lambda a, b: tnp.einsum("bijk,bkl->bijl", tnp.transpose(a, (0, 2, 1, 3)), b),
     [(2, 3, 4, 5), (2, 5, 6)], False),
    # another consumer needs the transposed array itself
    (lambda a, b: (a.T @ b, a.T + 1.0), [(4, 3), (4, 5)], False),
    (lambda a, b: (a.T @ b, a.T), [(4, 3), (4, 5)], False),   # (an output)
])
def test_a_transposed_dot_operand_is_read_in_place(f, shapes, folded):
    args = [_R.normal(size=s) for s in shapes]
    closed = closed_of(f, *args)
    out = passes.fold_transposed_operands(closed)
    assert ("transpose" in prims(out)) != folded, prims(out)
    x = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    y = eval_jaxpr(out.jaxpr, out.consts, *args)
    for a, b in zip(x, y):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-13)
    # and the whole pipeline under jit, against eager (a value used twice, in a scan body)
    for g, e in zip(tracer.tree_util.tree_leaves(tracer.jit(f)(*args)),
                    tracer.tree_util.tree_leaves(f(*args))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-13)


def test_transposed_operands_under_grad_and_vmap():
    # attention-style q @ k.T: jit of grad and of vmap against eager (finite differences
    # for one entry)
    q, k = _R.normal(size=(4, 3)), _R.normal(size=(5, 3))
    loss = lambda q, k: tnp.sum(tnp.tanh(q @ k.T) * (k @ q.T).T)
    g, e = tracer.jit(tracer.grad(loss, argnums=(0, 1)))(q, k), tracer.grad(loss, (0, 1))(q, k)
    for a, b in zip(g, e):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
    d = np.zeros_like(q)
    d[1, 2] = 1e-6
    fd = (float(loss(q + d, k)) - float(loss(q - d, k))) / 2e-6
    np.testing.assert_allclose(np.asarray(g[0])[1, 2], fd, rtol=1e-6)
    qs = _R.normal(size=(2, 4, 3))
    vf = tracer.vmap(lambda q: q @ k.T)
    np.testing.assert_allclose(np.asarray(tracer.jit(vf)(qs)), np.asarray(vf(qs)), rtol=1e-13)


def test_a_transposed_operand_in_a_scan_body_is_read_in_place():
    w, h, xs = _R.normal(size=(12, 12)), _R.normal(size=12), _R.normal(size=(5, 12))
    f = lambda w, h, xs: lax.scan(lambda h, x: (tnp.tanh(w.T @ h + x), h), h, xs)
    text = tracer.jit(f).lower(w, h, xs).as_text()
    assert "transpose" not in text[text.index("# generated source"):]
    for g, e in zip(tracer.tree_util.tree_leaves(tracer.jit(f)(w, h, xs)),
                    tracer.tree_util.tree_leaves(f(w, h, xs))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_functions_numpy_runs_faster_are_host_steps_on_large_arrays(dt):
    """tanh, log, ... (``rules.NUMPY_LOOPS``) on a large float array outside a loop body
    are host steps (NumPy's SIMD loop, eager's own impl: the same bits); on small arrays,
    on float16 and inside loop bodies they stay fused."""
    n = rules.NUMPY_LOOP_MIN_ELEMENTS
    f = lambda x: tnp.tanh(x * 0.5) * 2.0 + tnp.log1p(x * x) + tnp.sqrt(x * x + 1.0)
    big = np.linspace(-3, 3, n).astype(dt)
    prog = lower(f, big)
    hosts = [s.primitive.name for s in prog.steps if isinstance(s, ir.HostStep)]
    assert sorted(hosts) == ["log1p", "tanh"], prog.pretty()
    assert not any(isinstance(s, ir.HostStep) for s in lower(f, big[:n - 1]).steps)
    assert not any(isinstance(s, ir.HostStep) for s in lower(f, big.astype(np.float16)).steps)
    (loop,) = lower(lambda x: lax.fori_loop(0, 3, lambda i, c: f(c), x), big).steps
    (body,) = dict(loop.params)["spec"].programs
    assert not any(isinstance(s, ir.HostStep) for s in body.steps)
    with rules.loop_body():
        assert not any(isinstance(s, ir.HostStep) for s in lower(f, big).steps)
    assert any(isinstance(s, ir.HostStep) for s in lower(f, big).steps)
    verify.check_program(prog)
    np.testing.assert_array_equal(np.asarray(tracer.jit(f)(big)), np.asarray(f(big)))


def _scans(closed):
    return [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]


def _rnn_loss(w, u, xs, h0):
    h, _ = lax.scan(lambda h, x: (tnp.tanh(w @ h + u @ x), None), h0, xs)
    return tnp.sum(h * h)


def test_scan_weight_gradients_become_one_product_after_the_loop():
    """grad of a recurrent network: the reverse scan adds an outer product into the
    weight gradients at every step; after hoist_scan_products it carries only the hidden
    state's cotangent and one dot_general per weight contracts the stacked vectors over
    the steps. Values: eager's and a NumPy loop's, to rounding (the sum's order)."""
    rng = np.random.default_rng(5)
    w, u = rng.normal(size=(16, 16)) / 4, rng.normal(size=(16, 3))
    xs, h0 = rng.normal(size=(20, 3)), rng.normal(size=16)
    vg = tracer.value_and_grad(_rnn_loss, argnums=(0, 1, 3))
    closed = closed_of(vg, w, u, xs, h0)
    opt = pipeline.optimize(closed)
    back = [e for e in _scans(opt) if e.params["reverse"]]
    assert [e.params["num_carry"] for e in back] == [1]        # (was 3: dW, dU, dh)
    after = opt.jaxpr.eqns[opt.jaxpr.eqns.index(back[0]) + 1:]
    dots = [e.params["dimension_numbers"] for e in after if e.primitive.name == "dot_general"]
    assert len(dots) == 2 and all(0 in lc and 0 in rc for (lc, rc), _ in dots)
    got = tracer.jit(vg)(w, u, xs, h0)
    want = vg(w, u, xs, h0)
    for g, e in zip(tracer.tree_util.tree_leaves(got), tracer.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-13)
    hs = [h0]
    for x in xs:
        hs.append(np.tanh(w @ hs[-1] + u @ x))
    dh, dw = 2 * hs[-1], np.zeros_like(w)
    for t in range(len(xs) - 1, -1, -1):
        da = dh * (1 - hs[t + 1] ** 2)
        dw += np.outer(da, hs[t])
        dh = w.T @ da
    np.testing.assert_allclose(np.asarray(got[1][0]), dw, rtol=1e-12, atol=1e-13)


_A = np.random.default_rng(6).normal(size=(7, 5))
_B = np.random.default_rng(7).normal(size=(7, 4))


def _outer(x, y):      # (a dot_general, as grad's transposes make them)
    return x[:, None] @ y[None, :]


def _batched(x, y):    # (2, 5) x (2, 4) -> (2, 5, 4): batch dim 0, no contraction
    return lax.dot_general(x, y, (((), ()), ((0,), (0,))))


@pytest.mark.parametrize("f, hoisted", [
    # dot + c (the add's operands swapped), forward
    (lambda a, b: lax.scan(lambda c, xy: (_outer(xy[0], xy[1]) + c, None),
                           tnp.zeros((5, 4)), (a, b))[0], True),
    # reverse, operands computed in the body, a second carry that stays, ys kept
    (lambda a, b: lax.scan(lambda c, xy: ((c[0] + _outer(tnp.sin(xy[0]), xy[1] * 2),
                                            c[1] * 0.5 + xy[1]), xy[1].sum()),
                           (tnp.ones((5, 4)), tnp.zeros(4)), (a, b), reverse=True), True),
    # a batched product and a length-1 scan
    (lambda a, b: lax.scan(lambda c, xy: (c + _batched(tnp.stack([xy[0], -xy[0]]),
                                                       tnp.stack([xy[1], xy[1]])), None),
                           tnp.zeros((2, 5, 4)), (a[:1], b[:1]))[0], True),
    # the result unused (DropVar): the loop's other output stays right
    (lambda a, b: lax.scan(lambda c, xy: ((c[0] + _outer(xy[0], xy[1]), c[1] + 1.0),
                                          None), (tnp.zeros((5, 4)), 0.0), (a, b))[0][1],
     True),
    # the carry is read elsewhere in the body: the loop keeps it
    (lambda a, b: lax.scan(lambda c, xy: (c + _outer(xy[0], xy[1]), c.sum()),
                           tnp.zeros((5, 4)), (a, b)), False),
    # the new value is read in the body (a y; the next carry's product, which is hoisted
    # itself) or is two carries: that carry stays
    (lambda a, b: lax.scan(lambda c, xy: ((lambda n: (n, n[0, 0]))(c + _outer(xy[0], xy[1]))),
                           tnp.zeros((5, 4)), (a, b)), False),
    (lambda a, b: lax.scan(lambda c, xy: ((lambda n: ((n, c[1] + _outer(xy[0], n[:, 0]))))(
        c[0] + _outer(xy[0], xy[1])), None), (tnp.zeros((5, 4)), tnp.zeros((5, 5))),
        (a, b))[0], True),
    (lambda a, b: lax.scan(lambda c, xy: ((lambda n: ((n, n)))(c[0] + _outer(xy[0], xy[1])),
                                          None), (tnp.zeros((5, 4)), tnp.zeros((5, 4))),
                           (a, b))[0], False),
    # one operand is loop-invariant (a const of the body): the loop keeps it
    (lambda a, b: lax.scan(lambda c, y: (c + _outer(a[0], y), None),
                           tnp.zeros((5, 4)), b)[0], False),
    # an inner product: smaller than its operands
    (lambda a, b: lax.scan(lambda c, xy: (c + xy[0] @ xy[0], None), 0.0, (a, b))[0], False),
    # a scan that never runs
    (lambda a, b: lax.scan(lambda c, xy: (c + _outer(xy[0], xy[1]), None),
                           tnp.full((5, 4), -0.0), (a[:0], b[:0]))[0], False),
    # integers: exact either way, left alone
    (lambda a, b: lax.scan(lambda c, xy: (c + _outer(xy[0], xy[1]), None),
                           tnp.zeros((5, 4), tnp.int32),
                           ((a * 3).astype(tnp.int32), (b * 3).astype(tnp.int32)))[0], False),
])
def test_hoist_scan_products_applies_only_where_it_may_and_keeps_values(f, hoisted):
    closed = closed_of(f, _A, _B)
    after = passes.hoist_scan_products(closed)
    assert (after is not closed) == hoisted
    got = eval_jaxpr(after.jaxpr, after.consts, _A, _B)
    want = eval_jaxpr(closed.jaxpr, closed.consts, _A, _B)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-13, atol=1e-13)
        assert np.asarray(g).dtype == np.asarray(e).dtype
    pipeline.lower(closed)          # (a lowering failure would only be logged under jit)
    for g, e in zip(tracer.tree_util.tree_leaves(tracer.jit(f)(_A, _B)),
                    tracer.tree_util.tree_leaves(f(_A, _B))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-13, atol=1e-13)


def test_hoisted_scan_products_under_vmap_of_grad_and_inside_a_loop():
    """The pass under compositions: jit(vmap(grad)) of the RNN over a batch of input
    sequences equals a Python loop of eager grads; a scan accumulating products inside a
    fori_loop body (hoisted there: loop bodies are optimized first) still gives eager's
    values; the value is used twice (the loss and the gradient) under value_and_grad."""
    rng = np.random.default_rng(9)
    w, u = rng.normal(size=(8, 8)) / 3, rng.normal(size=(8, 2))
    xss, h0 = rng.normal(size=(3, 6, 2)), rng.normal(size=8)
    g = tracer.grad(_rnn_loss, argnums=(0, 1))
    vg_closed = closed_of(tracer.vmap(g, in_axes=(None, None, 0, None)), w, u, xss, h0)
    carries = lambda c: [e.params["num_carry"] for e in _scans(c) if e.params["reverse"]]
    assert carries(pipeline.optimize(vg_closed))[0] < carries(vg_closed)[0]   # (rewritten)
    batched = tracer.jit(tracer.vmap(g, in_axes=(None, None, 0, None)))(w, u, xss, h0)
    for k in range(3):
        for got, want in zip(batched, g(w, u, xss[k], h0)):
            np.testing.assert_allclose(np.asarray(got)[k], np.asarray(want), rtol=1e-12,
                                       atol=1e-13)

    def looped(w, u, xs, h0):
        return lax.fori_loop(0, 2, lambda i, c: c + g(w, u, xs, h0)[0], tnp.zeros((8, 8)))

    np.testing.assert_allclose(np.asarray(tracer.jit(looped)(w, u, xss[0], h0)),
                               np.asarray(looped(w, u, xss[0], h0)), rtol=1e-12, atol=1e-13)
    lc = closed_of(looped, w, u, xss[0], h0)
    ((loop,), (opt_loop,)) = _scans(lc), _scans(pipeline.optimize(lc))     # (the fori)
    assert carries(opt_loop.params["jaxpr"])[0] < carries(loop.params["jaxpr"])[0]
    vg = tracer.value_and_grad(lambda w: _rnn_loss(w, u, xss[0], h0) * 2.0)
    (v1, g1), (v2, g2) = tracer.jit(vg)(w), vg(w)
    np.testing.assert_allclose(float(v1), float(v2), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g2), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("p1, p2", [((1, 2, 0), (2, 0, 1)), ((1, 0, 2), (0, 2, 1)),
                                    ((2, 1, 0), (2, 1, 0))])
def test_a_transpose_of_a_transpose_is_one_transpose_or_none(p1, p2):
    x = np.arange(24.0).reshape(2, 3, 4)
    closed = closed_of(lambda x: lax.transpose(lax.transpose(x, p1), p2) * 2.0, x)
    after = passes.dce(passes.simplify(closed))
    n = prims(after).count("transpose")
    assert n == (0 if tuple(p1[i] for i in p2) == (0, 1, 2) else 1)
    same_values(closed, after, [x])
    np.testing.assert_array_equal(np.asarray(tracer.jit(lambda x: lax.transpose(
        lax.transpose(x, p1), p2))(x)), x.transpose(p1).transpose(p2))


def _gru_loss(p, xs, ys):
    """A GRU cell's loss over a scan (the cold-start runner's gru_scan, smaller): grad's
    reverse scan adds each weight's gradient into its carry through two transposes."""
    def body(h, xy):
        x, y = xy
        hx = tnp.concatenate([h, x], axis=-1)
        z = tracer.nn.sigmoid(hx @ p["wz"].T)
        r = tracer.nn.sigmoid(hx @ p["wr"].T)
        hc = tnp.tanh(tnp.concatenate([r * h, x], axis=-1) @ p["wh"].T)
        h = (1 - z) * h + z * hc
        return h, tnp.mean((h @ p["wo"].T)[:, 0] - y) ** 2
    _, errs = lax.scan(body, tnp.zeros((2, 16), xs.dtype), (xs, ys))
    return tnp.mean(errs)


def test_loop_bodies_are_optimized_before_their_caller():
    """The bodies of a program's loops go through the pipeline's passes before the
    program's own: the GRU's three weight gradients are hoisted out of the reverse scan
    (they reach its carries through transposes that cancel), the bodies the NumPy tier
    runs hold no transpose of a transpose, and the NumPy tier, the compiled tier, eager
    and finite differences agree to rounding."""
    from tracer import _jit_backend
    rng = np.random.default_rng(3)
    p = {k: rng.normal(size=(16, 20)) / 4 for k in ("wz", "wr", "wh")}
    p["wo"] = rng.normal(size=(1, 16)) / 4
    xs, ys = rng.normal(size=(6, 2, 4)), rng.normal(size=(6, 2))
    vg = tracer.value_and_grad(_gru_loss)
    closed = closed_of(vg, p, xs, ys)
    opt = pipeline.optimize(closed)
    (back,) = [e for e in _scans(opt) if e.params["reverse"]]
    (before,) = [e for e in _scans(closed) if e.params["reverse"]]
    assert back.params["num_carry"] == before.params["num_carry"] - 3
    for scan in _scans(opt):
        body = scan.params["jaxpr"].jaxpr
        producer = {v: e for e in body.eqns for v in e.outvars}
        assert not [e for e in body.eqns if e.primitive.name == "transpose" and
                    getattr(producer.get(e.invars[0]), "primitive", None) is lax.transpose_p]
    leaves, _ = tracer.tree_util.tree_flatten((p, xs, ys))
    ex = _jit_backend.get_executable(tracer.jit(vg).trace(p, xs, ys).jaxpr, "gru")
    ex.ensure_compiled()
    assert ex.state == "ready"
    for a, b in zip(ex.run_numpy(leaves), ex.run_compiled(leaves)):
        # (not bit for bit: compiled tanh and exp are within 1 ulp of NumPy's, section 3
        # of docs/ARCHITECTURE.md)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-16)
    (l1, g1), (l2, g2) = tracer.jit(vg)(p, xs, ys), vg(p, xs, ys)
    np.testing.assert_allclose(float(l1), float(l2), rtol=1e-13)
    for k in p:
        np.testing.assert_allclose(np.asarray(g1[k]), np.asarray(g2[k]), rtol=1e-11,
                                   atol=1e-15)
    eps, (i, j) = 1e-6, (2, 5)
    for k in ("wz", "wh"):
        up, dn = dict(p), dict(p)
        up[k], dn[k] = p[k].copy(), p[k].copy()
        up[k][i, j] += eps
        dn[k][i, j] -= eps
        fd = (float(_gru_loss(up, xs, ys)) - float(_gru_loss(dn, xs, ys))) / (2 * eps)
        np.testing.assert_allclose(float(np.asarray(g1[k])[i, j]), fd, rtol=1e-6, atol=1e-9)


def test_cse_keeps_an_equation_whose_twin_dropped_the_output_it_reads():
    """Two equal multi-output equations, the first with its first output dropped (as
    partial evaluation leaves them) and the second's first output read: CSE must not
    map the read output onto the dropped one."""
    from tracer.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Var
    from tracer.core import ShapedArray
    aval = ShapedArray((4,), np.dtype(np.float64))
    k, v = Var(aval), Var(aval)
    a1, b1, a2, b2 = Var(aval), Var(aval), Var(aval), Var(aval)
    params = dict(dimension=0, is_stable=True, num_keys=1)
    e1 = JaxprEqn(lax.sort_p, [k, v], params, [DropVar(aval), b1])
    e2 = JaxprEqn(lax.sort_p, [k, v], params, [a2, b2])
    closed = ClosedJaxpr(Jaxpr([], [k, v], [e1, e2], [b1, a2]), [])
    out = passes.cse(closed)
    assert all(type(o) is not DropVar for o in out.jaxpr.outvars)
    x, y = np.array([3.0, 1.0, 2.0, 0.5]), np.array([1.0, 2.0, 3.0, 4.0])
    got = eval_jaxpr(out.jaxpr, out.consts, x, y)
    np.testing.assert_array_equal(np.asarray(got[0]), y[np.argsort(x)])
    np.testing.assert_array_equal(np.asarray(got[1]), np.sort(x))
