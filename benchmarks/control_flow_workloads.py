"""Control-flow workloads (issue 7): loops that must run at compiled-loop speed.

- ``scan_rnn``: 1000 steps of ``h = tanh(W h + U x_t)`` (hidden 128, inputs 32, float32)
  with ``lax.scan``, value and gradient with respect to W and U; NumPy: the same loop and
  its hand-written backward pass.
- ``while_ode``: 10,000 RK4 steps of the Lorenz system (float64) with ``lax.fori_loop``;
  NumPy: the same loop in Python.

JAX versions of both are in ``jax_control_flow.py``.
"""
from __future__ import annotations

import numpy as np

import lax
import tracer
import tracer.numpy as tnp



# ------------------------------------------- scan_rnn ---------------------------------------

def rnn_data(quick, seed=7):
    hidden, n_in, steps = (32, 8, 100) if quick else (128, 32, 1000)
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    u = (rng.standard_normal((hidden, n_in)) / np.sqrt(n_in)).astype(np.float32)
    xs = rng.standard_normal((steps, n_in)).astype(np.float32)
    h0 = np.zeros(hidden, np.float32)
    return w, u, xs, h0


def rnn_loss(w, u, xs, h0):
    h, _ = lax.scan(lambda h, x: (tnp.tanh(w @ h + u @ x), None), h0, xs)
    return tnp.sum(h)


def rnn_value_and_grad_np(w, u, xs, h0):
    hs = [h0]
    for x in xs:
        hs.append(np.tanh(w @ hs[-1] + u @ x))
    dh = np.ones_like(h0)
    dw, du = np.zeros_like(w), np.zeros_like(u)
    for t in range(len(xs) - 1, -1, -1):
        da = dh * (1 - hs[t + 1] ** 2)
        dw += np.outer(da, hs[t])
        du += np.outer(da, xs[t])
        dh = w.T @ da
    return hs[-1].sum(), (dw, du)


def scan_rnn(quick):
    from workloads import Workload, _close
    w, u, xs, h0 = rnn_data(quick)
    f = tracer.jit(tracer.value_and_grad(rnn_loss, argnums=(0, 1)))
    return Workload(rnn_value_and_grad_np, f, (w, u, xs, h0), _close(2e-3),
                    f"{xs.shape[0]} steps of tanh(W h + U x), hidden {w.shape[0]}, f32, "
                    "value and grad (lax.scan)")


# ------------------------------------------- while_ode --------------------------------------

DT = 0.001


def lorenz(s):
    x, y, z = s[0], s[1], s[2]
    return tnp.stack([10.0 * (y - x), x * (28.0 - z) - y, x * y - (8.0 / 3.0) * z])


def rk4(s):
    k1 = lorenz(s)
    k2 = lorenz(s + DT / 2 * k1)
    k3 = lorenz(s + DT / 2 * k2)
    k4 = lorenz(s + DT * k3)
    return s + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def lorenz_np(s):
    x, y, z = s
    return np.array([10.0 * (y - x), x * (28.0 - z) - y, x * y - (8.0 / 3.0) * z])


def ode_np(s, n):
    for _ in range(n):
        k1 = lorenz_np(s)
        k2 = lorenz_np(s + DT / 2 * k1)
        k3 = lorenz_np(s + DT / 2 * k2)
        k4 = lorenz_np(s + DT * k3)
        s = s + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s


def while_ode(quick):
    from workloads import Workload, _close
    n = 1000 if quick else 10000
    s0 = np.array([1.0, 1.0, 1.0])
    f = tracer.jit(lambda s: lax.fori_loop(0, n, lambda i, s: rk4(s), s))
    import hand_numba
    return Workload(lambda s: ode_np(s, n), f, (s0,), _close(1e-6),
                    f"{n} RK4 steps of the Lorenz system, f64 (lax.fori_loop)",
                    lambda s: hand_numba.while_ode(s, n, DT))


CONTROL_FLOW_WORKLOADS = {
    "scan_rnn": scan_rnn,
    "while_ode": while_ode,
}
