"""The Numba backend's pieces: scalar helpers against NumPy (float16 conversions over all
bit patterns), vectorizable math against NumPy and float64 references, the source inliner,
generated-source goldens, and the kernel cache's robustness."""
import os

import numba
import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from lowering import pipeline
from numba_backend import cache, codegen, inliner, scalar, vecmath


# ------------------------------------------- float16 ---------------------------------------

@numba.njit(cache=False)
def _f16_roundtrip(bits, doubles, out_f32, out_bits):
    for i in range(bits.shape[0]):
        out_f32[i] = scalar.f16_to_f32(bits[i])
    for i in range(doubles.shape[0]):
        out_bits[i] = scalar.f16_bits(doubles[i])


def test_float16_conversions_match_numpy():
    bits = np.arange(65536, dtype=np.uint16)
    rng = np.random.default_rng(0)
    h = bits.view(np.float16).astype(np.float64)
    h = h[np.isfinite(h)]
    mids = (np.sort(h)[1:] + np.sort(h)[:-1]) / 2          # exact ties: round to even
    doubles = np.concatenate([
        h, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
        rng.normal(size=20000) * 10.0 ** rng.uniform(-9, 6, 20000),
        [65504.0, 65519.99, 65520.0, 1e6, -1e6, np.inf, -np.inf, np.nan, -np.nan, 0.0,
         -0.0, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 1e-300]])
    out_f32 = np.empty(bits.shape, np.float32)
    out_bits = np.empty(doubles.shape, np.uint16)
    _f16_roundtrip(bits, doubles, out_f32, out_bits)
    ref = bits.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out_f32.view(np.uint32)[~np.isnan(ref)],
                                  ref.view(np.uint32)[~np.isnan(ref)])
    assert np.isnan(out_f32[np.isnan(ref)]).all()
    with np.errstate(over="ignore"):
        ref_bits = doubles.astype(np.float16).view(np.uint16)
    nan = np.isnan(doubles)
    np.testing.assert_array_equal(out_bits[~nan], ref_bits[~nan])
    assert np.isnan(out_bits[nan].view(np.float16)).all()


# ------------------------------------------- vecmath ---------------------------------------

@numba.njit(cache=False, error_model="numpy")
def _vm32(x, out):
    for i in range(x.shape[0]):
        out[0, i] = vecmath.exp_f32(x[i])
        out[1, i] = vecmath.log_f32(x[i])
        out[2, i] = vecmath.sin_f32(x[i])
        out[3, i] = vecmath.cos_f32(x[i])
        out[4, i] = vecmath.tanh_f32(x[i])


@numba.njit(cache=False, error_model="numpy")
def _vm64(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.exp_f64(x[i])


def _ulps(got, want, dtype):
    got, want = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) | both_nan
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        d = np.where(same, 0.0, np.abs(got - want) / spacing)
    return np.nan_to_num(d, nan=np.inf)


def test_float32_vecmath_within_an_ulp_of_the_correctly_rounded_result():
    rng = np.random.default_rng(1)
    x = np.concatenate([
        rng.normal(size=50000) * 10,
        np.sign(rng.normal(size=50000)) * 10.0 ** rng.uniform(-40, 38.5, 50000),
        [0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, np.nan, 88.72, 88.73, -103.9, -104.0,
         -87.4, 1.5707964, 3.1415927, 1e30, 3.4e38, 2.0 ** 19, 12345.678]]).astype(np.float32)
    out = np.empty((5, x.size), np.float32)
    _vm32(x, out)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        refs = [np.exp(x64), np.log(x64), np.sin(x64), np.cos(x64), np.tanh(x64)]
        nps = [np.exp(x), np.log(x), np.sin(x), np.cos(x), np.tanh(x)]
    for name, got, ref, npv in zip(["exp", "log", "sin", "cos", "tanh"], out, refs, nps):
        with np.errstate(over="ignore"):
            exact = ref.astype(np.float32)
        assert _ulps(got, exact, np.float32).max() <= 1, name
        assert _ulps(got, npv, np.float32).max() <= 3, name


