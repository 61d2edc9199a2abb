"""Cold-start runner: whole programs as a user meets them, tracer beside JAX.

Each job (``benchmarks/cold_start_jobs.py``) runs in a fresh process with the default
configuration: import, build inputs, then N calls, timed from process start to the end of
the last call. tracer runs twice, first with an empty kernel cache (and an empty Numba
cache), then again on the cache the first run left; JAX (when a Python with JAX is given or
importable) runs twice in fresh processes too, and the ratios compare runs made side by side
in the same invocation.

    python benchmarks/cold_start.py                        # every job
    python benchmarks/cold_start.py scan_rnn while_ode     # some of them
    python benchmarks/cold_start.py --jax-python /path/to/python-with-jax --json out.json
    python benchmarks/cold_start.py --calls 5              # fewer calls per job (a smoke run)

Columns: ``cold``/``warm`` are seconds from process start to the end of the last call;
``exit`` is how long the process took after that to end (pending background work must not
hold it up); ``bg`` is how long the cold run's compile workers went on after it ended,
finishing its pending compiles into the cache (the warm run starts when they are done, as
a user's next run would find the cache). Threads: one per library unless ``--threads N`` (NumPy's BLAS, Numba, XLA; 0 sets
none, leaving each library's default).

``cores t/JAX`` is the CPU time of the warm tracer process and of the JAX process over
their wall time: the cores each used on average (a compile worker is another process and
is not counted). XLA's CPU client takes no thread setting that holds: with
``--threads 1`` its process still runs its products on two threads on a 2-core machine,
while tracer's BLAS and Numba run one.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
backend, name, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
import numpy as np
if backend == "jax":
    import jax
    jax.config.update("jax_enable_x64", True)   # tracer's default precision, like NumPy
    import jax.numpy, jax.scipy.linalg, jax.nn, jax.lax, jax.random, jax.tree_util
    B = jax
    block = lambda out: jax.tree_util.tree_map(
        lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a, out)
else:
    import tracer, tracer.numpy, tracer.scipy.linalg, tracer.nn, tracer.lax, tracer.random
    B = tracer
    block = lambda out: tracer.tree_util.tree_map(np.asarray, out)
t_import = time.time()
import cold_start_jobs
job, _ = cold_start_jobs.JOBS[name]
block(job(B, calls))
print(json.dumps({{"t_import": t_import, "t_end": time.time()}}))
"""


