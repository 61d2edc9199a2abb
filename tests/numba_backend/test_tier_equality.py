"""The two tiers of an Executable give the same answer bit for bit.

The async mode answers through the NumPy tier (``Executable.run_numpy``: the optimized
jaxpr through the NumPy impls, the eager reference) while kernels compile, then switches
to the compiled tier (``run_compiled``); a program whose answer changes at the switch is
wrong. So both tiers run, on the same inputs, every op record of ``tests/op_records.py``
for each of its dtypes -- element-wise records on their edge values (zeros of both
signs, infinities, NaNs of both signs, subnormals, extremes, halves; every pair for
binary ops) plus random draws, the others on one of their cases per dtype in rotation --
and conversions of edge values to every dtype, reductions / argmax / cumulative ops /
sort / top_k / clamp with NaNs, signed zeros and ties inside; the outputs compare as raw
bits (``-0.0 != 0.0``, NaN sign and payload count). Primitives the compiled tier leaves
to host steps (their NumPy impls) pass trivially.

Several checks of one dtype share a jitted program (``CHUNK``): their element-wise ops
fuse into one kernel, so the compiles stay few; the kernel cache keeps them across runs.

The only exceptions are in three explicit tables, each entry a (check, dtype):
``ULP_BOUNDS`` (transcendental functions, where NumPy calls its own SIMD loops and the
kernels libm or ``numba_backend.vecmath``, neither able to call the other's routine from
a loop; and complex arithmetic, which NumPy's SIMD loops contract into fused
multiply-adds): finite results within the measured ulps, zeros and infinities exact, NaNs
at the same places; ``NAN_ORDER`` and ``TWO_NAN_OPERANDS``: NaNs whose sign depends on
the order of evaluation. A check that starts differing anywhere else, or by more, fails.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import lax
from lax import shapes
import op_records as opr
import tracer
from tracer import _jit_backend

# (record or check name, dtype) -> the most ulp the tiers differ by (finite, nonzero
# results of the same sign; zeros and infinities agree bit for bit), measured on this
# test's inputs. NaNs must be at the same places, their sign and payload may differ:
# NumPy's own are not consistent there (on x86-64 with AVX-512, NumPy 2.4: float32
# log(-1) is -NaN, float64 log(-1) +NaN, float32 log(-NaN) +NaN, float64 log(-NaN) -NaN).
ULP_BOUNDS: dict = {
    # NumPy's SIMD loops (float16 through its float32 ones) vs the kernels'
    # numba_backend.vecmath polynomials (exp, log, sin, cos) or libm (tanh, cbrt, erf;
    # scipy's cephes erf for NumPy)
    ("log", "float16"): 0, ("sin", "float16"): 0, ("cos", "float16"): 0,
    ("exp", "float32"): 1, ("log", "float32"): 1, ("sin", "float32"): 1,
    ("cos", "float32"): 1, ("tanh", "float32"): 1, ("cbrt", "float32"): 1,
    ("erf", "float32"): 1,
    ("exp", "float64"): 1, ("tanh", "float64"): 1, ("erf", "float64"): 1,
    # NumPy's SIMD complex loops contract a*b - c*d into a fused multiply-add where the
    # CPU has one (Numba's complex arithmetic does not); integer powers and squares
    # cancel in a component, so the ulps of that component grow
    ("abs", "complex64"): 1, ("mul", "complex64"): 1, ("safe_mul", "complex64"): 2,
    # (div: only the NaNs made from infinite / NaN operands differ, in sign)
    ("div", "complex64"): 0, ("safe_div", "complex64"): 0, ("square", "complex64"): 1,
    ("integer_pow_2", "complex64"): 1, ("integer_pow_3", "complex64"): 51,
    ("integer_pow_5", "complex64"): 59, ("integer_pow_m2", "complex64"): 2,
    ("abs", "complex128"): 1, ("mul", "complex128"): 3, ("safe_mul", "complex128"): 1,
    ("div", "complex128"): 0, ("safe_div", "complex128"): 0, ("square", "complex128"): 4,
    ("integer_pow_2", "complex128"): 15, ("integer_pow_3", "complex128"): 7,
    ("integer_pow_5", "complex128"): 5, ("integer_pow_m2", "complex128"): 1,
}


def _numpy_uses_avx512_skx() -> bool:
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:
        return False
    return bool(__cpu_features__.get("AVX512_SKX"))


# On a CPU with AVX-512 (F, CD, BW, DQ, VL), NumPy dispatches more functions to its own
# AVX-512 routines instead of libm, which the compiled tier calls; measured on an AMD
# EPYC with NumPy 2.4 (float32 atan2 by 2 ulp; float64 log: only NaN signs).
if _numpy_uses_avx512_skx():
    ULP_BOUNDS.update({
        ("exp2", "float32"): 1, ("expm1", "float32"): 1, ("log1p", "float32"): 1,
        ("tan", "float32"): 1, ("pow", "float32"): 1, ("atan2", "float32"): 2,
        ("exp2", "float64"): 1, ("log", "float64"): 0, ("expm1", "float64"): 1,
        ("cbrt", "float64"): 1, ("pow", "float64"): 1, ("atan2", "float64"): 1,
    })

# Checks whose NaNs may differ in sign and payload (both tiers NaN at the same places):
# products and sums over slices holding NaNs of both signs (and inf * 0, which makes
# x86's default NaN, -NaN), where the NaN carried to the end depends on the order of the
# operations (NumPy's pairwise / SIMD order versus the kernel's sequential loop).
# Element-wise ops of two operands where both are NaN: IEEE 754 leaves open which NaN
# the result carries, and NumPy's float16 loops (float32 arithmetic compiled by the C
# compiler) carry the second operand's, the kernels the first's.
TWO_NAN_OPERANDS: set = {("add", "float16"), ("mul", "float16"), ("safe_mul", "float16")}

NAN_ORDER: set = {("reduce_prod_edge", "float16"), ("reduce_prod_edge", "float64"),
                  ("cumprod_edge", "float16")}


# ======================================= comparison ======================================

def _uint_view(a: np.ndarray) -> np.ndarray:
    """The bits of each element (each component of a complex) as unsigned integers."""
    if a.dtype.kind == "c":
        a = np.ascontiguousarray(a)[..., None].view(a.real.dtype)    # shape + (2,)
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}")
    return a


def _ordered(u: np.ndarray, itemsize: int) -> np.ndarray:
    """Float bits mapped to integers in the floats' order (adjacent floats differ by 1)."""
    sign = np.uint64(1) << np.uint64(8 * itemsize - 1)
    u = u.astype(np.uint64)
    mag = (u & ~sign).astype(np.int64)
    return np.where(u & sign, -mag, mag)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element, the ulps between two float arrays of the same dtype (per component
    for complex); ``inf`` where their bits differ and either is zero, infinite or NaN, or
    their signs differ (those must agree exactly)."""
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    ua, ub = _uint_view(a), _uint_view(b)
    real = a.dtype if a.dtype.kind == "f" else a.real.dtype
    fa = ua.view(real)
    fb = ub.view(real)
    d = np.abs(_ordered(ua, real.itemsize) - _ordered(ub, real.itemsize)).astype(np.float64)
    special = ~np.isfinite(fa) | ~np.isfinite(fb) | (fa == 0) | (fb == 0) | \
        (np.signbit(fa) != np.signbit(fb))
    d[special & (ua != ub)] = np.inf
    return d


def _components(a: np.ndarray) -> np.ndarray:
    """A float array's values (a complex array's components along a new last axis)."""
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag], -1)
    return a


def compare(label: str, dt, got, want, args=None) -> str | None:
    """None when ``got`` (compiled) equals ``want`` (NumPy, from ``args``) bit for bit, up
    to the allowances of ``ULP_BOUNDS``, ``NAN_ORDER`` and ``TWO_NAN_OPERANDS``; else a
    description of the difference."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{label}: compiled gives {got.dtype}{got.shape}, NumPy {want.dtype}{want.shape}"
    ug, uw = _uint_view(got), _uint_view(want)
    diff = ug != uw
    if not diff.any():
        return None
    key = (label.split("[")[0], np.dtype(dt).name)
    if want.dtype.kind in "fc":
        both_nan = np.isnan(_components(got)) & np.isnan(_components(want))
        if key in ULP_BOUNDS or key in NAN_ORDER:
            diff &= ~both_nan
        elif key in TWO_NAN_OPERANDS:
            ops_nan = np.isnan(args[0]) & np.isnan(args[1])
            if got.dtype.kind == "c":
                ops_nan = ops_nan[..., None]
            diff &= ~(both_nan & ops_nan)
        if key in ULP_BOUNDS:
            d = ulp_distance(got, want).reshape(diff.shape)
            diff &= ~(d <= ULP_BOUNDS[key])
        if not diff.any():
            return None
    bad = np.argwhere(diff)
    extra = ""
    if want.dtype.kind in "fc":
        d = ulp_distance(got, want).reshape(diff.shape)
        extra = f", max ulp {d[diff].max():g}"
    shown = []
    for i in bad[:4]:
        where = tuple(i[:got.ndim])
        ins = ""
        if args is not None and all(np.shape(a) == got.shape for a in args):
            ins = " at " + ", ".join(f"{a[where]!r}" for a in args)
        shown.append(f"{ins}: compiled {got[where]!r} ({ug[tuple(i)]:#x}), NumPy "
                     f"{want[where]!r} ({uw[tuple(i)]:#x})")
    return (f"{label} [{np.dtype(dt).name}]: {len(bad)} of {ug.size} differ{extra}" +
            ";".join(shown))


