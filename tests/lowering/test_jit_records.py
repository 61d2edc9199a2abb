"""check_jit over every op record of ``tests/op_records.py``: jit equals eager bit for bit,
except where the math allows rounding differences (libm functions vectorized differently,
complex arithmetic, dot products). Sampled shapes x dtypes (empty and size-1 dims included
by the records' cases), plus each element-wise record on its edge values."""
from __future__ import annotations

import numpy as np
import pytest

import op_records as opr
from op_records import RECORDS, rng_for
import tracer
from tracer.test_util import check_jit

# Ops whose jit and eager results may differ by rounding (a few ulp).
INEXACT = {"exp", "exp2", "log", "expm1", "log1p", "tanh", "logistic", "sin", "cos", "tan",
           "cbrt", "erf", "pow", "atan2", "dot_general",
           "dot_general_preferred", "dot_general_preferred_float", "dot", "reduce_hypot"}
RTOL = {np.dtype(np.float16): 4e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14,
        np.dtype(np.complex64): 2e-6, np.dtype(np.complex128): 1e-14}


def _tol(rec, dtypes):
    inexact = rec.name in INEXACT or any(np.dtype(d).kind == "c" for d in dtypes)
    if not inexact:
        return {}
    rtol = max(RTOL.get(np.dtype(d), 0) for d in dtypes)
    return dict(rtol=rtol, atol=rtol)


def _cases():
    for rec in RECORDS:
        for case, dt in opr.record_cases(rec, 2):
            name = getattr(dt, "name", "nodtype")
            yield pytest.param(rec, case, dt, id=f"{rec.name}-{case}-{name}")


@pytest.mark.parametrize("rec,case,dt", list(_cases()))
def test_record_under_jit(rec, case, dt):
    args = rec.make_args(rng_for("jit", rec.name, case, dt), case, dt)
    kw = case.kw
    f = lambda *a: rec.op(*a, **kw)
    check_jit(f, args, **_tol(rec, rec.dtypes_for(dt)))


def _edge_cases():
    for rec in RECORDS:
        if not rec.edge or rec.nargs not in (1, 2):
            continue
        case = rec.cases[0]
        if any(len(s) > 1 for s in case.shapes) or case.params:
            continue
        # one dtype per record: the first float one if any, else the first
        dts = [d for d in rec.dtypes if np.dtype(d).kind == "f"] or list(rec.dtypes)
        yield pytest.param(rec, np.dtype(dts[len(rec.name) % len(dts)]),
                           id=f"{rec.name}-{np.dtype(dts[len(rec.name) % len(dts)]).name}")


@pytest.mark.parametrize("rec,dt", list(_edge_cases()))
def test_record_edge_values_under_jit(rec, dt):
    args = opr.edge_args(rec, dt)
    with np.errstate(all="ignore"):
        check_jit(lambda *a: rec.op(*a), args, **_tol(rec, rec.dtypes_for(dt)))


def _lowp_edge_cases():
    # one low-precision dtype per record, rotating over the formats record by record
    recs = [r for r in RECORDS if r.lowp]
    for k, rec in enumerate(recs):
        dt = rec.lowp[k % len(rec.lowp)]
        yield pytest.param(rec, dt, id=f"{rec.name}-{dt.name}")


@pytest.mark.parametrize("rec,dt", list(_lowp_edge_cases()))
def test_record_lowp_edge_values_under_jit(rec, dt):
    """Each record taking the low-precision types, on one format's edge values: the
    compiled result is the eager one bit for bit (a NaN: any encoding, but for select)."""
    args = opr.lowp_edge_args(rec, dt)
    kw = {"axes": (0,)} if "axes" in rec.cases[0].kw else rec.cases[0].kw
    f = lambda *a: rec.op(*a, **kw)
    with np.errstate(all="ignore"):
        eager = f(*args)
        got = tracer.jit(f)(*args)
    opr.assert_lowp_matches(got, eager, msg=f"{rec.name} {dt} jit",
                            nan_bits=rec.name == "select_n_bool")
