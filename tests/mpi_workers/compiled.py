"""Run under ``mpiexec -n P`` (TRACER_JIT_COMPILE=sync) by tests/test_distributed.py:
collectives over a multi-process pmap axis under ``jit``, inside a ``scan`` and a
``fori_loop`` whose compiled drivers call the MPI steps back (the loops stay compiled),
against the single-process vmap. Prints ``OK <case> rank=<r>`` per case and writes the
names to ``<argv[1]>/rank<r>.txt``."""
import os
import sys

import numpy as np

import tracer
from tracer import lax
from numba_backend import host_callbacks

P, R, L = tracer.process_count(), tracer.process_index(), tracer.local_device_count()
N = P * L
block = slice(R * L, (R + 1) * L)
passed = []


def check(name, got, want, exact=False):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)
    print(f"OK {name} rank={R}", flush=True)
    passed.append(name)


def scan_body(x):
    # a carry normalized over the whole axis every step: a psum in the loop body
    def step(c, _):
        c = c / lax.psum(c, "i") + lax.axis_index("i")
        return c, lax.pmax(c, "i")
    return lax.scan(step, x, None, length=5)


def fori_body(x):
    return lax.fori_loop(0, 4, lambda k, c: lax.ppermute(
        c, "i", [(j, (j + 1) % N) for j in range(N)]) + k, x)


x = np.random.default_rng(1).standard_normal((N, 3)) + 3.0
xi = np.arange(N * 2, dtype=np.int64).reshape(N, 2)
before = host_callbacks.stats["calls"]
got = tracer.jit(tracer.pmap(scan_body, axis_name="i"))(x[block])
want = tracer.vmap(scan_body, axis_name="i")(x)
check("jit scan psum carry", got[0], np.asarray(want[0])[block])
check("jit scan pmax ys", got[1], np.asarray(want[1])[block])
got = tracer.jit(tracer.pmap(fori_body, axis_name="i"))(xi[block])
check("jit fori ppermute", got, np.asarray(tracer.vmap(fori_body, axis_name="i")(xi))[block],
      exact=True)
# the loops ran compiled: their drivers called the MPI steps back (5 psum + 5 pmax + 4
# ppermute iterations at least), rather than running the bodies from Python
calls = host_callbacks.stats["calls"] - before
assert calls >= 14, calls
passed.append("compiled drivers")
print(f"OK compiled drivers ({calls} calls back) rank={R}", flush=True)
got = tracer.pmap(tracer.jit(lambda v: lax.psum(v * v, "i")), axis_name="i")(x[block])
check("pmap of jit", got, np.asarray(tracer.vmap(lambda v: lax.psum(v * v, "i"),
                                                 axis_name="i")(x))[block])
if len(sys.argv) > 1:
    with open(os.path.join(sys.argv[1], f"rank{R}.txt"), "w") as fh:
        fh.write("\n".join(passed) + "\n")
