"""Record jax.nn.scaled_dot_general (mxfp8, nvfp4) into tests/data/scaled_dot_jax.npz
(run with a JAX install, e.g. /work/jaxvenv/bin/python; tracer never imports JAX).

JAX runs the block-scaled product through cuDNN only; here its ``scaled_matmul_wrapper``
is replaced by the reference semantics of ``jax.nn.scaled_matmul`` (dequantize each
operand by its block scales in the result dtype, contract over K), so that the rest --
shape normalization, quantization, the custom VJP and its gradient quantization -- is
JAX's own code, run on CPU.
"""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.cudnn import scaled_matmul_stablehlo as S


def reference_scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=jnp.float32):
    def dq(x, s):
        blk = x.shape[-1] // s.shape[-1]
        s = jnp.repeat(s.astype(preferred_element_type), blk, axis=-1)
        return x.astype(preferred_element_type) * s
    return jnp.einsum("bmk,bnk->bmn", dq(lhs, lhs_scales), dq(rhs, rhs_scales),
                      preferred_element_type=preferred_element_type).astype(
                          preferred_element_type)


S.scaled_matmul_wrapper = reference_scaled_matmul


def record():
    out = {"jax_version": np.array(jax.__version__)}
    rng = np.random.default_rng(0)
    cases = {
        "batched": ((2, 32, 64), (2, 32, 64), (((2,), (2,)), ((0,), (0,)))),
        "plain": ((32, 64), (64, 32), (((1,), (0,)), ((), ()))),
    }
    for mode, gs in (("mxfp8", None), ("nvfp4", jnp.array([0.5], jnp.float32))):
        cfg = [jax.nn.get_scaled_dot_general_config(mode, gs)] * 3
        for name, (ls, rs, dn) in cases.items():
            lhs = (rng.normal(size=ls) * 3).astype(np.float32)
            rhs = (rng.normal(size=rs) * 0.5).astype(np.float32)
            f = lambda a, b: jax.nn.scaled_dot_general(a, b, dn, configs=cfg)  # noqa: E731
            lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
            y = f(lhs, rhs)
            g = jax.grad(lambda a, b: jnp.sum(jnp.sin(f(a, b))), argnums=(0, 1))(lhs, rhs)
            key = f"{mode}/{name}"
            out[f"{key}/lhs"], out[f"{key}/rhs"] = np.asarray(lhs), np.asarray(rhs)
            out[f"{key}/out"] = np.asarray(y)
            out[f"{key}/grad_lhs"], out[f"{key}/grad_rhs"] = np.asarray(g[0]), np.asarray(g[1])
        x3 = (rng.normal(size=(2, 3, 64)) * 10).astype(np.float32)
        q, s = S.quantize(jnp.asarray(x3), cfg[0])
        out[f"{mode}/quantize_in"] = x3
        out[f"{mode}/quantize_values"] = np.asarray(q).view(np.uint8)
        out[f"{mode}/quantize_scales"] = np.asarray(s).view(np.uint8)
    return out


if __name__ == "__main__":
    path = pathlib.Path(__file__).parent.parent / "tests" / "data" / "scaled_dot_jax.npz"
    np.savez_compressed(path, **record())
    print("wrote", path, path.stat().st_size)
