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

Importing this package does not import Numba: its modules that use Numba import it through
``numba_backend._numba`` (Numba without all of SciPy's linalg), so that the compile pool
(``workers``, plain subprocesses) can start before Numba is loaded. ``import tracer``
imports neither; the first compile does. The path a warm program runs (``executor``,
``cache``, ``codegen`` and the helper modules it reads, ``native``) imports no Numba at
all: kernels load from their native files (``native``), and the helpers' registrations
with Numba wait for its import (``lazy_numba``).
"""
