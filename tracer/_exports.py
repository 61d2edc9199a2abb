"""Optional public names installed on the ``tracer`` package once everything is imported.

Each family adds its public names here (``tracer.nn``, ``tracer.custom_jvp``...), guarded
so that a module still under construction does not break ``import tracer``."""
from __future__ import annotations

import importlib


def install(ns: dict) -> None:
    for modname, names in _OPTIONAL.items():
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        for n in names:
            if hasattr(mod, n):
                ns[n] = getattr(mod, n)
    for modname, alias in _SUBMODULES.items():
        try:
            ns[alias] = importlib.import_module(modname)
        except ImportError:
            pass


# module -> names exported at the top level of ``tracer``
_OPTIONAL = {
    "tracer.custom_derivatives": ["custom_jvp", "custom_vjp", "checkpoint", "remat",
                                  "stop_gradient", "custom_gradient", "closure_convert",
                                  "checkpoint_policies"],
}
# module -> attribute name on ``tracer``
_SUBMODULES = {
    "tracer.nn": "nn",
    "tracer.ops": "ops",
    "tracer.scipy": "scipy",
    "tracer.test_util": "test_util",
}
