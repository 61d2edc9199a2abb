"""The cases of tests/test_total_order_dtypes.py: comparison, max/min, reduction, scan and
sort operations on inputs made of signed zeros, NaNs of both signs (one with a payload),
infinities and +-1, shared with tools/record_total_order_jax.py, which records JAX's
answers for them in tests/data/total_order_jax.json.

Imports NumPy only: each case is ``fn(lax, jnp)``, written against the jax.lax /
jax.numpy API that ``lax`` / ``tracer.numpy`` share.

``POLICY[name]`` says how our result must match JAX's:

- ``"bits"``: bit for bit (signs of zeros and NaNs, NaN payloads).
- ``"nan"``: bit for bit except where JAX's result is NaN: there ours is a NaN too, of
  any sign and payload. XLA:CPU's NaN bits for these depend on its evaluation order
  (reductions, reverse scans), its float16 emulation (computed in float32, NaNs
  canonicalised) or its NaN choice in arithmetic (add, nextafter); ours are documented
  in lax (reductions give the canonical quiet NaN). ``F16_CANONICAL_NAN`` lists the
  "bits" cases that are "nan" for float16.
- ``"close"``: as ``"nan"``, with finite values within a few ulps (transcendental
  functions: cumlogsumexp).
"""
from __future__ import annotations

import itertools

import numpy as np

DTYPES = ("float64", "float32", "float16")


def specials(dtype):
    """0, -0, +NaN, -NaN, inf, -inf, 1, -1, then +-NaN with payload 5."""
    dt = np.dtype(dtype)
    nbits = 8 * dt.itemsize
    u = np.dtype(f"u{dt.itemsize}")
    mant = np.finfo(dt).nmant
    qnan = ((1 << (nbits - 1)) - 1) >> mant << mant | (1 << (mant - 1))
    sign = 1 << (nbits - 1)
    base = np.array([0.0, -0.0, 0.0, 0.0, np.inf, -np.inf, 1.0, -1.0], dt)
    bits = base.view(u).copy()
    bits[2], bits[3] = qnan, qnan | sign
    pay = np.array([qnan | 5, qnan | 5 | sign], u)
    return np.concatenate([bits, pay]).view(dt)


def inputs(kind, dtype):
    """The arguments of a case of ``kind`` (NumPy arrays)."""
    s = specials(dtype)
    if kind == "unary":
        return (s,)
    if kind == "pairs":
        a, b = (v.ravel() for v in np.meshgrid(s, s, indexing="ij"))
        return a, b
    if kind == "select":
        a, b = inputs("pairs", dtype)
        return a > 0, a, b
    if kind == "triples":
        return (np.array(list(itertools.product(s[:8], repeat=3)), dtype),)
    if kind == "triples_no_nan":
        v = s[[0, 1, 4, 5, 6, 7]]
        return (np.array(list(itertools.product(v, repeat=3)), dtype),)
    if kind == "row":
        return (s,)
    raise ValueError(kind)


def _rw(lax, x, init, op):
    return lax.reduce_window(x, init, op, (1, 2), (1, 1), "VALID")


