"""tracer: JAX-style transformations (grad, vmap, jit, ...) of NumPy-style code, with
jitted programs lowered to Numba-compiled loops.

Import order (DESIGN.md section 2), one way: the core (config, dtypes, core, errors,
tree_util; ``tracer.interpreters``), then the primitives (``lax``), then the NumPy API
and the public transformations. ``lax`` imports this package first, so ``import lax``
before ``import tracer`` runs the same order (lax/__init__.py).
"""
from tracer.config import config
from tracer import _jit_backend
_jit_backend.prestart_compile_worker()   # first, so that it boots while the rest imports
from tracer import dtypes
from tracer.core import Array, ShapeDtypeStruct, ShapedArray, Primitive
from tracer.errors import (ConcretizationTypeError, TracerArrayConversionError,
                           TracerBoolConversionError, TracerIntegerConversionError,
                           UnexpectedTracerError)
from tracer import tree_util
import lax  # (the primitives and their rules; see lax/__init__.py)
import tracer.numpy as numpy
from tracer import api
from tracer.api import (block_until_ready, device_get, device_put, eval_shape,
                        grad, hessian, jacfwd, jacrev, jit, jvp, linearize, make_jaxpr,
                        value_and_grad, vjp, vmap, pmap)
# processes and devices (mpi4py loads only when launched under MPI, at the first query)
from tracer import distributed
from tracer.distributed import (device_count, devices, local_device_count, local_devices,
                                process_count, process_index)
from tracer import sharding
from tracer.sharding import shard_map
import tracer.random as random
# ``from tracer import lax`` / ``import tracer.lax``, as JAX users write it.
import sys as _sys
_sys.modules.setdefault("tracer.lax", lax)
from tracer import _exports  # noqa: E402
_exports.install(globals())

__version__ = "0.1.0"
