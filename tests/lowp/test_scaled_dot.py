"""nn.scaled_dot_general / get_scaled_dot_general_config (block-scaled mxfp8 and nvfp4)
against jax.nn's, recorded by tools/record_scaled_dot_jax.py (JAX 0.10.2, with cuDNN's
scaled matmul replaced by its reference semantics -- JAX runs it on GPUs only): the
quantized values and scales bit for bit, the products and their gradients."""
from __future__ import annotations

import pathlib

import ml_dtypes
import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer import nn

DATA = np.load(pathlib.Path(__file__).parent.parent / "data" / "scaled_dot_jax.npz")
DN = {"batched": (((2,), (2,)), ((0,), (0,))), "plain": (((1,), (0,)), ((), ()))}


@pytest.fixture(autouse=True)
def _x32():
    tracer.config.update("enable_x64", False)
    yield
    tracer.config.update("enable_x64", True)


def _configs(mode):
    gs = None if mode == "mxfp8" else np.array([0.5], np.float32)
    return [nn.get_scaled_dot_general_config(mode, gs)] * 3


def test_configs():
    m = nn.get_scaled_dot_general_config("mxfp8")
    assert (m.block_size, m.data_type, m.scale_type) == (32, ml_dtypes.float8_e4m3fn,
                                                          ml_dtypes.float8_e8m0fnu)
    n = nn.get_scaled_dot_general_config("nvfp4")
    assert (n.block_size, n.data_type, n.scale_type) == (16, ml_dtypes.float4_e2m1fn,
                                                          ml_dtypes.float8_e4m3fn)
    assert float(np.asarray(n.global_scale)[0]) == 1.0
    with pytest.raises(ValueError, match="unsupported mode 'fp8'"):
        nn.get_scaled_dot_general_config("fp8")


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_quantize_bits(mode):
    q, s = nn._quantize(tnp.asarray(DATA[f"{mode}/quantize_in"]), _configs(mode)[0])
    np.testing.assert_array_equal(np.asarray(q).view(np.uint8), DATA[f"{mode}/quantize_values"])
    np.testing.assert_array_equal(np.asarray(s).view(np.uint8), DATA[f"{mode}/quantize_scales"])


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
@pytest.mark.parametrize("case", ["batched", "plain"])
def test_forward_and_grad_match_jax(mode, case):
    key = f"{mode}/{case}"
    lhs, rhs, cfg = DATA[f"{key}/lhs"], DATA[f"{key}/rhs"], _configs(mode)
    f = lambda a, b: nn.scaled_dot_general(a, b, DN[case], configs=cfg)  # noqa: E731
    out = np.asarray(f(lhs, rhs))
    assert out.dtype == np.float32 and out.shape == DATA[f"{key}/out"].shape
    np.testing.assert_allclose(out, DATA[f"{key}/out"], rtol=1e-5, atol=1e-5)
    gl, gr = tracer.grad(lambda a, b: tnp.sum(tnp.sin(f(a, b))), argnums=(0, 1))(lhs, rhs)
    np.testing.assert_allclose(np.asarray(gl), DATA[f"{key}/grad_lhs"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(gr), DATA[f"{key}/grad_rhs"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(tracer.jit(f)(lhs, rhs)), out, rtol=0, atol=0)


def test_plain_dot_without_configs_and_refusals():
    a = np.ones((2, 32), np.float32)
    np.testing.assert_array_equal(np.asarray(nn.scaled_dot_general(a, a.T, DN["plain"])),
                                  np.full((2, 2), 32.0))
    with pytest.raises(TypeError, match="preferred_element_type must be float32, bfloat16"):
        nn.scaled_dot_general(a, a.T, DN["plain"], preferred_element_type=np.int32,
                              configs=_configs("mxfp8"))
    with pytest.raises(ValueError, match="contracting size 40 is not a multiple of the mxfp8 "
                                         "block size 32"):
        nn.scaled_dot_general(np.ones((2, 40)), np.ones((40, 2)), DN["plain"],
                              configs=_configs("mxfp8"))
