"""Record JAX's random numbers into tests/data/random_jax_{x64,x32}.json.

Run with a Python that has JAX (CPU), from the repository root:

    python tools/gen_random_jax.py            # both files (x32 in a subprocess)

The cases are tests/random_cases.py's; tests/test_random.py replays them with tracer and
compares bit for bit. Regenerating with another JAX version may change the recorded bits
(the RngBitGenerator streams are XLA's CPU ones); the test of the changed case then
fails and names it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def record(mode: str) -> dict:
    import jax
    jax.config.update("jax_enable_x64", mode == "x64")
    import jax.numpy as jnp
    from jax import lax, random

    import random_cases as rc

    m = types.SimpleNamespace(random=random, np=jnp, lax=lax)
    cases = dict(rc.CASES)
    if mode == "x64":
        cases.update(rc.CASES_X64)
        cases.update(rc.CASES_ULPS)
    out = {}
    for seed in rc.SEEDS:
        for name, f in cases.items():
            out[rc.record_name(name, seed)] = rc.encode(f(m, random.PRNGKey(seed)))
    for name, f in rc.DEFAULTS.items():
        out[name] = rc.encode(f(m, random.PRNGKey(0)))
    if mode == "x64":
        for name, f in rc.rbg_cases().items():
            state, bits = f(m)
            out[name] = {"state": rc.encode(state), "bits": rc.encode(bits)}
    return out


def main():
    if len(sys.argv) > 1:
        mode = sys.argv[1]
        path = os.path.join(ROOT, "tests", "data", f"random_jax_{mode}.json")
        data = record(mode)
        with open(path, "w") as f:
            json.dump(data, f, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {path}")
        return
    for mode in ("x64", "x32"):   # one process per mode: x64 is fixed at JAX's start
        subprocess.run([sys.executable, __file__, mode], check=True)


if __name__ == "__main__":
    main()