# ========================================= checks ========================================

class Check:
    """One op on fixed arguments: ``fn(*args)`` returns an array or a tuple of them."""

    def __init__(self, label, fn, args):
        self.label, self.fn, self.args = label, fn, [np.asarray(a) for a in args]


# Primitives that only move elements (lax/shapes.py).
_DATA_MOVEMENT = frozenset(v for v in vars(shapes).values() if isinstance(v, tracer.Primitive))


def _record_checks(dt):
    dt = np.dtype(dt)
    out = []
    for rec in opr.RECORDS:
        if dt not in rec.dtypes:
            continue
        if dt.kind == "u" and all(p in _DATA_MOVEMENT for p in rec.prims):
            # copies bits exactly as the signed integers of the same width do: not worth
            # the compiles
            continue
        if rec.edge and rec.nargs in (1, 2) and not rec.cases[0].params and \
                all(p in opr.ELEMENTWISE_PRIMS for p in rec.prims):
            # element-wise: its edge values (every pair for binary ops) followed by random
            # draws of its own distribution, as one flat argument per operand (the
            # records' shapes matter to the lowering, not to the values)
            r = opr.rng_for("tiers", rec.name, dt)
            draws = rec.make_args(r, opr.C(*[(16,)] * rec.nargs), dt)
            args = [np.concatenate([e, d]) for e, d in zip(opr.edge_args(rec, dt), draws)]
            out.append(Check(f"{rec.name}[edge+random]", rec.op, args))
            continue
        # the others: one case per dtype, in rotation over the dtypes (so that every case
        # runs with some dtype; the values, not the shapes, are what the tiers may disagree
        # on, and every case is one more kernel to compile)
        cases = [c for c in rec.cases if opr.case_dtype_ok(rec, c, dt)]
        for case in cases[rec.dtypes.index(dt) % len(cases):][:1]:
            args = rec.make_args(opr.rng_for("tiers", rec.name, case, dt), case, dt)
            out.append(Check(f"{rec.name}[{case}]",
                             lambda *a, rec=rec, kw=case.kw: rec.op(*a, **kw), args))
    return out


