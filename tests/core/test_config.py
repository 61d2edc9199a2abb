"""tracer.config: flags read and set under tracer's names and JAX's (``jax_<flag>``)."""
import numpy as np
import pytest

import tracer
import tracer.numpy as jnp


def test_jax_spelling_of_flags_reads_and_sets_the_same_flag():
    """Ported JAX code starts with ``config.update("jax_enable_x64", ...)``: the JAX
    spelling sets the flag (float64 results follow it), and every way of reading it --
    attribute, item, ``read`` -- in both spellings gives the value."""
    config = tracer.config
    before = config.enable_x64
    try:
        for value in (False, True):
            config.update("jax_enable_x64", value)
            assert config.enable_x64 is value and config.jax_enable_x64 is value
            assert config["jax_enable_x64"] is value and config["enable_x64"] is value
            assert config.read("jax_enable_x64") is value and config.read("enable_x64") is value
            want = np.float64 if value else np.float32
            assert jnp.asarray(np.ones(2)).dtype == want
    finally:
        config.update("enable_x64", before)


def test_unknown_flags_are_refused_with_the_known_ones():
    config = tracer.config
    for call in (lambda: config.update("jax_platform_name", "cpu"),
                 lambda: config.read("no_such_flag"), lambda: config["jax_no_such_flag"]):
        with pytest.raises(ValueError, match=r"unknown flag .*known flags: .*enable_x64"):
            call()
    with pytest.raises(AttributeError, match="no flag 'jax_no_such_flag'"):
        config.jax_no_such_flag
    with pytest.raises(ValueError, match="jit_compile"):
        config.update("jit_compile", "eager")


def test_numpy_scalars_follow_enable_x64_as_arrays_do():
    """Recorded from JAX 0.10.2: with x64 off, NumPy's float64 and complex128 scalars
    (instances of Python's float and complex) become float32 and complex64 Arrays, strongly
    typed, as 0-d arrays do, in jnp.asarray/array/full, device_put and grad; with x64 on
    they keep their dtypes, and float32 scalars stay float32."""
    config = tracer.config
    before = config.enable_x64
    try:
        for x64, f, c in ((False, np.float32, np.complex64), (True, np.float64, np.complex128)):
            config.update("enable_x64", x64)
            for make in (jnp.asarray, jnp.array, tracer.device_put):
                a = make(np.float64(1.5))
                assert a.dtype == f and not a.aval.weak_type
                assert make(np.complex128(1j)).dtype == c
                assert make(np.float32(1.5)).dtype == np.float32
            assert jnp.full((2,), np.float64(1.5)).dtype == f
            assert jnp.full((2,), np.int8(1)).dtype == np.int8
            assert tracer.grad(lambda v: v * v)(np.float64(2.0)).dtype == f
            assert jnp.asarray(1.5).aval.weak_type and jnp.asarray(1.5).dtype == f
    finally:
        config.update("enable_x64", before)
