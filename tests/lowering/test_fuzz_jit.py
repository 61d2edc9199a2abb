"""A random-program fuzzer: the programs of ``tests/program_gen.py`` (element-wise records
and composites, index remaps, reductions, gathers and scatters, dots, cond and loops, with
values reused) jitted and compared with eager, at random points and at ties (equal inputs,
repeated values, zeros). Most programs run their generated kernels as plain Python
(``debug_kernels``: the fusion and index algebra are exercised without Numba compiles); a
few are compiled. ``tests/test_compositions.py`` runs the same programs under the other
transformations."""
import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import tracer

import program_gen as pg

CASES = st.tuples(pg.programs(max_ops=6), st.integers(0, len(pg.SIGNATURES) - 1),
                  st.sampled_from(pg.MODES), st.integers(0, 2 ** 16))


def _check(prog, sig, mode, seed):
    args = pg.inputs(sig, mode, seed, np.float32)
    note(pg.describe(prog, args))
    f = pg.build(prog)
    with pg.flags(disable_jit=True):      # the programs' inner jits run eagerly too
        eager = f(*args)
    assume(all(np.all(np.isfinite(np.asarray(e))) for e in eager))
    got = tracer.jit(f)(*args)
    for e, g in zip(eager, got):
        assert e.shape == g.shape and e.dtype == g.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-6, atol=1e-6,
                                   err_msg=repr(prog))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASES)
def test_random_programs_python_kernels(case):
    tracer.config.update("debug_kernels", True)
    try:
        _check(*case)
    finally:
        tracer.config.update("debug_kernels", False)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(CASES)
def test_random_programs_compiled(case):
    _check(*case)
