"""The benchmark workloads written for JAX (run by ``benchmarks/run.py`` when JAX is
installed, in-process or in a subprocess of another Python). Only this file imports jax;
the project and its tests never do.

    python benchmarks/jax_workloads.py --json [--quick] [names...]
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np


def _median(fn, *args, repeat=7):
    """The median seconds per call (``timing``: samples of back-to-back calls, as
    ``run.py`` times NumPy and tracer)."""
    import timing
    call = lambda: _block(fn(*args))
    call()
    k = timing.batch_size(call)
    return float(np.median([timing.sample(call, k) for _ in range(repeat)]))


def _block(out):
    import jax
    jax.tree_util.tree_map(lambda x: x.block_until_ready() if hasattr(x, "block_until_ready")
                           else x, out)


def run_all(names, quick):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    res = {}
    rng = np.random.default_rng(0)

    if "elementwise" in names:
        x = jnp.asarray(rng.normal(size=10 ** 5 if quick else 10 ** 7).astype(np.float32))
        f = jax.jit(lambda x: jnp.sin(x) * jnp.cos(x) + jnp.exp(-x * x) / (1 + x * x))
        res["elementwise"] = _median(f, x)
    if "softmax_rows" in names:
        n = 256 if quick else 4096
        x = jnp.asarray(rng.normal(size=(n, n)).astype(np.float32))
        f = jax.jit(lambda x: jax.nn.softmax(x, axis=1))
        res["softmax_rows"] = _median(f, x)
    if "logsumexp_grad" in names:
        m, k, n = (256, 128, 32) if quick else (4096, 1024, 128)
        a = jnp.asarray(rng.normal(size=(m, k)).astype(np.float32))
        w = jnp.asarray((rng.normal(size=(k, n)) / np.sqrt(k)).astype(np.float32))
        loss = lambda w, a: jnp.sum(jax.scipy.special.logsumexp(a @ w, axis=1))
        res["logsumexp_grad"] = _median(jax.jit(jax.grad(loss)), w, a)
    for dt in ("f32", "f64"):
        name = f"matmul_{dt}"
        if name in names:
            n = 128 if quick else 1024
            dtype = np.float32 if dt == "f32" else np.float64
            a = jnp.asarray(rng.normal(size=(n, n)).astype(dtype))
            res[name] = _median(jax.jit(lambda a, b: a @ b), a, a)
    if "mlp_train_step" in names:
        batch = 32 if quick else 128
        sizes = (784, 512, 512, 10)
        params = [(jnp.asarray((rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32)),
                   jnp.zeros(n, jnp.float32)) for m, n in zip(sizes[:-1], sizes[1:])]
        x = jnp.asarray(rng.normal(size=(batch, 784)).astype(np.float32))
        y = jax.nn.one_hot(rng.integers(0, 10, batch), 10, dtype=jnp.float32)

        def loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = jnp.maximum(h, 0.0)
            return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(h), axis=1))

        @jax.jit
        def step(params, x, y):
            l, g = jax.value_and_grad(loss)(params, x, y)
            return jax.tree_util.tree_map(lambda p, q: p - 0.01 * q, params, g), l

        res["mlp_train_step"] = _median(step, params, x, y)
    if "per_example_grads" in names:
        b = 32 if quick else 256
        params = (jnp.asarray((rng.normal(size=(512, 64)) / 22.6).astype(np.float32)),
                  jnp.zeros(64, jnp.float32),
                  jnp.asarray((rng.normal(size=(64, 1)) / 8).astype(np.float32)),
                  jnp.zeros(1, jnp.float32))
        x = jnp.asarray(rng.normal(size=(b, 512)).astype(np.float32))
        y = jnp.asarray(rng.normal(size=(b,)).astype(np.float32))

        def pe_loss(params, x, y):
            w1, b1, w2, b2 = params
            h = jnp.tanh(x @ w1 + b1)
            return jnp.sum((h @ w2 + b2 - y) ** 2)

        f = jax.jit(jax.vmap(jax.grad(pe_loss), in_axes=(None, 0, 0)))
        res["per_example_grads"] = _median(f, params, x, y)
    if "eager_dispatch" in names:
        a = jnp.ones(16, jnp.float32)

        def ops(a, b):
            for _ in range(1000):
                c = jnp.add(a, b)
            return c
        res["eager_dispatch"] = _median(ops, a, a, repeat=3)
    import jax_control_flow  # scan_rnn, while_ode
    res.update(jax_control_flow.run_all(
        [n for n in names if n in jax_control_flow.WORKLOADS], quick))
    import jax_conv  # conv2d, maxpool
    res.update(jax_conv.run_all([n for n in names if n in jax_conv.WORKLOADS], quick))
    return res


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quick = "--quick" in sys.argv
    names = args or ["elementwise", "softmax_rows", "logsumexp_grad", "matmul_f32",
                     "matmul_f64", "mlp_train_step", "per_example_grads", "eager_dispatch"]
    out = run_all(names, quick)
    print(json.dumps(out) if "--json" in sys.argv else out)
