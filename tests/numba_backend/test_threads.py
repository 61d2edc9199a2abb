"""The thread policy (numba_backend.threads): busy compile workers' cores are taken from
the program's BLAS and Numba pools, given back when they are idle, and the user's own
settings are left alone. Each case runs in a fresh process (the pools are process-wide)."""
import json
import os
import subprocess
import sys
import textwrap


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PRELUDE = """
import json, os
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
from numba_backend import threads

def blas():
    # (NumPy's library first, then SciPy's)
    return [i["num_threads"] for i in sorted(threadpool_info(), key=lambda i: "numpy" not in
            i["filepath"]) if i["user_api"] == "blas"]

out = {"cores": threads.cores()}
"""


def _run(body, env_extra=None, drop=()):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                        "NUMBA_NUM_THREADS") + tuple(drop)}
    env.update(env_extra or {})
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    code = _PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_busy_workers_take_cores_from_the_blas_pools_and_give_them_back():
    out = _run("""
        import scipy.linalg.cython_blas
        out["default"] = blas()
        threads.workers_busy(0)
        threads.apply()
        out["idle"] = blas()
        threads.workers_busy(1)
        threads.apply()
        out["busy"] = blas()
        out["parallel_ok_busy"] = threads.parallel_ok()
        threads.workers_busy(0)
        threads.apply()
        out["idle_again"] = blas()
        out["parallel_ok_idle"] = threads.parallel_ok()
    """)
    d, cores = out["default"], out["cores"]
    assert len(d) == 2 and d[0] == d[1]        # NumPy's and SciPy's OpenBLAS, as installed
    # NumPy's keeps its pool, SciPy's gets one thread; busy workers take cores from NumPy's
    assert out["idle"] == out["idle_again"] == [d[0], 1]
    assert out["busy"] == [max(1, min(d[0], cores - 1)), 1]
    assert out["parallel_ok_idle"]
    assert out["parallel_ok_busy"] == (cores > 2)


def test_a_blas_thread_variable_of_the_users_is_left_alone():
    out = _run("""
        import scipy.linalg.cython_blas
        out["default"] = blas()
        threads.workers_busy(8)
        threads.apply()
        out["busy"] = blas()
    """, {"OMP_NUM_THREADS": "2"})
    assert out["busy"] == out["default"]


def test_a_users_threadpoolctl_limit_is_kept_from_then_on():
    out = _run("""
        import scipy.linalg.cython_blas
        threads.workers_busy(8)
        threads.apply()                      # tracer sets 1 thread
        threadpool_limits(limits=2, user_api="blas")     # the user's own choice
        threads.workers_busy(0)
        threads.apply()                      # tracer must not restore its default
        out["after"] = blas()
        threads.workers_busy(8)
        threads.apply()
        out["busy_again"] = blas()
    """)
    assert out["after"] and set(out["after"]) == {2}
    assert out["busy_again"] == out["after"]


def test_a_jitted_call_applies_the_policy_and_gives_the_same_bits():
    # a cold program: its first call submits compiles, so the pools shrink while they
    # run; the answers equal those of a process whose pools were never touched
    out = _run("""
        import tempfile
        os.environ["TRACER_CACHE_DIR"] = tempfile.mkdtemp()
        import tracer, tracer.numpy as tnp
        f = tracer.jit(lambda a, b: tnp.tanh(a @ b) * 2.0 + a.sum())
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((64, 96)), rng.standard_normal((96, 64))
        out["default"] = blas()
        r1 = np.asarray(f(a, b))
        out["first"] = blas()
        tracer.block_until_ready(f(a, b))
        from numba_backend.workers import pool
        with pool.waiting():
            import time
            t = time.time()
            while any(w.pending for w in pool._live()) and time.time() - t < 60:
                time.sleep(0.05)
        r2 = np.asarray(f(a, b))
        out["idle"] = blas()
        out["same"] = r1.tobytes() == r2.tobytes()
        out["ref_close"] = bool(np.allclose(r1, np.tanh(a @ b) * 2.0 + a.sum()))
    """, {"TRACER_JIT_COMPILE": "async"})
    assert out["same"] and out["ref_close"]
    d0 = out["default"][0]          # NumPy's BLAS
    assert out["first"][0] == max(1, min(d0, out["cores"] - 1))
    assert out["idle"][0] == d0
    # SciPy's, where a compile in the program loaded it: one thread beside NumPy's
    assert out["first"][1:] in ([], [1]) and out["idle"][1:] in ([], [1])


def test_scipys_blas_loaded_by_a_compile_gets_one_thread_at_the_next_call():
    # a process's first compile loads SciPy's BLAS for Numba's check
    # (numba_backend._numba) after that call's scan; the next call finds it
    out = _run("""
        import tempfile
        os.environ["TRACER_CACHE_DIR"] = tempfile.mkdtemp()
        import tracer, tracer.numpy as tnp
        f = tracer.jit(lambda a: tnp.tanh(a) * 2.0)
        a = np.linspace(-1.0, 1.0, 16)
        out["default"] = blas()
        f(a)
        out["compiled"] = "numba.np.arraymath" in __import__("sys").modules
        f(a)
        out["next"] = blas()
    """, {"TRACER_JIT_COMPILE": "sync"})
    assert out["compiled"]
    assert out["default"][0] >= 1 and len(out["next"]) == 2
    assert out["next"] == [out["default"][0], 1]
