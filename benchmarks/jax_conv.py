"""JAX versions of the convolution workloads (``conv_workloads.py``), for the benchmark
runner's JAX column: ``run_all(names, quick) -> {name: median seconds}``, or
``python jax_conv.py --json [--quick] [names]`` printing that dict as JSON.
Imports JAX (never imported by tracer itself)."""
from __future__ import annotations

import json
import sys

import numpy as np


from jax_workloads import _median  # noqa: E402  (one timing loop for every JAX workload)


def conv_data(quick, seed=11):
    # the same data as conv_workloads.conv_data (which imports tracer)
    n = 4 if quick else 32
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 28, 28, 8)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 8, 16)) / 8).astype(np.float32)
    return x, w


def pool_data(quick, seed=12):
    n = 4 if quick else 32
    return np.random.default_rng(seed).standard_normal((n, 28, 28, 16)).astype(np.float32)


def conv2d(quick):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jax.nn.relu(y))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), conv_data(quick)


def maxpool(quick):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(x):
        y = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.sum(y ** 2)

    return jax.jit(jax.value_and_grad(loss)), (pool_data(quick),)


WORKLOADS = {"conv2d": conv2d, "maxpool": maxpool}


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
