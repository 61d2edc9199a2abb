"""JAX versions of the control-flow workloads (``control_flow_workloads.py``), for the
benchmark runner's JAX column: ``run_all(names, quick) -> {name: median seconds}``, or
``python jax_control_flow.py --json [--quick] [names]`` printing that dict as JSON.
Imports JAX (never imported by tracer itself)."""
from __future__ import annotations

import json
import sys

import numpy as np


from jax_workloads import _median  # noqa: E402  (one timing loop for every JAX workload)


def rnn_data(quick, seed=7):
    # the same data as control_flow_workloads.rnn_data (which imports tracer)
    hidden, n_in, steps = (32, 8, 100) if quick else (128, 32, 1000)
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    u = (rng.standard_normal((hidden, n_in)) / np.sqrt(n_in)).astype(np.float32)
    xs = rng.standard_normal((steps, n_in)).astype(np.float32)
    h0 = np.zeros(hidden, np.float32)
    return w, u, xs, h0


def scan_rnn(quick):
    import jax
    import jax.numpy as jnp
    from jax import lax
    w, u, xs, h0 = rnn_data(quick)

    def loss(w, u, xs, h0):
        h, _ = lax.scan(lambda h, x: (jnp.tanh(w @ h + u @ x), None), h0, xs)
        return jnp.sum(h)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), (w, u, xs, h0)


def while_ode(quick):
    import jax
    import jax.numpy as jnp
    from jax import lax
    jax.config.update("jax_enable_x64", True)
    n = 1000 if quick else 10000
    dt = 0.001

    def lorenz(s):
        x, y, z = s[0], s[1], s[2]
        return jnp.stack([10.0 * (y - x), x * (28.0 - z) - y, x * y - (8.0 / 3.0) * z])

    def rk4(s):
        k1 = lorenz(s)
        k2 = lorenz(s + dt / 2 * k1)
        k3 = lorenz(s + dt / 2 * k2)
        k4 = lorenz(s + dt * k3)
        return s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    f = jax.jit(lambda s: lax.fori_loop(0, n, lambda i, s: rk4(s), s))
    return f, (jnp.array([1.0, 1.0, 1.0], dtype=jnp.float64),)


WORKLOADS = {"scan_rnn": scan_rnn, "while_ode": while_ode}


def run_all(names, quick):
    out = {}
    for name in names:
        if name in WORKLOADS:
            fn, args = WORKLOADS[name](quick)
            out[name] = _median(fn, *args)
    return out


if __name__ == "__main__":
    import os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    argv = sys.argv[1:]
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("--")] or list(WORKLOADS)
    res = run_all(names, quick)
    print(json.dumps(res) if "--json" in argv else res)
