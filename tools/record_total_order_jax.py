"""Record JAX's answers to the cases of tests/total_order_cases.py into
tests/data/total_order_jax.json (run once, with JAX installed; the tests never import JAX):

    python tools/record_total_order_jax.py

JAX runs with enable_x64, eagerly (its eager and jitted answers were checked equal when
recording). Every output is stored as its dtype, shape and raw little-endian bytes
(zlib-compressed, base64), so signs of zeros and NaN payloads survive.
"""
from __future__ import annotations

import base64
import json
import pathlib
import sys
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from total_order_cases import CASES, DTYPES, inputs  # noqa: E402


def encode(v):
    v = np.ascontiguousarray(np.asarray(v))
    return {"dtype": v.dtype.name, "shape": list(v.shape),
            "data": base64.b64encode(zlib.compress(v.tobytes(), 9)).decode()}


def main():
    out = {"jax_version": jax.__version__, "cases": {}}
    for dt in DTYPES:
        for name, (kind, make, _) in CASES.items():
            fn = make(lax, jnp)
            args = inputs(kind, dt)
            with np.errstate(all="ignore"):
                res = fn(*args)
                res_jit = jax.jit(fn)(*args)
            res = res if isinstance(res, (tuple, list)) else (res,)
            res_jit = res_jit if isinstance(res_jit, (tuple, list)) else (res_jit,)
            for a, b in zip(res, res_jit):
                a, b = np.asarray(a), np.asarray(b)
                if a.tobytes() != b.tobytes():
                    print(f"note: JAX eager and jit differ for {name}[{dt}]")
            out["cases"][f"{name}[{dt}]"] = [encode(r) for r in res]
    path = ROOT / "tests" / "data" / "total_order_jax.json"
    path.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
