"""lowering: jaxpr -> optimized jaxpr -> loop IR (kernels, library calls, host steps).

- ``pipeline``: the passes in order (``lower(closed_jaxpr) -> Program``) and the list of
  rule modules it loads (``RULE_MODULES``, imported on the first jit);
- ``passes``: inline, DCE, CSE, constant folding, simplification on jaxprs;
- ``fusion``: grouping equations into kernels; ``schedule``: flat loops;
- ``ir``: the loop IR (frozen dataclasses) and its printer; ``verify``: its checker;
- ``rules``: the lowering-rule registries (how to add rules for a primitive);
- one module per family of primitives registering rules (``elementwise``, ``shapes``,
  ``reductions``, ``linalg``, ``control_flow``, ...).

This package is the compiler's data and passes only: a Program holds no Python callable
(a library call names its ``kind`` and static params, a scalar call names its function,
control flow holds its sub-Programs), and nothing here imports Numba or a backend, even
lazily (tests/lowering/test_layering.py checks). The backend (the Numba one, a sibling
package) turns a Program into source, compiled code, library implementations and an
Executable.
"""