@numba.njit(cache=False, error_model="numpy")
def _exp32(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.exp_f32(x[i])


def test_float32_exp_within_an_ulp_on_a_dense_sample_of_all_float32():
    # float32-native (FMA); checked over all 2**32 patterns once (max 0.785 ulp of the exact
    # value); here every 257th pattern, the overflow/underflow/subnormal boundaries and
    # their neighbours, and the specials, against float64 exp rounded to float32
    x = np.arange(0, 2 ** 32, 257, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edge = np.float32([88.72283, 88.72284, 89.0, -87.33654, -87.33655, -103.27893,
                       -103.97208, -103.97209, -104.0, -149 * np.log(2), 0.34657359,
                       -0.34657359, 1e-45, -1e-45, 0.0, -0.0, np.inf, -np.inf, np.nan])
    x = np.concatenate([x, edge, np.nextafter(edge, np.float32(np.inf)),
                        np.nextafter(edge, np.float32(-np.inf))])
    out = np.empty_like(x)
    _exp32(x, out)
    with np.errstate(all="ignore"):
        ref = np.exp(x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(x)
    assert np.isnan(out[nan]).all()
    assert _ulps(out[~nan], ref[~nan], np.float32).max() <= 1
    assert out[x == np.inf][0] == np.inf and out[x == -np.inf][0] == 0.0
    assert (out[x == 0] == 1.0).all()
    sub = (ref > 0) & (ref < np.finfo(np.float32).tiny)
    assert sub.sum() > 100 and (out[sub] > 0).all()          # rounded, not flushed


@numba.njit(cache=False, error_model="numpy")
def _sincos32(x, out):
    for i in range(x.shape[0]):
        out[0, i] = vecmath.sin_f32(x[i])
        out[1, i] = vecmath.cos_f32(x[i])


def _trig_edges():
    k = np.arange(1, 4000, dtype=np.float64)
    near = np.concatenate([k * (np.pi / 2), 2.0 ** np.arange(-6, 128) * (np.pi / 2)])
    near = near[near < 3.4e38].astype(np.float32)
    edge = np.float32([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38, 2.0 ** -126,
                       2.0 ** -12, -2.0 ** -12, 0.7853982, 2.0 ** 17, -2.0 ** 17, 1e30,
                       3.4028235e38, -3.4028235e38, 16367173.0 * 2.0 ** 72, np.inf, -np.inf,
                       np.nan, -np.nan,
                       # worst cases of the all-inputs run, and two that a reduction of
                       # negative arguments rounding their tiny parts got wrong
                       3.9012694, 7.080254, 5.798808e16, 1.5994128e15, -4.399877e10,
                       -2.1999385e10])
    x = np.concatenate([near, -near, edge])
    with np.errstate(over="ignore"):
        return np.concatenate([x, np.nextafter(x, np.float32(np.inf)),
                               np.nextafter(x, np.float32(-np.inf))])


def test_float32_sin_cos_within_an_ulp_on_a_dense_sample_of_all_float32():
    # float32-native (FMA); checked over all 2**32 patterns once (max 0.73 ulp of the exact
    # value for both); here every 263rd pattern, the floats nearest multiples of pi/2 and
    # their neighbours, the fast path's bound 2**17, the specials, against float64 sin and
    # cos rounded to float32
    x = np.arange(0, 2 ** 32, 263, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, _trig_edges()])
    out = np.empty((2, x.size), np.float32)
    _sincos32(x, out)
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
        refs = [np.sin(x64), np.cos(x64)]
    fin = np.isfinite(x)
    for got, ref in zip(out, refs):
        assert np.isnan(got[~fin]).all()
        assert _ulps(got[fin], ref[fin].astype(np.float32), np.float32).max() <= 1
        # below an ulp of the exact value (so one of its two neighbours)
        spacing = np.spacing(np.abs(ref[fin]).astype(np.float32)).astype(np.float64)
        assert (np.abs(got[fin] - ref[fin]) / spacing).max() < 0.75
    zero = x == 0
    assert (out[0][zero] == 0).all() and (np.signbit(out[0][zero]) == np.signbit(x[zero])).all()
    assert (out[1][zero] == 1).all()


def test_compiled_sin_cos_take_the_fast_path_and_a_second_pass_for_huge_arguments():
    # the serial kernel runs the fast versions (|x| < 2**17), and reruns with the full ones
    # when any argument is larger: both give the full versions' bits
    f = lambda x: tnp.sin(x) * 2.0 + tnp.cos(x)
    rng = np.random.default_rng(3)
    ordinary = (rng.normal(size=4096) * 1000).astype(np.float32)
    ordinary[:4] = [np.inf, -np.inf, np.nan, -0.0]
    huge = ordinary.copy()
    huge[[5, 700, 4000]] = [1e30, -2.0 ** 17, 3.3e38]
    prog = pipeline.lower(tracer.make_jaxpr(f)(ordinary))
    (k,) = prog.kernels()
    serial = codegen.generate(k).text.split("\n\n\n")[1]
    assert "rare_ += " in serial and "if rare_ != 0:" in serial
    for x in (ordinary, huge):
        got = np.asarray(tracer.jit(f)(x))
        sc = np.empty((2, x.size), np.float32)
        _sincos32(x, sc)
        want = sc[0] * np.float32(2.0) + sc[1]
        np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)],
                                      want.view(np.uint32)[~np.isnan(want)])
        assert np.isnan(got[np.isnan(want)]).all()


