import os

import numpy as np
import pytest

# Tests compile kernels synchronously so that every jit check exercises the compiled code.
os.environ.setdefault("TRACER_JIT_COMPILE", "sync")
# Lowering bugs fail loudly in tests (users get a host-step fallback and a warning), and
# the loop IR is checked between pipeline stages.
os.environ.setdefault("TRACER_STRICT_LOWERING", "1")
os.environ.setdefault("TRACER_VERIFY_IR", "1")


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
