"""The low-precision types under jit, grad and vmap: ``jit(f)(x)`` equals eager bit for
bit over every recorded edge-value case (element-wise ops, conversions, selects and
element moves run in kernels, lowering.rules.lowp_plan; the rest as host steps through
the eager impls), except for the NaN signs NumPy itself leaves open; grad gives
tangents in the primal's dtype; vmap equals a loop; a bfloat16 MLP trains under grad
and jit, tracking the same MLP in float32 within bfloat16 tolerance."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
import lowp_cases as L

CASES = L.cases()
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(autouse=True)
def _x32():
    tracer.config.update("enable_x64", False)
    yield
    tracer.config.update("enable_x64", True)


def _same_bits(a, b):
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(L.bits(a), L.bits(b))


# NaNs whose sign NumPy does not fix, so that the compiled tier's may differ (NaN at the
# same places; tests/numba_backend/test_tier_equality.py, ULP_BOUNDS and
# TWO_NAN_OPERANDS): NumPy's float16 and float32 loops of these functions (log(-1) is
# -NaN there, log(-NaN) +NaN), and float16 sums and products of two NaNs (NumPy's carry
# the second operand's, kernels the first's).
NAN_SIGN_OPEN = {"exp", "log", "sin", "cos", "tanh", "cbrt", "erf"}
TWO_NAN_OPERANDS = {"add", "mul"}


def _float_view(x):
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.kind in "fV" and not \
        tracer.dtypes.is_lowp_int(x.dtype) else None


def _jit_matches_eager(key, got, want, args):
    got, want = np.atleast_1d(np.asarray(got)), np.atleast_1d(np.asarray(want))
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    diff = L.bits(got) != L.bits(want)
    op = key.split("/")[1]
    fg, fw = _float_view(got), _float_view(want)
    if fg is not None and (op in NAN_SIGN_OPEN or op in TWO_NAN_OPERANDS):
        both = np.isnan(fg) & np.isnan(fw)
        if op in TWO_NAN_OPERANDS:
            both &= np.isnan(_float_view(args[0])) & np.isnan(_float_view(args[1]))
        diff &= ~both
    return not diff.any()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_jit_equals_eager_bits(case):
    key, fn, args, _ = case
    assert _jit_matches_eager(key, tracer.jit(fn)(*args), fn(*args), args), key


def test_jit_of_a_mixed_program_equals_eager():
    x = np.linspace(-3, 3, 37).astype(BF16)

    def f(x):
        y = tnp.exp(x) * x + 1.0
        z = lax.convert_element_type(y, tnp.float8_e4m3fn)
        w = y.astype(tnp.float32) * 2 + tnp.sum(y).astype(tnp.float32)
        i = lax.convert_element_type(x, tnp.int4) + tnp.int4(3)
        return tnp.sum(y), w, z, i, tnp.cumsum(y), tnp.max(y), y.reshape(37, 1).T

    for a, b in zip(f(x), tracer.jit(f)(x)):
        assert _same_bits(a, b)
    text = tracer.jit(f).lower(x).as_text()
    # bfloat16 exp is float32 exp rounded, where the tiers may differ by an ulp; the
    # conversions compile
    assert "host_step exp" in text and "host_step convert_element_type" not in text


def test_jit_scan_and_while_over_bf16_carries():
    def f(x):
        def body(c, v):
            return c * 0.5 + v, c
        return lax.scan(body, x[0], x)

    x = np.linspace(0, 1, 9).astype(BF16)
    for a, b in zip(tracer.tree_util.tree_leaves(f(x)),
                    tracer.tree_util.tree_leaves(tracer.jit(f)(x))):
        assert _same_bits(a, b)
    g = lambda v: lax.while_loop(lambda c: c < 100, lambda c: c * 3, v)  # noqa: E731
    assert _same_bits(tracer.jit(g)(BF16.type(1.1)), g(BF16.type(1.1)))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                                  "float8_e4m3fnuz"])
def test_grad_tangents_in_the_primal_dtype(name):
    dt = L.dtype_of(name)
    x = np.array([0.5, 1.0, 1.5], np.float32).astype(dt)
    f = lambda v: tnp.sum(v * v * 0.5 + tnp.sin(v))  # noqa: E731
    g = tracer.grad(f)(x)
    assert g.dtype == dt
    # d/dx = x + cos(x), each step rounded in the format
    want = (x.astype(np.float32) + np.cos(x.astype(np.float32))).astype(dt).astype(np.float32)
    np.testing.assert_allclose(np.asarray(g).astype(np.float32), want,
                               rtol=2 * float(ml_dtypes.finfo(dt).eps))
    assert _same_bits(tracer.jit(tracer.grad(f))(x), g)
    _, t = tracer.jvp(lambda v: tnp.exp(v), (x,), (np.ones(3, dt),))
    assert t.dtype == dt


def test_grad_of_integer_inputs_is_float0():
    x = np.array([1, 2], ml_dtypes.int4)
    g = tracer.grad(lambda i, v: tnp.sum(i.astype(tnp.float32) * v), argnums=(0, 1),
                    allow_int=True)(x, np.float32([1, 1]))
    assert g[0].dtype == tracer.dtypes.float0 and g[1].dtype == np.float32


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "int4", "uint2"])
def test_vmap_equals_a_loop(name):
    dt = L.dtype_of(name)
    x = np.resize(L.from_bits(L.DATA[f"{name}/x"], dt), 16).reshape(4, 4)
    if name in L.FLOATS:
        f = lambda r: lax.mul(lax.add(r, r[::-1]), r) - tnp.sum(r)  # noqa: E731
    else:
        f = lambda r: lax.bitwise_xor(lax.add(r, r[::-1]), lax.shift_left(r, r))  # noqa: E731
    looped = np.stack([np.asarray(f(r)) for r in x])
    assert _same_bits(tracer.vmap(f)(x), looped)
    assert _same_bits(tracer.jit(tracer.vmap(f))(x), looped)


def _mlp_params(rng, dt):
    sizes = [(8, 32), (32, 32), (32, 1)]
    return [(rng.normal(0, 1 / np.sqrt(m), (m, n)).astype(np.float32).astype(dt),
             np.zeros(n, np.float32).astype(dt)) for m, n in sizes]


def _loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = tnp.dot(h, w) + b
        if i < len(params) - 1:
            h = tnp.tanh(h)
    return tnp.mean((h[:, 0] - y) ** 2)


def test_bf16_mlp_trains_tracking_float32():
    rng = np.random.default_rng(0)
    x32 = rng.normal(size=(64, 8)).astype(np.float32)
    y32 = np.sin(x32.sum(1)).astype(np.float32)
    p32 = _mlp_params(rng, np.float32)
    pbf = [(w.astype(BF16), b.astype(BF16)) for w, b in p32]
    xbf, ybf = x32.astype(BF16), y32.astype(BF16)

    def step_fn(params, x, y):
        loss, g = tracer.value_and_grad(_loss)(params, x, y)
        lr = 0.1
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, g)], loss

    step = tracer.jit(step_fn)

    l32, lbf = [], []
    for _ in range(8):
        p32, a = step(p32, x32, y32)
        pbf, b = step(pbf, xbf, ybf)
        l32.append(float(a))
        lbf.append(float(b))
    assert all(w.dtype == BF16 and b.dtype == BF16 for w, b in pbf)
    # training makes progress in both, and bf16 tracks f32 within bf16's resolution
    assert l32[-1] < 0.8 * l32[0] and lbf[-1] < 0.8 * lbf[0]
    np.testing.assert_allclose(lbf, l32, rtol=0.05)
    # the jitted step equals the eager one bit for bit
    for a, b in zip(tracer.tree_util.tree_leaves(step_fn(pbf, xbf, ybf)),
                    tracer.tree_util.tree_leaves(step(pbf, xbf, ybf))):
        assert _same_bits(a, b)


def test_grad_through_preferred_element_type_products():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 5)).astype(np.float32).astype(BF16)
    dn = (((1,), (0,)), ((), ()))
    f = lambda x, y: tnp.sum(lax.dot_general(x, y, dn, preferred_element_type=np.float32))  # noqa: E731
    gx, gy = tracer.grad(f, argnums=(0, 1))(a, a.T.copy())
    assert gx.dtype == BF16 and gy.dtype == BF16
    # d/dx sum(x @ y) = row sums of y, broadcast; here y = a.T
    want = np.broadcast_to(a.astype(np.float32).sum(0), (4, 5)).astype(BF16)
    np.testing.assert_array_equal(np.asarray(gx).view(np.uint16), want.view(np.uint16))
    lhs, rhs = a.reshape(1, 1, 4, 5), np.ones((1, 1, 2, 2), np.float32).astype(BF16)
    h = lambda l, r: tnp.sum(lax.conv_general_dilated(  # noqa: E731
        l, r, (1, 1), "VALID", preferred_element_type=np.float32))
    gl, gr = tracer.grad(h, argnums=(0, 1))(lhs, rhs)
    assert gl.dtype == BF16 and gr.dtype == BF16
    # d/drhs[0,0,0,0] = the sum of the lhs window it meets: lhs[:3, :4]
    assert float(np.asarray(gr)[0, 0, 0, 0]) == float(
        np.float32(a.astype(np.float32)[:3, :4].sum()).astype(BF16))
    assert _same_bits(tracer.jit(tracer.grad(h, argnums=(0, 1)))(lhs, rhs)[1], gr)


def test_vmap_of_cond_and_higher_derivatives():
    a = np.random.default_rng(4).normal(size=(4, 5)).astype(np.float32).astype(BF16)
    c = lambda x: lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x)  # noqa: E731
    assert _same_bits(tracer.vmap(c)(a), np.stack([np.asarray(c(r)) for r in a]))
    assert tracer.hessian(lambda v: tnp.sum(v ** 3))(a[0]).dtype == BF16


# ------------------------------ compiled kernels, not host steps ----------------------------

F8 = [n for n in L.FLOATS if n not in ("bfloat16", "float8_e8m0fnu")]


def _eager(f, *args):
    """``f`` run eagerly on tracer Arrays (the reference; NumPy arrays would meet
    ml_dtypes' own arithmetic)."""
    return f(*[tnp.asarray(a) for a in args])


def _program(f, *args):
    from lowering import pipeline
    return pipeline.lower(tracer.make_jaxpr(f)(*args))


def _all_bits(name):
    """Every bit pattern of a one-byte format (float4: its 16), or bfloat16's edge
    values (tests/data: max, min normal, subnormals, NaNs, infinities, signed zeros)
    with every 257th pattern."""
    dt = L.dtype_of(name)
    if dt.itemsize == 2:
        edge = CASES[[c[0] for c in CASES].index(f"{name}/neg")][2][0]
        return np.concatenate([edge, np.arange(0, 65536, 257, dtype=np.uint16).view(dt)])
    n = 16 if name == "float4_e2m1fn" else 256
    return np.arange(n, dtype=np.uint8).view(dt)


def _chain_operands(name):
    x = _all_bits(name)
    y = np.roll(x, 7)
    # no NaN meets another NaN: which one's sign the result takes is open (NumPy's
    # float16 loops take the second's, kernels the first's)
    return x, np.where(np.isnan(y.astype(np.float32)), np.asarray(1.5, x.dtype), y)


def _chain(x, y):
    # each op rounds to the format: a fused chain of them, a float32 detour through
    # converts, a select and a transpose (element moves keep NaN payloads)
    z = (x * y + x) / y - x
    w = (z.astype(tnp.float32) * 3.0 + y.astype(tnp.float32)).astype(x.dtype)
    m = tnp.where(x > y, w, tnp.maximum(z, -x))
    moved = tnp.where(x != x, x, y).reshape(-1, 1).T[0, ::-1]    # every NaN pattern
    return m, tnp.abs(w) * y, m.reshape(-1, 1).T[0, ::-1], tnp.concatenate([moved, x])


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "int4"])
def test_element_wise_programs_have_no_host_steps(name):
    dt = L.dtype_of(name)
    x = np.arange(-6, 6).astype(dt)
    if name == "int4":
        # (lax's bitwise ops: tracer.numpy's | and ^ give int8 eagerly on int4)
        f = lambda a, b: (a * b + a - lax.bitwise_xor(b, a),
                          lax.bitwise_or(lax.shift_right_arithmetic(a, b), b), a < b)
    else:
        f = lambda a, b: (tnp.sqrt(tnp.abs(a)) * b + a, tnp.floor(a / b), a.astype(tnp.float32))
    program = _program(f, x, x[::-1])
    names = [type(s).__name__ for s in program.steps]
    assert names and set(names) == {"KernelStep"}, program.pretty()
    for a, b in zip(tracer.jit(f)(x, x[::-1]), _eager(f, x, x[::-1])):
        assert _same_bits(a, b), name


