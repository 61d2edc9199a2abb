"""tracer: JAX-style transformations (grad, vmap, jit, ...) of NumPy-style code, with
jitted programs lowered to Numba-compiled loops.

Import order (DESIGN.md section 2): the core first, then the primitives (``lax``), then
the NumPy API and the public transformations.
"""
from tracer.config import config
from tracer import dtypes
from tracer.core import Array, ShapeDtypeStruct, ShapedArray, Primitive
from tracer.errors import (ConcretizationTypeError, TracerArrayConversionError,
                           TracerBoolConversionError, TracerIntegerConversionError,
                           UnexpectedTracerError)
from tracer import tree_util
def _finish_init():
    """Import the layers above lax. Runs now, or — when ``import lax`` came first and is
    still executing — at the end of lax/__init__.py."""
    global numpy, random, nn
    import tracer.numpy as numpy
    from tracer import api
    for name in ("block_until_ready", "device_get", "device_put", "eval_shape", "grad",
                 "hessian", "jacfwd", "jacrev", "jit", "jvp", "linearize", "make_jaxpr",
                 "value_and_grad", "vjp", "vmap"):
        globals()[name] = getattr(api, name)
    import tracer.random as random
    # ``from tracer import lax`` / ``import tracer.lax``, as JAX users write it.
    import sys
    globals()["lax"] = sys.modules["lax"]
    sys.modules.setdefault("tracer.lax", sys.modules["lax"])
    from tracer import _exports
    _exports.install(globals())


import lax as _lax  # noqa: E402  (registers the primitives' rules)

if getattr(_lax, "_initialized", False) and "grad" not in globals():
    _finish_init()

__version__ = "0.1.0"