def _thread_env(n):
    if n == 0:          # each library's own default, as a user's program starts
        return {}
    env = {var: str(n) for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                   "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
    env["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen={'true' if n > 1 else 'false'} "
                        f"intra_op_parallelism_threads={n}")
    return env


def run_one(python, backend, name, calls, env, timeout):
    """One fresh process; returns seconds to the end of the last call and to exit."""
    code = CHILD.format(root=ROOT, bench=BENCH)
    t0 = time.time()
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        proc = subprocess.Popen([python, "-c", code, backend, name, str(calls)], env=env,
                                stdout=so, stderr=se, text=True)
        try:
            # (wait4: the CPU time of this process itself, threads included; a compile
            # worker is another process, not counted)
            _, status, usage = _wait4(proc.pid, timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        t_exit = time.time()
        so.seek(0)
        se.seek(0)
        stdout, stderr = so.read(), se.read()
    if proc.returncode != 0:
        sys.stderr.write(stderr[-4000:])
        raise RuntimeError(f"{backend} {name}: the job's process failed")
    rec = json.loads(stdout.strip().splitlines()[-1])
    return {"to_last_call": rec["t_end"] - t0, "import": rec["t_import"] - t0,
            "exit": t_exit - rec["t_end"], "cpu": usage.ru_utime + usage.ru_stime,
            "wall": t_exit - t0}


def _wait4(pid, timeout):
    t0 = time.time()
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got:
            return got, status, usage
        if time.time() - t0 > timeout:
            raise subprocess.TimeoutExpired(str(pid), timeout)
        time.sleep(0.005)


def wait_for_compile_workers(cache_dir, timeout=180.0):
    """Seconds until no compile worker of the run that used ``cache_dir`` is left (they
    finish a program's pending compiles after it exits, into the cache the warm run then
    reads). Workers are found by their environment in /proc (Linux); elsewhere this
    returns 0 at once."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        busy = False
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"compile_worker" not in f.read():
                        continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if f"TRACER_CACHE_DIR={cache_dir}".encode() in env:
                busy = True
                break
        if not busy:
            break
        time.sleep(0.2)
    return time.time() - t0


def _has_jax(python):
    return subprocess.run([python, "-c", "import jax"], capture_output=True).returncode == 0


def main(argv=None):
    import cold_start_jobs
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="jobs to run (default: all)")
    ap.add_argument("--jax-python", default=os.environ.get("TRACER_BENCH_JAX_PYTHON"),
                    help="a Python with JAX installed (default: this one, if it has JAX)")
    ap.add_argument("--calls", type=int, default=None, help="calls per job (default: the job's)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads per library (0: each library's default, no variables set)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per process")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--compile-workers", type=int, default=None,
                    help="TRACER_COMPILE_WORKERS for tracer's runs (default: unset, the "
                         "pool's size by the cores)")
    args = ap.parse_args(argv)
    names = args.names or list(cold_start_jobs.JOBS)
    unknown = sorted(set(names) - set(cold_start_jobs.JOBS))
    if unknown:
        ap.error(f"unknown jobs {unknown}; choose from {sorted(cold_start_jobs.JOBS)}")
    jax_python = args.jax_python or (sys.executable if _has_jax(sys.executable) else None)

    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("TRACER_", "NUMBA_CACHE_DIR"))}   # the default config
    base.update(_thread_env(args.threads))
    tracer_base = dict(base)
    if args.compile_workers:
        tracer_base["TRACER_COMPILE_WORKERS"] = str(args.compile_workers)
    # Byte-code as an installed package has it: pip writes site-packages' .pyc files, and
    # a user's first import writes an editable checkout's. One untimed import per Python
    # writes them here, so no timed run pays for compiling the libraries' sources.
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    for py, mods in ((sys.executable, "tracer, numba_backend.executor, numba"),
                     (jax_python, "jax, jax.numpy")):
        if py:
            subprocess.run([py, "-c", f"import {mods}"], env=base, capture_output=True)
    results = {}
    print(f"{'job':<20}{'calls':>6}{'tracer cold':>13}{'bg':>6}{'warm':>8}{'exit':>7}"
          f"{'JAX':>8}{'cold/JAX':>10}{'warm/JAX':>10}{'cores t/JAX':>13}")
    for name in names:
        calls = args.calls or cold_start_jobs.JOBS[name][1]
        rec = {"calls": calls}
        with tempfile.TemporaryDirectory() as d:
            env = dict(tracer_base, TRACER_CACHE_DIR=os.path.join(d, "kernels"),
                       NUMBA_CACHE_DIR=os.path.join(d, "numba"))
            rec["tracer_cold"] = run_one(sys.executable, "tracer", name, calls, env, args.timeout)
            rec["tracer_cold"]["background"] = wait_for_compile_workers(env["TRACER_CACHE_DIR"])
            rec["tracer_warm"] = run_one(sys.executable, "tracer", name, calls, env, args.timeout)
        if jax_python:
            # JAX keeps no compilation cache by default: both of its runs start cold; two
            # runs give its figure the same exposure to the machine's load as tracer's.
            runs = [run_one(jax_python, "jax", name, calls, base, args.timeout)
                    for _ in range(2)]
            rec["jax"] = min(runs, key=lambda r: r["to_last_call"])
        results[name] = rec
        cold, warm = rec["tracer_cold"]["to_last_call"], rec["tracer_warm"]["to_last_call"]
        ex = max(rec["tracer_cold"]["exit"], rec["tracer_warm"]["exit"])
        cores = lambda r: r["cpu"] / r["wall"]
        if "jax" in rec:
            j = rec["jax"]["to_last_call"]
            tail = (f"{j:>8.2f}{cold / j:>9.2f}x{warm / j:>9.2f}x"
                    f"{cores(rec['tracer_warm']):>8.2f}/{cores(rec['jax']):.2f}")
        else:
            tail = f"{'-':>8}{'-':>10}{'-':>10}{cores(rec['tracer_warm']):>8.2f}/-"
        bg = rec["tracer_cold"]["background"]
        print(f"{name:<20}{calls:>6}{cold:>13.2f}{bg:>6.1f}{warm:>8.2f}{ex:>7.2f}{tail}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.path.insert(0, BENCH)
    main()