@pytest.mark.parametrize("name", [n for n in L.FLOATS if n != "float8_e8m0fnu"])
def test_fused_chains_round_after_every_op(name):
    x, y = _chain_operands(name)
    program = _program(_chain, x, y)
    # (kernels, and a reshape that is a view)
    assert not [s for s in program.steps if type(s).__name__ == "HostStep"], program.pretty()
    for a, b in zip(tracer.jit(_chain)(x, y), _eager(_chain, x, y)):
        assert _same_bits(a, b), name


@pytest.mark.parametrize("name", L.FLOATS + L.INTS)
def test_conversions_between_every_pair_compile_bit_exact(name):
    """Every format to every other, and to float64/float32/float16/int8/int32/uint8/bool
    and from float32/float64/int32/bool, over all its bit patterns (bfloat16: its edges
    and a stride), in one kernel per source; mixed with float32 operands."""
    dt = L.dtype_of(name)
    x = _all_bits(name) if name in L.FLOATS else np.arange(-8, 8).astype(dt)
    targets = [L.dtype_of(n) for n in L.FLOATS + L.INTS] + [
        np.dtype(t) for t in (np.float64, np.float32, np.float16, np.int8, np.int32, np.uint8,
                              np.bool_)]
    targets = [t for t in targets if t != dt]
    rng = np.random.default_rng(3)
    f32 = np.concatenate([rng.normal(0, 30, x.size - 8).astype(np.float32),
                          np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-9, 448.0, 464.0],
                                   np.float32)])[:x.size]

    def f(x, f32):
        outs = [lax.convert_element_type(x, t) for t in targets]
        outs += [lax.convert_element_type(f32, dt),
                 lax.convert_element_type(f32.astype(tnp.float64) * 1.0000001, dt),
                 lax.convert_element_type((f32 * 5).astype(tnp.int32), dt),
                 lax.convert_element_type(f32 > 0, dt)]
        return outs

    # bfloat16 -> float16 stays a host step (signalling NaN payloads, lowp_plan)
    program = _program(f, x, f32)
    hosts = [s for s in program.steps if type(s).__name__ == "HostStep"]
    assert len(hosts) == (1 if name == "bfloat16" else 0), program.pretty()
    for k, (a, b) in enumerate(zip(tracer.jit(f)(x, f32), _eager(f, x, f32))):
        assert _same_bits(a, b), (name, k)