def test_reductions_of_sin_cos_take_the_fast_path_and_a_second_pass_too():
    # a serial reduction nest runs the fast versions and reruns (accumulators and
    # pairwise scratch set up again) with the full ones when an argument is >= 2**17;
    # the sums equal NumPy's pairwise sums of the full versions' values, bit for bit
    f = lambda x: (tnp.sum(tnp.sin(x) * 2.0, axis=1), tnp.max(tnp.cos(x), axis=0))
    rng = np.random.default_rng(4)
    ordinary = (rng.normal(size=(8, 512)) * 1000).astype(np.float32)
    ordinary[0, :3] = [np.inf, -0.0, np.nan]
    huge = ordinary.copy()
    huge[[1, 5], [7, 300]] = [1e30, -2.0 ** 17]
    prog = pipeline.lower(tracer.make_jaxpr(f)(ordinary))
    serial = [codegen.generate(k).text.split("\n\n\n")[1] for k in prog.kernels()]
    assert any("rare_ += " in t and "if rare_ != 0:" in t for t in serial)
    jf = tracer.jit(f)
    for x in (ordinary, huge):
        got_sum, got_max = (np.asarray(o) for o in jf(x))
        sc = np.empty((2, x.size), np.float32)
        _sincos32(x.ravel(), sc)
        s2 = (sc[0] * np.float32(2.0)).reshape(x.shape)
        want_sum = s2.sum(axis=1)
        want_max = sc[1].reshape(x.shape).max(axis=0)
        ok = ~np.isnan(want_sum)
        np.testing.assert_array_equal(got_sum[ok].view(np.uint32), want_sum[ok].view(np.uint32))
        assert np.isnan(got_sum[~ok]).all()
        ok = ~np.isnan(want_max)
        np.testing.assert_array_equal(got_max[ok], want_max[ok])
        assert np.isnan(got_max[~ok]).all()


def test_fma_rounds_once_compiled_and_in_python():
    a, b, c = np.float32(1 + 2 ** -12), np.float32(1 - 2 ** -12), np.float32(-1)
    f = numba.njit(lambda a, b, c: vecmath.fma(a, b, c))
    assert f(a, b, c) == np.float32(-2.0 ** -24) == vecmath.fma(a, b, c)
    a, b = 1 + 2.0 ** -30, 1 - 2.0 ** -30
    assert f(a, b, -1.0) == -2.0 ** -60 == vecmath.fma(a, b, -1.0)
    assert a * b - 1.0 == 0.0                              # unfused: the product rounds


