"""Record JAX's type promotion with the ml_dtypes low-precision types into
tests/data/promotion_lowp_jax.json (run with a JAX install, e.g. /work/jaxvenv/bin/python;
tracer never imports JAX).

Every pair of the 28 dtypes through ``jnp.promote_types`` and ``jnp.result_type``, each
dtype with Python scalars, and the dtype/weak_type of ``jnp.multiply`` on arrays, with
enable_x64 on and off; a refused pair is recorded as "TypePromotionError".
"""
import json
import pathlib

import jax
import jax.numpy as jnp

OLD = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float16", "float32", "float64", "complex64", "complex128"]
LOWP = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
        "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
        "float4_e2m1fn", "int4", "uint4", "int2", "uint2"]
ALL = OLD + LOWP
SCALARS = {"bool": True, "int": 1, "float": 1.0, "complex": 1j}


def _try(f):
    try:
        return f()
    except jax.errors.JaxRuntimeError:
        raise
    except Exception as e:  # noqa: BLE001  (the refusal is the datum)
        return type(e).__name__


def record():
    out = {"jax_version": jax.__version__}
    for mode in ("x64", "x32"):
        jax.config.update("jax_enable_x64", mode == "x64")
        m = out[mode] = {}
        m["promote_types"] = {a: {b: _try(lambda: str(jnp.promote_types(a, b)))
                                  for b in ALL} for a in ALL}
        m["result_type"] = {a: {b: _try(lambda: str(jnp.result_type(a, b)))
                                for b in ALL} for a in ALL}
        m["binop_array_array"] = {
            a: {b: _try(lambda: [str((r := jnp.multiply(jnp.ones(2, a), jnp.ones(2, b))).dtype),
                                 bool(r.weak_type)]) for b in ALL} for a in LOWP}
        m["binop_array_scalar"] = {
            a: {k: _try(lambda: [str((r := jnp.multiply(jnp.ones(2, a), s)).dtype),
                                 bool(r.weak_type)]) for k, s in SCALARS.items()}
            for a in LOWP}
        m["binop_weakarray_array"] = {
            k: {a: _try(lambda: [str((r := jnp.multiply(jnp.asarray(s) * 1,
                                                        jnp.ones(2, a))).dtype),
                                 bool(r.weak_type)]) for a in LOWP}
            for k, s in SCALARS.items()}
    return out


if __name__ == "__main__":
    path = pathlib.Path(__file__).parent.parent / "tests" / "data" / "promotion_lowp_jax.json"
    path.write_text(json.dumps(record(), indent=0, sort_keys=True) + "\n")
    print("wrote", path)
