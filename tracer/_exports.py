"""Public names installed on the ``tracer`` package once everything is imported.

Each family adds its public names here (``tracer.nn``, ``tracer.custom_jvp``...). A module
that fails to import, or lacks a listed name, fails ``import tracer`` with its own error."""
from __future__ import annotations

import importlib


def install(ns: dict) -> None:
    # Every module here is part of tracer: one that fails to import, or lacks a name, is
    # a bug to show at ``import tracer``, not a public name to drop silently.
    for modname, names in _EXPORTS.items():
        mod = importlib.import_module(modname)
        for n in names:
            ns[n] = getattr(mod, n)
    for modname, alias in _SUBMODULES.items():
        ns[alias] = importlib.import_module(modname)


# module -> names exported at the top level of ``tracer``
_EXPORTS = {
    "tracer.custom_derivatives": ["custom_jvp", "custom_vjp", "checkpoint", "remat",
                                  "stop_gradient", "custom_gradient", "closure_convert",
                                  "checkpoint_policies"],
    "lax.callbacks": ["pure_callback", "io_callback"],
}
# module -> attribute name on ``tracer``
_SUBMODULES = {
    "tracer.debug": "debug",
    "tracer.ffi": "ffi",
    "tracer.nn": "nn",
    "tracer.ops": "ops",
    "tracer.scipy": "scipy",
    "tracer.test_util": "test_util",
}
