"""Benchmarks: tracer.jit against NumPy (and JAX where installed), medians in one run.

    python benchmarks/run.py                 # all workloads
    python benchmarks/run.py softmax_rows    # some of them
    python benchmarks/run.py --quick         # small sizes (a smoke run)
    python benchmarks/run.py --jax-python /path/to/python-with-jax

JAX figures come from ``benchmarks/jax_workloads.py``, run in-process when ``jax`` imports
here, else in a subprocess of ``--jax-python`` (or $TRACER_BENCH_JAX_PYTHON), which
``--threads N`` confines to N CPUs (XLA:CPU's own thread pool ignores the thread flags). Kernels are
compiled before timing (``jit_compile="sync"``); first-call latency is measured separately
in fresh processes, with an empty and with a warm kernel cache.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def _threads_from_argv():
    # thread pools must be sized before NumPy (OpenBLAS) and Numba start
    for i, a in enumerate(sys.argv):
        if a.startswith("--threads"):
            n = a.split("=", 1)[1] if "=" in a else sys.argv[i + 1]
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                        "NUMBA_NUM_THREADS"):
                os.environ[var] = n


_threads_from_argv()

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

os.environ.setdefault("TRACER_JIT_COMPILE", "sync")

import tracer  # noqa: E402
import tracer.numpy as tnp  # noqa: E402

import timing  # noqa: E402
import workloads  # noqa: E402


def interleaved_medians(fns, repeat):
    """Median seconds per call of several functions measured in turns (A B A B ...), so
    that the load of a shared machine weighs on all of them alike; each turn is a sample
    of back-to-back calls (``timing``), as ``jax_workloads`` times JAX."""
    calls = [None if fn is None else (lambda fn=fn, a=a: _block(fn(*a))) for fn, a in fns]
    for call in calls:
        if call is not None:
            call()      # warm up (and compile)
    ks = [None if call is None else timing.batch_size(call) for call in calls]
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, call in enumerate(calls):
            if call is not None:
                times[k].append(timing.sample(call, ks[k]))
    return [float(np.median(t)) if t else None for t in times]


def _block(out):
    if isinstance(out, (list, tuple)):
        for o in out:
            _block(o)
    elif isinstance(out, dict):
        for o in out.values():
            _block(o)
    elif hasattr(out, "block_until_ready"):
        out.block_until_ready()


def run_jax(names, quick, jax_python):
    """{name: seconds} from jax_workloads.py, in-process or in a subprocess.

    With ``--threads N`` JAX always runs in a subprocess (of this Python when it has JAX
    and no ``--jax-python`` is given): XLA's thread pool can be confined only by the
    process's CPU affinity, which must not confine tracer and NumPy as well."""
    threads = os.environ.get("OMP_NUM_THREADS")
    if not threads:
        try:
            import jax  # noqa: F401
            import jax_workloads
            return jax_workloads.run_all(names, quick)
        except ImportError:
            pass
    if not jax_python:
        try:
            import jax  # noqa: F401
            jax_python = sys.executable
        except ImportError:
            return {}
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_workloads.py")
    args = [jax_python, script, "--json"] + (["--quick"] if quick else []) + list(names)
    env = dict(os.environ)
    cpus = None
    if threads:     # --threads N: XLA's pools too
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen="
                            + ("false" if threads == "1" else "true")).strip()
        # XLA:CPU runs independent thunks on a pool of its own whatever the flags say
        # (measured: 1.4-1.8 CPU seconds per second in mlp_train_step, conv2d and
        # softmax_rows with the Eigen flag off), so the process gets N CPUs, as tracer
        # and NumPy get N threads
        if hasattr(os, "sched_getaffinity"):
            cpus = sorted(os.sched_getaffinity(0))[:int(threads)]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=1800, env=env,
                             preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus
                             else None)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as e:   # JAX is optional
        print(f"(JAX figures unavailable: {e})")
        return {}


