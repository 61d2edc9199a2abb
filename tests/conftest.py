import os

import numpy as np
import pytest

# Tests compile kernels synchronously so that every jit check exercises the compiled code.
os.environ.setdefault("TRACER_JIT_COMPILE", "sync")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def x32():
    """Run a test with enable_x64=False (32-bit defaults)."""
    import tracer
    tracer.config.update("enable_x64", False)
    try:
        yield
    finally:
        tracer.config.update("enable_x64", True)
