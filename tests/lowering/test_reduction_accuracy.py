"""Compiled float reductions add up in NumPy's order (numba_backend.pairwise): pairwise
along the contiguous run of reduced axes, element by element across the others, so
eager, the NumPy tier, the serial and the parallel kernel agree bit for bit, and sums are
as accurate as NumPy's. Exact references are math.fsum; NumPy's order itself is checked
against a Python transcription of its pairwise_sum (loops_utils.h.src)."""
import math

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from numba_backend import executor, pairwise
from tracer import lax

U32 = 2.0 ** -24          # float32 unit roundoff


def assert_same(got, want):
    """Same dtype, shape and bits (signed zeros distinct; NaNs at the same places)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if got.dtype.kind == "c":
        assert_same(got.real, want.real)
        assert_same(got.imag, want.imag)
    elif got.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
        np.testing.assert_array_equal(got[ok].view(u), want[ok].view(u))
    else:
        np.testing.assert_array_equal(got, want)


def assert_jit_is_eager(f, *args):
    want = f(*args)
    got = tracer.jit(f)(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_same(g, w)
    return got


def data(rng, shape, dtype, scale=3.0):
    x = rng.standard_normal(shape) * scale + 0.1
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x).astype(dtype)


def numpy_pairwise(a):
    """NumPy's pairwise_sum transcribed (real dtypes), to pin the order independently of
    np.sum and of the compiled helper."""
    T = a.dtype.type
    n = a.size
    if n < 8:
        res = T(-0.0)
        for v in a:
            res = T(res + v)
        return res
    if n <= 128:
        r = [T(v) for v in a[:8]]
        i = 8
        while i < n - n % 8:
            r = [T(r[j] + a[i + j]) for j in range(8)]
            i += 8
        res = T(T(T(r[0] + r[1]) + T(r[2] + r[3])) + T(T(r[4] + r[5]) + T(r[6] + r[7])))
        for v in a[i:]:
            res = T(res + v)
        return res
    h = n // 2
    h -= h % 8
    return T(numpy_pairwise(a[:h]) + numpy_pairwise(a[h:]))


def pairwise_bound(x, u=U32):
    """An error bound of pairwise summation: each element goes through at most
    7 (leaf tail) + 15 (accumulator) + 3 (lane tree) + log2(n / 64) additions."""
    n = max(x.size, 1)
    depth = 25 + max(0, math.ceil(math.log2(n / 64)))
    return depth * u * math.fsum(abs(float(v)) for v in np.asarray(x, np.float64).ravel())


@pytest.fixture
def parallel(monkeypatch):
    """Runs with the parallel kernel variant (any size, even with one Numba thread)."""
    monkeypatch.setattr(executor, "_parallel_ok", lambda: True)
    old = tracer.config.parallel_threshold
    tracer.config.update("parallel_threshold", 1)
    yield
    tracer.config.update("parallel_threshold", old)


# ------------------------------------------ accuracy ------------------------------------------

def test_a_million_tenths_sum_like_numpy():
    x = tnp.full(10**6, 0.1, tnp.float32)
    got = float(tracer.jit(tnp.sum)(x))
    exact = math.fsum([float(np.float32(0.1))] * 10**6)
    assert abs(got - exact) <= pairwise_bound(np.asarray(x))      # 0.16; one at a time: 22
    assert_same(tracer.jit(tnp.sum)(x), np.sum(np.asarray(x)))
    assert got == 100000.0078125


def test_fused_transcendental_sum_is_accurate(rng):
    x = rng.uniform(-10, 10, 10**6).astype(np.float32)
    f = tracer.jit(lambda x: tnp.sum(tnp.sin(x) * 2 + 1))
    sin = np.sin(x.astype(np.float64))
    terms = sin * 2 + 1
    exact = math.fsum(terms)
    # each float32 term is within a few roundings of the exact one (sin within an ulp)
    tol = pairwise_bound(terms) + 4 * U32 * math.fsum(2 * np.abs(sin) + 1)
    assert abs(float(f(x)) - exact) <= tol                   # 2.4; one at a time: ~100
    # without transcendentals the fused sum is the eager one, bit for bit
    assert_jit_is_eager(lambda x: tnp.sum(x * x * 0.5 - x + 1), x)


def test_order_is_numpys_pairwise_sum(rng):
    for n in (0, 1, 7, 8, 9, 127, 128, 129, 255, 1000, 1031):
        x = data(rng, (n,), np.float32)
        want = np.float32(0) + numpy_pairwise(x)
        assert_same(np.sum(x), want)
        assert_same(tracer.jit(tnp.sum)(x), want)
        # the helper itself, compiled and in Python (the debug_kernels mode)
        assert_same(np.float32(0) + pairwise.pairwise(x, 0, n), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.complex64])
def test_computed_sums_at_the_one_buffer_boundary(rng, dtype):
    # a run of computed elements that fits one buffer (pairwise.BLOCK) is filled and
    # summed without the recursion's walk (codegen): the same bits as NumPy's on both
    # sides of the boundary, for runs over one dim and over several (and a kept dim)
    n = pairwise.BLOCK
    for shape, axis in [((n - 1,), None), ((n,), None), ((n + 1,), None), ((9,), None),
                        ((3, 8, 32), (1, 2)), ((3, 8, 33), (1, 2)), ((5, n), 1),
                        ((5, n + 3), 1), ((4, 1, 7), (1, 2))]:
        x = data(rng, shape, dtype)
        f = lambda x: tnp.sum(x * 2 - 1, axis=axis)  # noqa: E731
        assert_jit_is_eager(f, x)
        run = int(np.prod(shape[1:] if axis is not None else shape))
        text = tracer.jit(f).lower(x).as_text()
        assert ("fits one buffer" in text) == (run <= n), (shape, text[-1500:])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_short_runs_are_summed_in_place_in_numpys_order(rng, dtype):
    # a run of fewer than eight reals (NumPy's small leaf: from -0.0, one element at a
    # time) is summed where the kernel calls the helper (pairwise._llvm_pairwise_entry,
    # always inlined), longer ones by the recursive function: the same bits as NumPy's,
    # with signed zeros, for input and computed runs, on both sides of eight reals, and
    # in a loop body (fori_loop: an n-body step's three coordinates per pair)
    for n in range(1, 10):
        x = data(rng, (6, n), dtype)
        x[0] = -0.0
        x[1, :1] = -0.0
        x[2] *= 1e-30
        assert_jit_is_eager(lambda x: (tnp.sum(x, axis=1), tnp.sum(x * 2 - 1, axis=1),
                                       tnp.sum(x + x, axis=0)), x)
    pos = data(rng, (16, 3), np.float64)

    def step(i, p):
        d = p[None, :, :] - p[:, None, :]
        return p + 1e-3 * tnp.sum(d * tnp.sum(d * d, axis=-1, keepdims=True), axis=1)
    want = pos
    for i in range(5):
        want = step(i, want)
    assert_same(tracer.jit(lambda p: lax.fori_loop(0, 5, step, p))(pos), want)


def test_cumsum_is_numpys_running_sum(rng):
    # a running sum as NumPy's (JAX's tree-shaped scan differs): float32 stops at 2**24,
    # float16 at 2048
    x = np.concatenate([[2.0 ** 24], np.ones(100)]).astype(np.float32)
    got = assert_jit_is_eager(tnp.cumsum, x)
    assert float(np.asarray(got)[-1]) == 2.0 ** 24
    got = assert_jit_is_eager(tnp.cumsum, np.ones(3000, np.float16))
    assert float(np.asarray(got)[-1]) == 2048.0
    y = data(rng, (40, 300), np.float32)
    assert_jit_is_eager(lambda y: (tnp.cumsum(y, axis=1), tnp.cumsum(y, axis=0),
                                   tnp.cumprod(1 + y * 1e-3, axis=1)), y)


# ------------------------------------ eager == compiled ------------------------------------

# (shape, axis): trailing, leading, middle and several axes, extent-1 dims (NumPy's
# iterator drops them, which changes its order), rows shorter than a leaf
LAYOUTS = [
    ((100003,), None), ((301, 517), None), ((301, 517), 1), ((301, 517), 0),
    ((7, 300, 41), 1), ((7, 300, 41), (0, 2)), ((7, 300, 41), (1, 2)), ((7, 300, 41), (0, 1)),
    ((3000, 1), 0), ((1, 3000), 1), ((300, 1, 50), (0, 2)), ((300, 1, 50), 0),
    ((300, 50, 1), (0, 1)), ((2000, 5), 1),
]
# other dtypes take the same code paths: a few layouts each (compiles are the cost here)
FEW = [LAYOUTS[i] for i in (0, 2, 3, 5, 8)]


@pytest.mark.parametrize("dtype, layouts", [(np.float32, LAYOUTS), (np.float64, FEW),
                                            (np.float16, FEW), (np.complex64, FEW)],
                         ids=["float32", "float64", "float16", "complex64"])
def test_sums_over_axes_are_eager_bit_for_bit(rng, dtype, layouts):
    for shape, axis in layouts:
        x = data(rng, shape, dtype)
        assert_jit_is_eager(lambda x: tnp.sum(x, axis=axis), x)
    # computed elements (buffered by the kernel), keepdims
    x = data(rng, (301, 517), dtype)
    assert_jit_is_eager(lambda x: (tnp.sum(x * 2, axis=1, keepdims=True),
                                   tnp.sum(x * 2, keepdims=True)), x)


def test_means_variances_and_dot_like_sums(rng):
    x = data(rng, (64, 1001), np.float32)
    y = data(rng, (64, 1001), np.float32)
    assert_jit_is_eager(lambda x, y: (tnp.mean(x, axis=1), tnp.mean(x, axis=0), tnp.mean(x),
                                      tnp.var(x, axis=1), tnp.var(x, axis=0),
                                      tnp.sum(x * y, axis=-1), tnp.sum(x[0] * y[0])), x, y)
    # several sums of one loop, with another reduction and a stored element-wise output
    z = data(rng, (200003,), np.float64)
    assert_jit_is_eager(lambda z: (tnp.sum(z), tnp.sum(z * z), tnp.max(z), z * 2,
                                   tnp.argmax(z)), z)
    assert_jit_is_eager(lambda x: (tnp.sum(x, axis=1), tnp.argmin(x, axis=1)), x)


def test_products_multiply_in_numpys_order(rng):
    for dtype in (np.float32, np.float64, np.float16):
        x = (1 + data(rng, (300, 40), np.float32) * 1e-3).astype(dtype)
        assert_jit_is_eager(lambda x: (tnp.prod(x, axis=0), tnp.prod(x, axis=1),
                                       tnp.prod(x.reshape(-1))), x)


def test_float16_sums_round_where_numpy_does(rng):
    # NumPy rounds to float16 after each row of an axis-0 sum, after each run otherwise
    x = data(rng, (2000, 3), np.float16)
    got = assert_jit_is_eager(lambda x: (tnp.sum(x, axis=0), tnp.sum(x, axis=1),
                                         tnp.sum(x)), x)
    per_row = np.zeros(3, np.float16)
    for row in x:
        per_row = (per_row.astype(np.float32) + row.astype(np.float32)).astype(np.float16)
    assert_same(got[0], per_row)


def test_empty_single_and_signed_zero_sums():
    for shape, axis in [((3, 0), 1), ((0,), None), ((0, 4), 0), ((1,), None), ((1, 1), 0),
                        ((5, 1), 1)]:
        x = np.full(shape, -0.0, np.float32)
        got = assert_jit_is_eager(lambda x: tnp.sum(x, axis=axis), x)
        assert not np.any(np.signbit(np.asarray(got)))     # NumPy: 0 + (-0.0) = +0.0
    assert_jit_is_eager(lambda x: (tnp.sum(x), tnp.prod(x)), np.array([2.5], np.float32))


def test_nan_and_inf_propagate(rng):
    x = data(rng, (40, 1000), np.float32)
    x[3, 17] = np.nan
    x[5, 2] = np.inf
    x[6, 900], x[6, 901] = np.inf, -np.inf
    x[7, :] = np.inf
    got = assert_jit_is_eager(lambda x: (tnp.sum(x, axis=1), tnp.sum(x, axis=0), tnp.sum(x)),
                              x)
    rows = np.asarray(got[0])
    assert np.isnan(rows[3]) and rows[5] == np.inf and np.isnan(rows[6]) and rows[7] == np.inf


# ------------------------------ tiers, variants, thread counts ------------------------------

CASES = [
    (lambda x: tnp.sum(x), (1_000_003,)),                     # whole array, read in place
    (lambda x: tnp.sum(x * x), (1001, 1003)),                 # two dims, computed
    (lambda x: (tnp.sum(x * 3, axis=1), tnp.max(x, axis=1)), (600, 1500)),   # rows
    (lambda x: tnp.sum(x, axis=(0, 2)), (30, 40, 600)),       # runs added across a dim
    (lambda x: tnp.sum(x, axis=(1, 3)), (20, 10, 30, 200)),   # .., in parallel over dim 0
    (lambda x: (tnp.sum(x), tnp.min(x), x - 1), (300_007,)),  # with a merged reduction
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_numpy_tier_serial_and_parallel_agree(rng, monkeypatch, case):
    f, shape = CASES[case]
    x = data(rng, shape, np.float32)
    jf = tracer.jit(f)
    try:
        tracer.config.update("jit_compile", "none")
        numpy_tier = jf(x)
    finally:
        tracer.config.update("jit_compile", "sync")
    old = tracer.config.parallel_threshold
    tracer.config.update("parallel_threshold", 2 ** 62)
    try:
        serial = jf(x)
    finally:
        tracer.config.update("parallel_threshold", old)
    monkeypatch.setattr(executor, "_parallel_ok", lambda: True)
    tracer.config.update("parallel_threshold", 1)
    try:
        par = jf(x)
        import numba
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            par1 = jf(x)
        finally:
            numba.set_num_threads(threads)
    finally:
        tracer.config.update("parallel_threshold", old)
    want = f(x)
    for outs in (numpy_tier, serial, par, par1):
        for g, w in zip(outs if isinstance(outs, tuple) else (outs,),
                        want if isinstance(want, tuple) else (want,)):
            assert_same(g, w)
    ex = jf.lower(x)._executable()
    for g, w in zip(ex.run_numpy([x]), want if isinstance(want, tuple) else (want,)):
        assert_same(g, w)
    if ex.program.kernels()[0].parallel_dim is not None:
        assert ex.handles[0].ready_parallel()      # the parallel variant did run
    else:                                          # a reduced outermost loop: serial
        assert shape == (30, 40, 600)
    assert "pw.pairwise" in ex.sources[0].text


def test_parallel_kernels_split_the_recursion_not_the_array(rng, parallel):
    x = data(rng, (2_000_000,), np.float32)
    src = tracer.jit(tnp.sum).lower(x)._executable().sources[0].text
    par = src.split("def kernel_par")[1]
    assert "pw.frontier(" in par and "pw.combine_top(" in par and "prange(nch)" in par
    assert_jit_is_eager(tnp.sum, x)
