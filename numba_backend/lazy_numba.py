"""What the backend's modules need from Numba before a compile imports it.

A warm program loads its kernels from their native files (``numba_backend.native``) and
never compiles, so it need not import Numba (0.12 s of its start). The modules it runs
(the code generator and the helper modules whose functions it pastes into kernels:
``scalar``, ``vecmath``, ``pairwise``) register compiled versions of their functions
with Numba; here those registrations wait until ``numba_backend._numba`` imports Numba
(``numba_ready``), which every compile does first, and run at once in a process where
that has happened. Numba's settings that the executor reads are read here as Numba
reads them, without importing it (``setting``).
"""
from __future__ import annotations

import os
import sys
import threading

_pending: list = []
_ready = False
_lock = threading.Lock()


def when_numba(register) -> None:
    """Call ``register()`` (a registration with Numba's extension API) before the first
    compile: now, where ``numba_ready`` has run.

    Not at once where Numba is merely in ``sys.modules``: another thread may be
    importing it then, and a second thread importing ``numba.extending`` meanwhile
    deadlocks or finds it half initialized."""
    with _lock:
        if not _ready:
            _pending.append(register)
            return
    register()


def numba_ready() -> None:
    """Run the registrations that waited. ``numba_backend._numba`` calls this once it
    has imported Numba, before any compile of this package; Numba calls it before its
    first compile of anyone else's function (this package's ``numba_extensions`` entry
    point, so that a user's own ``numba.njit`` code can call the helpers)."""
    global _ready
    with _lock:
        todo = list(_pending)
        _pending.clear()
        _ready = True
    for register in todo:
        register()


def register_jitable(fn):
    """``numba.extending.register_jitable``, registered when Numba is imported; ``fn``
    is returned as it is (as Numba's returns it)."""
    def register():
        from numba.extending import register_jitable as numba_register_jitable
        numba_register_jitable(fn)
    when_numba(register)
    return fn


def setting(attr: str, env: str, ctor, default):
    """Numba's config value ``attr``, read from the environment variable ``env`` as
    Numba's config reads it (``ctor``, ``default``) while Numba is not imported. Once it
    is, or where a ``.numba_config.yaml`` may set it, or the variable does not parse (Numba
    warns), Numba's own config answers."""
    if "numba" not in sys.modules and not os.path.isfile(".numba_config.yaml"):
        value = os.environ.get(env)
        if value is None:
            return default() if callable(default) else default
        try:
            return ctor(value)
        except Exception:
            pass
    import numba_backend._numba  # noqa: F401  (Numba the cheap way)
    from numba.core import config
    return getattr(config, attr)


def default_num_threads() -> int:
    """``numba.config.NUMBA_DEFAULT_NUM_THREADS``: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
