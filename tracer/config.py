"""Global configuration flags, JAX-style: ``tracer.config.update("enable_x64", False)``.

Flags (name: default, meaning):

- ``enable_x64`` (True): 64-bit default dtypes (like NumPy). False gives JAX's 32-bit defaults.
- ``disable_jit`` (False): ``jit`` runs its function eagerly.
- ``jit_compile`` ("async"): "async" answers first calls through the NumPy impls while
  compile worker processes compile the kernels into the disk cache (env
  ``TRACER_COMPILE_WORKERS``: how many; compiles pending when the program ends are finished
  by the workers within ``TRACER_COMPILE_AFTER_EXIT_S``, default 120 s, so the next run is
  warm); "sync" compiles in this process and waits; "none" never compiles (the optimized
  jaxpr runs through the NumPy impls).
- ``log_compiles`` (False): log every trace and compile with its time (logger ``tracer``).
- ``debug_nans`` (False): when a jitted function produces a NaN, re-run it eagerly and raise
  FloatingPointError naming the first primitive that produced one.
- ``cache_dir`` (env ``TRACER_CACHE_DIR`` or ``~/.cache/tracer``): the on-disk kernel cache.
- ``debug_kernels`` (False): run generated kernels as plain Python (steppable in pdb).
- ``parallel_threshold`` (65536): minimum iteration count for a ``prange`` loop.
"""
from __future__ import annotations

import os
import threading


def _default_cache_dir() -> str:
    env = os.environ.get("TRACER_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tracer")


class Config:
    _defaults = {
        "enable_x64": True,
        "disable_jit": False,
        "jit_compile": "async",
        "log_compiles": False,
        "debug_nans": False,
        "cache_dir": None,
        "debug_kernels": False,
        "parallel_threshold": 65536,
    }

    def __init__(self):
        self._values = dict(self._defaults)
        self._values["cache_dir"] = _default_cache_dir()
        if os.environ.get("TRACER_JIT_COMPILE"):
            self._values["jit_compile"] = os.environ["TRACER_JIT_COMPILE"]
        if os.environ.get("TRACER_DEBUG_KERNELS"):
            self._values["debug_kernels"] = os.environ["TRACER_DEBUG_KERNELS"] not in ("", "0")
        self._local = threading.local()
        self._listeners = []

    def _known(self, fname: str, name: str) -> str:
        """``name`` as this config spells it: JAX's spelling (``jax_enable_x64``) is
        accepted for every flag. Raises ValueError naming the known flags."""
        if name not in self._values and isinstance(name, str) and \
                name.removeprefix("jax_") in self._values:
            name = name.removeprefix("jax_")
        if name not in self._values:
            raise ValueError(f"config.{fname}: unknown flag {name!r}; known flags: "
                             f"{sorted(self._values)} (each also as jax_<flag>)")
        return name

    def update(self, name: str, value) -> None:
        """Set flag ``name`` (or JAX's ``jax_<name>``) to ``value``; raises ValueError for
        an unknown flag."""
        name = self._known("update", name)
        if name == "jit_compile" and value not in ("async", "sync", "none"):
            raise ValueError(f"config.update('jit_compile', {value!r}): expected 'async', 'sync' or 'none'")
        self._values[name] = value
        for fn in self._listeners:
            fn(name, value)

    def read(self, name: str):
        """The value of flag ``name`` (or JAX's ``jax_<name>``)."""
        return self._values[self._known("read", name)]

    def __getattr__(self, name):
        # (JAX reads flags as config.jax_enable_x64: accepted too)
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[self._known("read", name)]
        except ValueError:
            raise AttributeError(f"tracer.config has no flag {name!r}") from None

    def __getitem__(self, name):
        return self._values[self._known("read", name)]


def _flag(name):
    # a property per flag: a read finds it in the class (``__getattr__`` runs only after
    # the ordinary lookup failed, which costs a raised AttributeError on every read)
    return property(lambda self: self._values[name], doc=f"the flag {name!r}")


for _name in Config._defaults:
    setattr(Config, _name, _flag(_name))
del _name

config = Config()