def _edge_with_ties(dt, shape):
    """Edge values and repeats of them (ties), shuffled into ``shape``."""
    e = opr.edge_values(dt)
    n = int(np.prod(shape))
    r = np.random.default_rng(opr._seed("ties", np.dtype(dt).name, shape))
    return r.choice(e, n).reshape(shape)


def _extra_checks(dt):
    dt = np.dtype(dt)
    out = []
    e = opr.edge_values(dt)
    # conversions of edge values (NaN/inf to integers, rounding, narrowing)
    for new in opr.ALL:
        out.append(Check(f"convert_edge_to_{new.name}[edge]",
                         lambda x, new=new: lax.convert_element_type(x, new), [e]))
    if dt.kind == "c":
        return out
    x = _edge_with_ties(dt, (5, 6))
    # reductions with NaN, signed zeros and ties inside, over each axis and both
    reds = [("reduce_max", lax.reduce_max), ("reduce_min", lax.reduce_min)]
    if dt != opr.bool_:
        reds += [("reduce_sum", lax.reduce_sum), ("reduce_prod", lax.reduce_prod)]
    for name, fn in reds:
        for axes in ((0,), (1,), (0, 1)):
            out.append(Check(f"{name}_edge[{axes}]", lambda v, fn=fn, axes=axes: fn(v, axes),
                             [x]))
    for name, fn in (("argmax", lax.argmax), ("argmin", lax.argmin)):
        for axis in (0, 1):
            out.append(Check(f"{name}_edge[{axis}]",
                             lambda v, fn=fn, axis=axis: fn(v, axis, np.int32), [x]))
    # cumulative ops along each axis, both directions
    cums = [("cummax", lax.cummax), ("cummin", lax.cummin)]
    if dt != opr.bool_:
        cums += [("cumsum", lax.cumsum), ("cumprod", lax.cumprod)]
    if dt.kind == "f":
        cums += [("cumlogsumexp", lax.cumlogsumexp)]
    for name, fn in cums:
        for axis in (0, 1):
            for reverse in (False, True):
                out.append(Check(f"{name}_edge[{axis},{reverse}]",
                                 lambda v, fn=fn, axis=axis, reverse=reverse:
                                 fn(v, axis, reverse), [x]))
    # sort (values, and a payload permuted alike: stability at ties) and top_k at ties
    if dt != opr.bool_:
        iota = np.arange(x.size, dtype=np.int32).reshape(x.shape)
        for dim in (0, 1):
            out.append(Check(f"sort_edge[{dim}]", lambda v, dim=dim: lax.sort(v, dim), [x]))
            out.append(Check(f"sort_key_val_edge[{dim}]",
                             lambda v, i, dim=dim: lax.sort_key_val(v, i, dim), [x, iota]))
        for k in (1, 4, 6):
            out.append(Check(f"top_k_edge[{k}]", lambda v, k=k: lax.top_k(v, k), [x]))
    # clamp against edge bounds (ties with the bounds, NaN bounds, signed zero bounds)
    if dt != opr.bool_:
        lo, hi = np.repeat(e, len(e)), np.tile(e, len(e))
        xs = np.roll(lo, 7)
        out.append(Check("clamp_edge[arrays]", lax.clamp, [lo, xs, hi]))
        for b in e[:4]:
            out.append(Check(f"clamp_edge[{b!r}]",
                             lambda v, b=np.asarray(b): lax.clamp(b, v, b), [e]))
    return out