@numba.njit(cache=False, error_model="numpy")
def _tanh32(x, out):
    for i in range(x.shape[0]):
        out[i] = vecmath.tanh_f32(x[i])


def test_float32_tanh_is_correctly_rounded_on_a_dense_sample_of_all_float32():
    # every 997th bit pattern (4.3 million values over every binade, both signs), the
    # branch point 2**-4 and its neighbours, and the specials; the float64 reference
    # rounded to float32 (float64 tanh is within an ulp of float64, far inside float32's)
    x = np.arange(0, 2 ** 32, 997, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edge = np.float32([0.0625, -0.0625, 20.0, -20.0, 9.0, 1e-45, -1e-45, 0.0, -0.0,
                       np.inf, -np.inf, np.nan, -np.nan])
    x = np.concatenate([x, edge, np.nextafter(edge[:2], np.float32(0))])
    out = np.empty_like(x)
    _tanh32(x, out)
    with np.errstate(invalid="ignore"):
        ref = np.tanh(x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(x)
    np.testing.assert_array_equal(out.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])
    assert np.isnan(out[nan]).all()
    assert np.signbit(out[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


def test_float64_exp_within_an_ulp():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.normal(size=50000) * 100,
                        [-745.2, -745.1, -744.5, -708.5, 709.7, 709.8, 0.0, -0.0, np.inf,
                         -np.inf, np.nan, 1e-300]])
    out = np.empty_like(x)
    _vm64(x, out)
    with np.errstate(all="ignore"):
        ref = np.exp(x)
    assert _ulps(out, ref, np.float64).max() <= 2


# ------------------------------------------- inliner ---------------------------------------

def test_inliner_expands_nested_calls_with_renamed_locals():
    imports = set()
    lines = inliner.expand(vecmath.sin_f32, ["x0"], "out", "t_", imports)
    code = "\n".join(lines)
    assert "out = " in lines[-1] and "t_x = x0" in lines[0]
    assert "_reduce_pio2_f32" not in code and "_sincos_f32_poly" not in code   # expanded
    assert ("numba_backend.vecmath", "fma", "g_numba_backend_vecmath_fma") in imports
    # the expansion is valid Python computing the same value
    env = {"np": np, "g_numba_backend_vecmath_fma": vecmath.fma}
    exec(code.replace("x0", "np.float32(1.25)"), env)
    assert env["out"] == np.float32(np.sin(np.float64(np.float32(1.25))))


_TABLE = np.array([0.5, 2.0])


@inliner.inline_source
def _table_lookup(i):
    return _TABLE[i] * 2.0


def test_inliner_imports_module_arrays():
    imports = set()
    code = "\n".join(inliner.expand(_table_lookup, ["1"], "out", "t_", imports))
    ((mod, name, alias),) = imports
    assert name == "_TABLE" and alias in code
    env = {"np": np, alias: _TABLE}
    exec(code, env)
    assert env["out"] == 4.0


@inliner.inline_source
def _spread_over_lines(x,
                       y):
    """A docstring."""
    z = (x
         + y)  # a comment
    return (z *
            2.0 + _TABLE[
                0])


def test_inliner_reads_the_source_inspect_reads():
    # inliner._function_source cuts a function's lines by its code object's positions
    # instead of tokenizing the file: the same text as inspect.getsource for every
    # registered inline function, decorators and statements over several lines included
    import inspect
    fns = list(inliner._INLINE.values())
    assert _spread_over_lines in fns and len(fns) > 10
    for fn in fns:
        assert inliner._function_source(fn) == inspect.getsource(fn), fn.__qualname__
    code = "\n".join(inliner.expand(_spread_over_lines, ["1.0", "2.0"], "out", "s_", set()))
    env = {"np": np, "g_" + __name__.replace(".", "_") + "__TABLE": _TABLE}
    exec(code, env)
    assert env["out"] == 6.5


def test_inliner_rejects_control_flow():
    def bad(x):
        if x > 0:
            x = -x
        return x
    inliner.inline_source(bad)
    with pytest.raises(ValueError, match="only assignments"):
        inliner.expand(bad, ["1.0"], "r", "p_", set())


# ------------------------------------- generated source ------------------------------------

GOLDEN = '''def kernel(in0, in1, out0, ip, fp):
    n0 = ip[0]
    n1 = ip[1]
    f0 = np.float32(fp[0])
    for i0 in range(n0):
        t2 = in1[i0]
        for i1 in range(n1):
            t0 = in0[i0, i1]
            # c:f32[2,3] = mul a 3.0:f32[]
            t1 = (t0 * f0)
            # g:f32[2,3] = add c f
            t3 = (t1 + t2)
            out0[i0, i1] = t3
    return 0'''


def test_generated_source_golden():
    f = lambda x, v: x * 3.0 + v[:, None]
    x = np.ones((2, 3), np.float32)
    v = np.ones(2, np.float32)
    prog = pipeline.lower(tracer.make_jaxpr(f)(x, v))
    (k,) = prog.kernels()
    src = codegen.generate(k)
    serial = src.text.split("\n\n\n")[1]
    assert serial == GOLDEN, serial
    assert src.key == codegen.source_key(src.text)


def test_int_helpers_are_plain_python_too():
    assert scalar.idiv_s(np.int64(-7), np.int64(2)) == -3
    assert scalar.irem_s(np.int64(-7), np.int64(2)) == -1
    assert scalar.idiv_s(np.int64(5), np.int64(0)) == -1
    assert scalar.shr_a(np.int64(-8), np.int64(70), 8) == -1
    assert scalar.clz(np.uint64(1), 32) == 31 and scalar.popcount(np.uint64(255)) == 8


# ------------------------------------------- cache ------------------------------------------

def test_cache_rewrites_a_damaged_source_and_survives_an_unwritable_dir(tmp_path, monkeypatch):
    monkeypatch.setitem(tracer.config._values, "cache_dir", str(tmp_path))
    cache.clear_memory_cache()
    f = tracer.jit(lambda x: tnp.cos(x) * 0.25 + 1.0)
    x = np.linspace(0, 1, 5)
    want = np.cos(x) * 0.25 + 1.0
    np.testing.assert_allclose(np.asarray(f(x)), want)
    (path,) = (tmp_path / "kernels").glob("k_*.py")
    path.write_text("this is not python")
    cache.clear_memory_cache()
    tracer._jit_backend._executables.clear()
    np.testing.assert_allclose(np.asarray(tracer.jit(lambda x: tnp.cos(x) * 0.25 + 1.0)(x)),
                               want)
    assert "def kernel" in path.read_text()
    if os.geteuid() != 0:           # root can write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        monkeypatch.setitem(tracer.config._values, "cache_dir", str(ro))
        cache.clear_memory_cache()
        tracer._jit_backend._executables.clear()
        np.testing.assert_allclose(np.asarray(tracer.jit(lambda x: tnp.cos(x) * 0.25 + 1.0)(x)),
                                   want)
    cache.clear_memory_cache()
    tracer._jit_backend._executables.clear()


def test_elf_symbol_reader_falls_back_on_anything_it_cannot_read():
    # numba_backend._numba._elf_defined_globals: None (Numba's own reading of the
    # library's bitcode then) for another format, a truncated or a corrupt object
    from numba_backend import _numba
    head = b"\x7fELF\x02\x01\x01" + bytes(57)
    for obj in (None, b"", b"\xcf\xfa\xed\xfe" + bytes(60), head, head[:40],
                b"\x7fELF\x02\x01" + b"\xff" * 100, b"\x7fELF\x01\x01" + bytes(58)):
        assert _numba._elf_defined_globals(obj) is None
