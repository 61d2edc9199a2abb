"""lowering: jaxpr -> optimized jaxpr -> loop IR (kernels, library calls, host steps).

- ``pipeline``: the passes in order (``lower(closed_jaxpr) -> Program``);
- ``passes``: inline, DCE, CSE, constant folding, simplification on jaxprs;
- ``fusion``: grouping equations into kernels;
- ``ir``: the loop IR (frozen dataclasses) and its printer; ``verify``: its checker;
- ``rules``: the lowering-rule registries (how to add rules for a primitive);
- one module per family of primitives registering rules (``elementwise``, ``shapes``,
  ``reductions``, ``linalg``, ...): every module of this package is imported on the first
  jit.

Nothing here imports Numba; ``numba_backend`` turns a Program into running code.
"""
