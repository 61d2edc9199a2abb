"""numba_backend: loop IR -> Python source -> numba.njit -> an Executable.

- ``codegen``: readable source per kernel (an emitter; dtype-exact scalar code);
- ``scalar``: helpers with the eager semantics where Numba's differ (integer division,
  shifts, float->int, float16 bits, complex division); ``vecmath``: vectorizable float32
  exp/log/sin/cos and float64 exp; ``inliner``: pastes such functions into kernels;
  ``pairwise``: NumPy's pairwise summation (the order of every compiled float sum);
- ``cache``: kernels keyed by a hash of their source, written to the cache directory and
  compiled with ``cache=True`` (shared across programs, shapes and processes);
- ``executor``: runs a Program's steps, with the NumPy / compiled tiers.

Importing this package imports Numba (``import tracer`` does not; the first jit does).
"""
