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
