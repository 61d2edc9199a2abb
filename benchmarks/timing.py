"""One way to time a call, shared by ``run.py`` (NumPy, tracer) and ``jax_workloads.py``
(JAX), so that the three columns are measured alike.

A sample is the mean time of a batch of back-to-back calls, the batch long enough
(``MIN_SAMPLE_S``) that a call of some microseconds is timed warm, as a loop in a user's
program calls it: a single call timed right after another library's run pays for the
caches and branch predictors that run left behind (measured: while_ode's 0.22 ms call
took 0.5-0.6 ms timed alone after the NumPy loop). Calls longer than ``MIN_SAMPLE_S``
are timed one at a time.
"""
from __future__ import annotations

import math
import time

MIN_SAMPLE_S = 0.02


def batch_size(call) -> int:
    """How many back-to-back calls of ``call()`` (already warmed up) make one sample."""
    t0 = time.perf_counter()
    call()
    dt = time.perf_counter() - t0
    return max(1, min(10_000, math.ceil(MIN_SAMPLE_S / max(dt, 1e-7))))


def sample(call, k: int) -> float:
    """Seconds per call, the mean of ``k`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(k):
        call()
    return (time.perf_counter() - t0) / k