FIRST_CALL = r"""
import os, sys, time, json
t0 = time.perf_counter()
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
import numpy as np
import tracer
import workloads
params, x, y = workloads.mlp_data({batch})
step = tracer.jit(workloads.mlp_step_tracer)
t1 = time.perf_counter()
out = step(params, x, y)
np.asarray(out[1])
t2 = time.perf_counter()
params2, x2, y2 = workloads.mlp_data({batch2})
t3 = time.perf_counter()
out = step(params2, x2, y2)
np.asarray(out[1])
t4 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "first_call": t2 - t1, "new_batch": t4 - t3}}))
"""


def first_call_latency(quick):
    """Fresh processes: an empty kernel cache, then the same cache again (warm)."""
    bench = os.path.dirname(os.path.abspath(__file__))
    batch, batch2 = (32, 48) if quick else (128, 100)
    code = FIRST_CALL.format(root=ROOT, bench=bench, batch=batch, batch2=batch2)
    res = {}
    runs = [("cold cache", "sync", "a"), ("warm cache", "sync", "a"),
            ("cold cache, async tier", "async", "b")]
    with tempfile.TemporaryDirectory() as d:
        for label, mode, sub in runs:
            env = dict(os.environ, TRACER_CACHE_DIR=os.path.join(d, sub),
                       TRACER_JIT_COMPILE=mode)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, timeout=900)
            if out.returncode != 0:
                print(out.stderr)
                raise RuntimeError("first-call subprocess failed")
            res[label] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="workloads to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--jax-python", default=os.environ.get("TRACER_BENCH_JAX_PYTHON", ""))
    ap.add_argument("--no-first-call", action="store_true")
    ap.add_argument("--threads", default=None,
                    help="size of every thread pool (BLAS, OpenMP, Numba)")
    args = ap.parse_args(argv)
    names = args.names or list(workloads.WORKLOADS) + ["first_call"]
    jax_times = run_jax([n for n in names if n in workloads.WORKLOADS], args.quick,
                        args.jax_python)
    rows = []
    import numba
    print(f"threads: numba {numba.config.NUMBA_NUM_THREADS}, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(default)')}, cpus {os.cpu_count()}")
    print(f"{'workload':<28}{'numpy':>12}{'tracer.jit':>12}{'jax':>12}{'numba':>12}"
          f"   ratio numpy/jit")
    for name in names:
        if name == "first_call":
            continue
        w = workloads.WORKLOADS[name](args.quick)
        np_args = getattr(w, "args_np", w.args)
        t_np, t_jit, t_nb = interleaved_medians([(w.numpy_fn, np_args), (w.tracer_fn, w.args),
                                                 (w.numba_fn, np_args)], args.repeat)
        if w.check is not None:
            w.check(w.numpy_fn(*np_args), w.tracer_fn(*w.args))
            if w.numba_fn is not None:
                w.check(w.numpy_fn(*np_args), w.numba_fn(*np_args))
        t_jax = jax_times.get(name)
        fmt = lambda t: f"{t * 1e3:10.3f}ms" if t is not None else f"{'-':>12}"
        ratio = f"{t_np / t_jit:6.2f}x" if t_np else ""
        note = f"   {w.note}" if w.note else ""
        print(f"{name:<28}{fmt(t_np)}{fmt(t_jit)}{fmt(t_jax)}{fmt(t_nb)}   {ratio}{note}")
        rows.append(dict(name=name, numpy=t_np, jit=t_jit, jax=t_jax, numba=t_nb))
    if "first_call" in names and not args.no_first_call:
        res = first_call_latency(args.quick)
        for label in res:
            r = res[label]
            print(f"first call mlp_train_step ({label}): import {r['import']:.2f}s, "
                  f"first call {r['first_call']:.2f}s, new batch size {r['new_batch'] * 1e3:.1f}ms")
        rows.append(dict(name="first_call", **res))
    return rows


if __name__ == "__main__":
    main()