def test_kernels_with_format_tables_load_from_the_disk_cache(tmp_path):
    """Kernels that read the float8 tables (numba_backend.scalar, frozen into the
    compiled code) load from Numba's disk cache in a fresh process: nothing compiles."""
    import os
    import pathlib
    import subprocess
    import sys
    import textwrap
    root = str(pathlib.Path(__file__).resolve().parents[2])
    script = textwrap.dedent("""
        import numpy as np
        import tracer, tracer.numpy as tnp
        x = np.arange(256, dtype=np.uint8).view(tnp.float8_e4m3fn)
        f = tracer.jit(lambda x: (x * x + x).astype(tnp.float8_e5m2), )
        print(np.asarray(f(x)).view(np.uint8).tolist())
        from numba_backend import cache
        print(cache.stats["compiled"], cache.stats["cache_loads"])
    """)
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path), TRACER_JIT_COMPILE="sync",
               PYTHONPATH=root)
    env.pop("NUMBA_CACHE_DIR", None)
    run = lambda: subprocess.run([sys.executable, "-c", script], env=env, cwd=root,
                                 capture_output=True, text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stderr[-3000:]
    second = run()
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.splitlines()[0] == first.stdout.splitlines()[0]
    compiled, loads = map(int, second.stdout.splitlines()[1].split())
    assert compiled == 0 and loads >= 1, second.stdout
    x = np.arange(256, dtype=np.uint8).view(L.dtype_of("float8_e4m3fn"))
    with np.errstate(over="ignore", invalid="ignore"):    # (the format's inf and NaN)
        want = ((x.astype(np.float16) * x.astype(np.float16)).astype(x.dtype)
                .astype(np.float16) + x.astype(np.float16)).astype(x.dtype).astype(
                    L.dtype_of("float8_e5m2"))
    assert eval(second.stdout.splitlines()[0]) == L.bits(want).tolist()


def test_python_kernels_compute_the_same_bits():
    """The debug_kernels mode runs the generated kernels as plain Python: the scalar
    helpers and tables they call give the compiled kernels' bits."""
    x, y = _chain_operands("float8_e4m3fnuz")
    b, c = _chain_operands("bfloat16")
    i4 = np.arange(-8, 8).astype(L.dtype_of("int4"))
    f = lambda x, y, b, c, i: (_chain(x, y), _chain(b, c), i * i - i,
                               x.astype(tnp.float8_e8m0fnu))
    want = tracer.tree_util.tree_leaves(tracer.jit(f)(x, y, b, c, i4))
    tracer.config.update("debug_kernels", True)
    try:
        got = tracer.tree_util.tree_leaves(tracer.jit(lambda *a: f(*a))(x, y, b, c, i4))
    finally:
        tracer.config.update("debug_kernels", False)
    for a, w in zip(got, want):
        assert _same_bits(a, w)


def test_rounding_helpers_equal_ml_dtypes_over_float32_bit_patterns():
    """numba_backend.scalar's conversions, compiled, against eager's (``narrow``: ml_dtypes)
    on every float32 sign/exponent/top-16-mantissa-bits pattern with the low bits at
    0, at the halfway point, and on either side of it (ties, subnormals, overflow,
    NaNs, zeros), and on float64 values just off those."""
    import numba
    from lax.utils import narrow
    from numba_backend import scalar as rt
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    x32 = np.concatenate([hi | np.uint32(low) for low in
                          (0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1000, 0x0FFF, 0x1001)]
                         ).view(np.float32)
    with np.errstate(invalid="ignore"):      # (the NaN patterns among them)
        x64 = np.concatenate([x32.astype(np.float64) * (1 + 2.0 ** -40),
                              x32.astype(np.float64) * (1 - 2.0 ** -40)])

    @numba.njit
    def run(x, kind, p, emin, enc, dec, store):
        out = np.empty(x.size, np.uint16)
        for i in range(x.size):
            if kind == 0:
                out[i] = rt.bf16_store(rt.bf16_round(np.float64(x[i])))
            elif kind == 1:
                out[i] = rt.bf16_store(rt.bf16_round32(np.float32(x[i])))
            elif kind == 2:
                out[i] = rt.e8m0_store(rt.e8m0_round(np.float64(x[i])))
            else:
                out[i] = rt.f8_store(rt.f8_round(np.float64(x[i]), p, emin, enc, dec), store)
        return out

    dummy = rt.ENC_float8_e4m3fn
    with np.errstate(all="ignore"):
        for x in (x32, x64):
            want = narrow(x, ml_dtypes.bfloat16).view(np.uint16)
            assert np.array_equal(run(x, 0, 0, 0, dummy, rt.DEC_float8_e4m3fn, dummy), want)
            if x.dtype == np.float32:
                assert np.array_equal(run(x, 1, 0, 0, dummy, rt.DEC_float8_e4m3fn, dummy),
                                      want)
            want = narrow(x, ml_dtypes.float8_e8m0fnu).view(np.uint8)
            assert np.array_equal(run(x, 2, 0, 0, dummy, rt.DEC_float8_e4m3fn, dummy), want)
            for name in F8:
                dt = L.dtype_of(name)
                fi = ml_dtypes.finfo(dt)
                got = run(x, 3, fi.nmant + 1, fi.minexp, getattr(rt, f"ENC_{name}"),
                          getattr(rt, f"DEC_{name}"), getattr(rt, f"STORE_{name}"))
                assert np.array_equal(got, narrow(x, dt).view(np.uint8)), name