# name -> (input kind, fn(lax, jnp) -> callable, policy)
CASES = {
    # element-wise
    "max": ("pairs", lambda lax, jnp: lax.max, "bits"),
    "min": ("pairs", lambda lax, jnp: lax.min, "bits"),
    "eq": ("pairs", lambda lax, jnp: lax.eq, "bits"),
    "ne": ("pairs", lambda lax, jnp: lax.ne, "bits"),
    "lt": ("pairs", lambda lax, jnp: lax.lt, "bits"),
    "le": ("pairs", lambda lax, jnp: lax.le, "bits"),
    "gt": ("pairs", lambda lax, jnp: lax.gt, "bits"),
    "ge": ("pairs", lambda lax, jnp: lax.ge, "bits"),
    "nextafter": ("pairs", lambda lax, jnp: lax.nextafter, "nan"),
    "add": ("pairs", lambda lax, jnp: lax.add, "nan"),
    "mul": ("pairs", lambda lax, jnp: lax.mul, "nan"),
    "sign": ("unary", lambda lax, jnp: lax.sign, "bits"),
    "abs": ("unary", lambda lax, jnp: lax.abs, "bits"),
    "neg": ("unary", lambda lax, jnp: lax.neg, "bits"),
    "clamp": ("triples", lambda lax, jnp: lambda t: lax.clamp(t[:, 0], t[:, 1], t[:, 2]),
              "bits"),
    "select": ("select", lambda lax, jnp: lax.select, "bits"),
    "jnp.maximum": ("pairs", lambda lax, jnp: jnp.maximum, "bits"),
    "jnp.minimum": ("pairs", lambda lax, jnp: jnp.minimum, "bits"),
    "jnp.fmax": ("pairs", lambda lax, jnp: jnp.fmax, "bits"),
    "jnp.fmin": ("pairs", lambda lax, jnp: jnp.fmin, "bits"),
    "jnp.copysign": ("pairs", lambda lax, jnp: jnp.copysign, "bits"),
    "jnp.heaviside": ("pairs", lambda lax, jnp: jnp.heaviside, "bits"),
    "jnp.signbit": ("unary", lambda lax, jnp: jnp.signbit, "bits"),
    "jnp.isnan": ("unary", lambda lax, jnp: jnp.isnan, "bits"),
    "jnp.fabs": ("unary", lambda lax, jnp: jnp.fabs, "bits"),
    "jnp.clip": ("triples", lambda lax, jnp: lambda t: jnp.clip(t[:, 1], t[:, 0], t[:, 2]),
                 "bits"),
    # reductions
    "reduce_max": ("triples", lambda lax, jnp: lambda x: lax.reduce_max(x, (1,)), "nan"),
    "reduce_min": ("triples", lambda lax, jnp: lambda x: lax.reduce_min(x, (1,)), "nan"),
    "reduce_sum": ("triples", lambda lax, jnp: lambda x: lax.reduce_sum(x, (1,)), "nan"),
    "reduce_prod": ("triples", lambda lax, jnp: lambda x: lax.reduce_prod(x, (1,)), "nan"),
    "argmax": ("triples", lambda lax, jnp: lambda x: lax.argmax(x, 1, np.int32), "bits"),
    "argmin": ("triples", lambda lax, jnp: lambda x: lax.argmin(x, 1, np.int32), "bits"),
    "jnp.max": ("triples", lambda lax, jnp: lambda x: jnp.max(x, axis=1), "nan"),
    "jnp.nanmax": ("triples", lambda lax, jnp: lambda x: jnp.nanmax(x, axis=1), "nan"),
    "jnp.nanmin": ("triples", lambda lax, jnp: lambda x: jnp.nanmin(x, axis=1), "nan"),
    "jnp.nanargmax": ("triples", lambda lax, jnp: lambda x: jnp.nanargmax(x, axis=1), "bits"),
    "jnp.median": ("triples", lambda lax, jnp: lambda x: jnp.median(x, axis=1), "nan"),
    "rw_max": ("triples", lambda lax, jnp: lambda x: _rw(lax, x, -np.inf, lax.max), "bits"),
    "rw_min": ("triples", lambda lax, jnp: lambda x: _rw(lax, x, np.inf, lax.min), "bits"),
    # scans
    "cummax": ("triples", lambda lax, jnp: lambda x: lax.cummax(x, axis=1), "bits"),
    "cummin": ("triples", lambda lax, jnp: lambda x: lax.cummin(x, axis=1), "bits"),
    "cumsum": ("triples", lambda lax, jnp: lambda x: lax.cumsum(x, axis=1), "bits"),
    "cumprod": ("triples", lambda lax, jnp: lambda x: lax.cumprod(x, axis=1), "bits"),
    "cumlogsumexp": ("triples", lambda lax, jnp: lambda x: lax.cumlogsumexp(x, axis=1),
                     "close"),
    "cummax_rev": ("triples", lambda lax, jnp: lambda x: lax.cummax(x, axis=1, reverse=True),
                   "nan"),
    "cummin_rev": ("triples", lambda lax, jnp: lambda x: lax.cummin(x, axis=1, reverse=True),
                   "nan"),
    "cumsum_rev": ("triples", lambda lax, jnp: lambda x: lax.cumsum(x, axis=1, reverse=True),
                   "nan"),
    "jnp.cumsum": ("triples", lambda lax, jnp: lambda x: jnp.cumsum(x, axis=1), "bits"),
    # sorting
    "sort": ("triples", lambda lax, jnp: lambda x: lax.sort(x, dimension=1), "bits"),
    "sort_key_val": ("row", lambda lax, jnp: lambda x: lax.sort_key_val(
        x, np.arange(x.shape[-1], dtype=np.int32)), "bits"),
    "top_k": ("triples", lambda lax, jnp: lambda x: lax.top_k(x, 3), "bits"),
    "top_k_row": ("row", lambda lax, jnp: lambda x: lax.top_k(x, x.shape[-1]), "bits"),
    "top_k_row4": ("row", lambda lax, jnp: lambda x: lax.top_k(x, 4), "bits"),
    "approx_max_k": ("triples_no_nan", lambda lax, jnp: lambda x: lax.approx_max_k(x, 3),
                     "bits"),
    "approx_min_k": ("triples_no_nan", lambda lax, jnp: lambda x: lax.approx_min_k(x, 3),
                     "bits"),
    "jnp.sort": ("triples", lambda lax, jnp: lambda x: jnp.sort(x, axis=1), "bits"),
    "jnp.argsort": ("triples", lambda lax, jnp: lambda x: jnp.argsort(x, axis=1), "bits"),
    "jnp.sort_desc": ("triples", lambda lax, jnp: lambda x: jnp.sort(x, axis=1,
                                                                    descending=True), "bits"),
    "jnp.argsort_desc": ("triples", lambda lax, jnp: lambda x: jnp.argsort(
        x, axis=1, descending=True), "bits"),
}


# XLA:CPU computes these in float32 for float16 operands and converts NaN results to the
# canonical NaN; ours keep the NaN operand's bits
F16_CANONICAL_NAN = {"max", "min", "clamp", "jnp.maximum", "jnp.minimum", "jnp.clip",
                     "rw_max", "rw_min", "cumsum", "cumprod", "jnp.cumsum"}


def policy(name, dtype):
    """The case's match policy for ``dtype``."""
    p = CASES[name][2]
    if p == "bits" and np.dtype(dtype) == np.float16 and name in F16_CANONICAL_NAN:
        return "nan"
    return p