def checks_for(dt):
    return _record_checks(dt) + _extra_checks(dt)


# ========================================== run ==========================================

def run_tiers(dt, checks):
    """Both tiers of one jitted program holding ``checks``; returns the compiled and the
    NumPy tier's outputs, one list of arrays per check."""
    flat, spans = [], []
    for c in checks:
        spans.append((len(flat), len(c.args)))
        flat += c.args
    counts = []

    def program(*xs):
        outs = []
        for (s, n), c in zip(spans, checks):
            r = c.fn(*xs[s:s + n])
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            counts.append(len(r))
            outs += r
        return outs

    jf = tracer.jit(program)
    ex = _jit_backend.get_executable(jf.trace(*flat).jaxpr, f"tiers_{np.dtype(dt).name}")
    ex.ensure_compiled()
    assert ex.state == "ready", f"the {np.dtype(dt).name} program did not compile"
    with np.errstate(all="ignore"):
        want = ex.run_numpy(flat)
        got = ex.run_compiled(flat)
    return _per_check(got, counts), _per_check(want, counts)


def _per_check(outs, counts):
    res, k = [], 0
    for n in counts:
        res.append([np.asarray(o) for o in outs[k:k + n]])
        k += n
    assert k == len(outs)
    return res


# Checks per jitted program. A program's element-wise checks of one shape fuse into one
# kernel, and Numba's compile time grows faster than a kernel's length: all of a dtype's
# checks in one program compile several times slower than in programs of 4 to 32 checks
# (which take about the same time).
CHUNK = int(os.environ.get("TRACER_TIER_CHUNK", "8"))


def mismatches(dt):
    checks = checks_for(dt)
    got, want = [], []
    for i in range(0, len(checks), CHUNK):
        g, w = run_tiers(dt, checks[i:i + CHUNK])
        got += g
        want += w
    problems = []
    for c, g, w in zip(checks, got, want):
        for j, (a, b) in enumerate(zip(g, w)):
            p = compare(c.label if len(g) == 1 else f"{c.label}#{j}", dt, a, b, c.args)
            if p:
                problems.append(p)
    return problems


DTYPES = opr.ALL


@pytest.mark.parametrize("dt", DTYPES, ids=[d.name for d in DTYPES])
def test_compiled_tier_equals_numpy_tier_bit_for_bit(dt):
    problems = mismatches(dt)
    assert not problems, "\n".join(problems)


def test_the_exception_tables_name_existing_checks():
    # an entry for a check that does not exist (a renamed record) would excuse nothing
    for key in list(ULP_BOUNDS) + sorted(NAN_ORDER) + sorted(TWO_NAN_OPERANDS):
        name, dtname = key
        labels = {c.label.split("[")[0] for c in checks_for(np.dtype(dtname))}
        assert name in labels, key
