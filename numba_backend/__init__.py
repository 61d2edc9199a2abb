"""numba_backend: loop IR -> Python source -> numba.njit -> an Executable.

- ``codegen``: readable source per kernel (an emitter; dtype-exact scalar code);
- ``scalar``: helpers with the eager semantics where Numba's differ (integer division,
  shifts, float->int, float16 bits, complex division); ``vecmath``: vectorizable float32
  exp/log/sin/cos/tanh and float64 exp; ``inliner``: pastes such functions into kernels;
  ``pairwise``: NumPy's pairwise summation (the order of every compiled float sum);
- ``cache``: kernels keyed by a hash of their source, written to the cache directory and
  compiled with ``cache=True`` (shared across programs, shapes and processes);
- ``executor``: runs a Program's steps, with the NumPy / compiled tiers;
- ``library``: the implementation of every library-call kind (``library_impls``: conv,
  sort, scatter, windowed, random bits, dot_general, views, control flow), over the
  kernel modules ``conv_kernels``, ``sort_kernels``, ``indexing_kernels``,
  ``window_kernels``, ``random_kernels``;
- ``control_flow``: scan/while/cond as generated driver functions (or Python loops
  around the bodies' Executables), one runner per ``ControlFlowSpec``; ``blas``: the
  drivers' matrix products (Numba's GEMM wrapper as an intrinsic, not ``np.dot``).

``lowering`` (the compiler's data and passes) never imports this package; this package
imports ``lowering.ir`` and reads the Programs it makes.

Importing this package imports Numba (``import tracer`` does not; the first jit does), in
``_import_numba`` below.
"""

import importlib.machinery as _machinery
import importlib.util as _util
import os as _os
import sys as _sys


def _import_numba():
    """Import Numba and its registries without importing all of ``scipy.linalg``.

    Numba's ``numba.np.arraymath`` checks at import that BLAS is there by importing
    ``scipy.linalg.cython_blas``, and a submodule import runs its package's
    ``__init__``: the whole of ``scipy.linalg``, 0.27 s of every process that compiles or
    loads a kernel (the program and each compile worker) against 0.01 s for the
    extension module itself. So the extension module is loaded on its own for the check
    and taken out of ``sys.modules`` again at once: a later ``import scipy.linalg`` (a
    compiled BLAS call's first use, or the user's) imports it the normal way.
    """
    placed = None
    if "scipy.linalg" not in _sys.modules:
        try:
            import scipy
            d = _os.path.join(scipy.__path__[0], "linalg")
            name = "scipy.linalg.cython_blas"
            fn = next(f for f in _os.listdir(d) if f.startswith("cython_blas.")
                      and f.endswith(tuple(_machinery.EXTENSION_SUFFIXES)))
            loader = _machinery.ExtensionFileLoader(name, _os.path.join(d, fn))
            mod = _util.module_from_spec(_util.spec_from_loader(name, loader))
            loader.exec_module(mod)
            placed = _sys.modules.setdefault(name, mod)
        except Exception:     # no SciPy, another layout: Numba's own check decides
            placed = None
    try:
        import numba.np.arraymath  # noqa: F401  (runs the BLAS check)
    finally:
        if placed is not None and "scipy.linalg" not in _sys.modules:
            _sys.modules.pop("scipy.linalg.cython_blas", None)


_import_numba()
