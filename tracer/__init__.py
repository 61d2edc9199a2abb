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
import lax as _lax  # noqa: F401  (registers the primitives' rules)
from tracer import numpy
from tracer.api import (block_until_ready, device_get, device_put, eval_shape, grad, hessian,
                        jacfwd, jacrev, jit, jvp, linearize, make_jaxpr, value_and_grad, vjp,
                        vmap)

__version__ = "0.1.0"
