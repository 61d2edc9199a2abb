"""Multi-process pmap over MPI (tracer.distributed, lax/mpi.py): pytest launches
``mpiexec -n 2`` and ``-n 4`` (oversubscribed on CI's 2 cores: mpich's default) on the
worker scripts of tests/mpi_workers/, each launch with a timeout.

- every collective over a pmap axis spanning the processes, and its gradient, equals the
  single-process ``vmap(axis_name=...)`` over the stacked blocks (bit for bit for
  integers, rtol 1e-5 / 1e-12 for float32 / float64 sums; workers/collectives.py);
- under jit, loops holding collectives stay compiled (workers/compiled.py);
- a process that raises, exits or is killed ends the job, non-zero, within bounded time
  (workers/faults.py).

mpiexec comes with the ``mpi`` / ``test`` extras (the mpich wheel). Without it these
tests fail, naming the fix: they are never skipped.
"""
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tracer
from tracer import lax

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKERS = ROOT / "tests" / "mpi_workers"
LAUNCH_TIMEOUT_S = 180      # per mpiexec launch; a hang fails the test instead of CI


def mpiexec() -> list:
    """The launcher command: the environment's own mpiexec first (the mpich wheel puts it
    beside the interpreter), then PATH."""
    here = pathlib.Path(sys.executable).parent / "mpiexec"
    exe = str(here) if here.exists() else shutil.which("mpiexec")
    if exe is None:
        pytest.fail("mpiexec is not installed: the multi-process pmap tests need it. Install "
                    "the test extra (pip install -e '.[test]'), or at least the mpi extra "
                    "(pip install -e '.[mpi]': mpi4py and the mpich wheel, which provides "
                    "mpiexec)", pytrace=False)
    cmd = [exe]
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    if "Open MPI" in version.stdout + version.stderr:
        cmd.append("--oversubscribe")     # mpich oversubscribes by default
    return cmd


def launch(n, script, *args, timeout=LAUNCH_TIMEOUT_S, **env):
    """Run ``mpiexec -n n python script args`` in its own process group; returns
    (returncode, stdout + stderr, seconds). A launch past ``timeout`` is killed, group and
    all, and fails the test."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_LOCALNRANKS"))}
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    full_env.setdefault("TRACER_JIT_COMPILE", "none")
    full_env.update({k: str(v) for k, v in env.items()})
    cmd = mpiexec() + ["-n", str(n), sys.executable, str(WORKERS / script), *map(str, args)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=full_env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpiexec -n {n} {script} {args} did not finish within {timeout} s:\n"
                    f"{out[-4000:]}")
    return proc.returncode, out, time.monotonic() - start


def passed_cases(outdir, n):
    lists = []
    for r in range(n):
        path = outdir / f"rank{r}.txt"
        assert path.exists(), f"rank {r} wrote no results"
        lists.append(path.read_text().split("\n")[:-1])
    assert all(lst == lists[0] for lst in lists), "the processes passed different cases"
    return lists[0]


# every case of workers/collectives.py, which must all pass on every process
COLLECTIVE_CASES = {
    "psum f32[0]", "psum f64[0]", "psum i32[0]", "psum pytree[0]", "psum pytree[1]",
    "psum unmapped[0]", "pmean f32[0]", "pmean i32[0]", "pmax f32 nan[0]", "pmin i32[0]",
    "pmax i32[0]", "normalize[0]", "psum scalar[0]", "pmax scalar[0]",
    "all_gather scalar[0]", "pbroadcast scalar[0]", "ppermute scalar[0]", "axis_index[0]", "all_gather[0]", "all_gather axis=2[0]",
    "all_gather tiled[0]", "psum_scatter[0]", "psum_scatter tiled[0]", "all_to_all[0]",
    "all_to_all 0->0[0]", "all_to_all tiled[0]", "ppermute shift[0]", "ppermute partial[0]",
    "pbroadcast[0]", "pshuffle[0]", "vmap inside[0]", "vmap inside, named[0]",
    "vmap outside", "pmap of jit[0]", "jit of pmap", "mismatch", "mismatch dtype",
    "block size", "after errors[0]", "shard_map psum", "shard_map sharded out",
    "shard_map all_gather", "grad shard_map",
    "psend/precv shift[0]", "psend/precv partial[0]", "psend/precv order[0]",
    "psend/precv order[1]", "psend/precv order[2]", "psend/precv scalar[0]",
    "pmap of jit psend/precv[0]", "jit of pmap psend/precv", "grad psend/precv",
    "psend/precv mismatch", "precv without psend", "pool keeps held outputs",
    "pool reuses dropped outputs",
} | {f"{kind} {name}" for kind in ("grad", "pmap(grad)")
     for name in ("psum", "pmean", "all_gather", "psum_scatter", "all_to_all", "ppermute",
                  "pbroadcast", "axis_index")}


@pytest.mark.parametrize("n,local", [(2, 2), (4, 1)], ids=["2procs-2devices", "4procs"])
def test_collectives_and_grads_match_vmap(n, local, tmp_path):
    rc, out, secs = launch(n, "collectives.py", tmp_path, TRACER_NUM_CPU_DEVICES=local)
    assert rc == 0, out[-6000:]
    cases = passed_cases(tmp_path, n)
    assert set(cases) == COLLECTIVE_CASES and len(cases) == len(COLLECTIVE_CASES), (
        sorted(set(cases) ^ COLLECTIVE_CASES))


def test_2d_mesh_with_sub_communicators(tmp_path):
    # shard_map over a (data, model) = (2, 2) mesh on 4 processes: collectives over one
    # axis go over that axis's MPI sub-communicator
    rc, out, _ = launch(4, "mesh2d.py", tmp_path)
    assert rc == 0, out[-6000:]
    assert passed_cases(tmp_path, 4) == [
        "psum model", "psum both", "axis_index", "all_gather data", "matmul",
        "ppermute model", "jit psum data", "grad psum model", "grad psum P()",
        "grad data-parallel pmean", "jit grad data-parallel pmean",
        "grad replicated pass-through", "grad pmap out_axes=None", "grad pmap in_axes=None"]


def test_loops_holding_collectives_stay_compiled(tmp_path):
    rc, out, _ = launch(2, "compiled.py", tmp_path, TRACER_JIT_COMPILE="sync",
                        TRACER_STRICT_LOWERING=1)
    assert rc == 0, out[-6000:]
    assert passed_cases(tmp_path, 2) == [
        "jit scan psum carry", "jit scan pmax ys", "jit fori ppermute", "compiled drivers",
        "pmap of jit"]


@pytest.mark.parametrize("how,n", [("raise", 2), ("raise", 4), ("exit", 2), ("kill", 2),
                                   ("sysexit", 2)])
def test_a_failing_process_ends_the_job(how, n):
    # sysexit: process 1 exits cleanly while the others wait in a psum; they give up
    # after TRACER_MPI_TIMEOUT seconds
    rc, out, secs = launch(n, "faults.py", how, timeout=90, TRACER_MPI_TIMEOUT=5)
    if rc != 0 and (not out or how == "raise" and "tracer.distributed:" not in out):
        # (in full CI runs on a loaded 2-core machine the launcher has ended non-zero with
        # no output at all: twice for sysexit-2, once for raise-4; and once for raise-4
        # with the output cut inside the traceback's last line, before the hook's own
        # line; never reproduced alone: launched once more, the message must be there)
        rc, out, secs = launch(n, "faults.py", how, timeout=90, TRACER_MPI_TIMEOUT=5)
    assert rc != 0, out
    assert "UNREACHABLE" not in out
    assert secs < 60, (secs, out)
    if how == "raise":
        assert f"tracer.distributed: process 1 of {n} raised RuntimeError: boom" in out, out
    if how == "sysexit":
        assert "waited" in out and "TRACER_MPI_TIMEOUT" in out, (rc, secs, out)


def test_data_parallel_tutorial_under_mpiexec(tmp_path):
    # tutorials/08 in its fast mode on 2 processes: the same loss and accuracy as on one
    # (tests/test_tutorials.py runs it on one), the parameters equal on every process
    script = ROOT / "tutorials" / "08_data_parallel.py"
    env = dict(TRACER_TUTORIAL_FAST="1", MPLBACKEND="Agg", TRACER_JIT_COMPILE="sync")
    cmd = mpiexec() + ["-n", "2", sys.executable, str(script)]
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_LOCALNRANKS"))}
    full_env.update(env, PYTHONPATH=str(ROOT))
    r = subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=ROOT,
                       timeout=LAUNCH_TIMEOUT_S)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 process(es), 2 device(s)" in r.stdout
    assert "every process holds the same parameters" in r.stdout
    one = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=full_env, cwd=ROOT, timeout=LAUNCH_TIMEOUT_S)
    assert one.returncode == 0, one.stderr[-3000:]
    pick = lambda out: next(line for line in out.splitlines() if line.startswith("final loss"))
    assert pick(r.stdout) == pick(one.stdout), (pick(r.stdout), pick(one.stdout))


# ------------------------------------ one process ---------------------------------------

def test_one_process_pmap_is_vmap_over_the_local_devices():
    # without an MPI launcher: one process, one device (JAX's pmap on one CPU device
    # gives psum(x) == x for a block of one)
    assert tracer.process_count() == 1 and tracer.process_index() == 0
    assert tracer.local_devices() == tracer.devices() and len(tracer.devices()) == 1
    x = np.arange(6.0).reshape(1, 2, 3)
    f = tracer.pmap(lambda v: v / lax.psum(v, "i") + lax.axis_index("i"), axis_name="i")
    np.testing.assert_array_equal(f(x), tracer.vmap(
        lambda v: v / lax.psum(v, "i") + lax.axis_index("i"), axis_name="i")(x))
    np.testing.assert_array_equal(tracer.pmap(lambda v: lax.psum(v, "i"), "i")(x), x)
    with pytest.raises(ValueError, match="needs 2 devices, but this process has 1.*"
                                         "TRACER_NUM_CPU_DEVICES=2"):
        f(np.ones((2, 3)))


def test_pmap_static_broadcasted_argnums_and_axes():
    def f(x, k, y):
        assert isinstance(k, int)   # static: a Python value
        return lax.psum(x * k, "i") + y

    x = np.ones((1, 3))
    got = tracer.pmap(f, "i", in_axes=(0, None, None), static_broadcasted_argnums=1)(
        x, 4, np.float64(2.0))
    np.testing.assert_array_equal(got, np.full((1, 3), 6.0))
    got = tracer.pmap(f, "i", static_broadcasted_argnums=(1,), out_axes=1)(x, 2, x)
    np.testing.assert_array_equal(got, np.full((3, 1), 3.0))
    with pytest.raises(ValueError, match="static_broadcasted_argnums"):
        tracer.pmap(f, "i", static_broadcasted_argnums=5)(x, 1, x)


def test_several_devices_per_process_and_no_mpi4py_at_import():
    code = (
        "import sys, numpy as np, tracer\n"
        "from tracer import lax\n"
        "assert 'mpi4py' not in sys.modules\n"
        "assert len(tracer.local_devices()) == 3 and tracer.device_count() == 3\n"
        "assert 'mpi4py' not in sys.modules, 'a single process imported mpi4py'\n"
        "x = np.arange(12.0).reshape(3, 4)\n"
        "f = lambda v: lax.all_gather(v, 'i') * lax.psum(v, 'i')\n"
        "np.testing.assert_array_equal(tracer.pmap(f, 'i')(x), tracer.vmap(f, axis_name='i')(x))\n"
        "print('ok')\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_LOCALNRANKS"))}
    env.update(TRACER_NUM_CPU_DEVICES="3", TRACER_JIT_COMPILE="none", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_bad_device_count_is_a_clear_error():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_LOCALNRANKS"))}
    env.update(TRACER_NUM_CPU_DEVICES="zero", TRACER_JIT_COMPILE="none", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", "import tracer; tracer.devices()"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0
    assert "TRACER_NUM_CPU_DEVICES='zero' must be a positive integer" in r.stderr, r.stderr


def test_shard_map_on_one_process_is_jaxs():
    # the values JAX 0.10 gives with XLA_FLAGS=--xla_force_host_platform_device_count=4
    # (one process: the local shard is the whole array)
    code = (
        "import numpy as np, tracer\n"
        "from tracer import lax\n"
        "from tracer.sharding import Mesh, PartitionSpec as P\n"
        "mesh = Mesh(np.array(tracer.devices()), ('x',))\n"
        "assert mesh.shape == {'x': 4} and mesh.size == 4\n"
        "f = tracer.shard_map(lambda a, b: (lax.psum(a, 'x'), b * 2), mesh,\n"
        "                     in_specs=(P('x'), P()), out_specs=(P(), P()))\n"
        "s, b = f(np.arange(8.0), np.ones(2))\n"
        "np.testing.assert_array_equal(s, [12.0, 16.0])\n"
        "np.testing.assert_array_equal(b, [2.0, 2.0])\n"
        "g = tracer.shard_map(lambda a: a * lax.axis_index('x'), mesh=mesh,\n"
        "                     in_specs=P(None, 'x'), out_specs=P(None, 'x'))\n"
        "np.testing.assert_array_equal(g(np.ones((2, 8))), [[0, 0, 1, 1, 2, 2, 3, 3]] * 2)\n"
        "h = tracer.jit(tracer.shard_map(lambda a: lax.all_gather(a, 'x', tiled=True),\n"
        "               mesh=mesh, in_specs=P('x'), out_specs=P()))\n"
        "np.testing.assert_array_equal(h(np.arange(8.0)), np.arange(8.0))\n"
        "try:\n"
        "    tracer.shard_map(lambda a: a, mesh, P('x'), P('x'))(np.ones(6))\n"
        "except ValueError as e:\n"
        "    assert 'not divisible by 4' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('no error for 6 rows over 4 devices')\n"
        "try:\n"
        "    tracer.shard_map(lambda a: a, mesh, P('y'), P('x'))(np.ones(8))\n"
        "except ValueError as e:\n"
        "    assert \"names mesh axis 'y'\" in str(e), e\n"
        "else:\n"
        "    raise AssertionError('no error for an unknown axis name')\n"
        "mesh2 = Mesh(np.array(tracer.devices()).reshape(2, 2), ('data', 'model'))\n"
        "x = np.arange(32.0).reshape(4, 8)\n"
        "got = tracer.shard_map(lambda a: a * (10 * lax.axis_index('data')\n"
        "    + lax.axis_index('model')), mesh2, P('data', 'model'), P('data', 'model'))(x)\n"
        "np.testing.assert_array_equal(got, x * np.repeat(np.repeat([[0, 1], [10, 11]], 2,\n"
        "                              0), 4, 1))\n"
        "got = tracer.shard_map(lambda a: a + lax.axis_index('model'), mesh2,\n"
        "                       P(('data', 'model')), P(('data', 'model')))(x)\n"
        "np.testing.assert_array_equal(got, x + np.array([0, 1, 0, 1])[:, None])\n"
        "got = tracer.shard_map(lambda a: lax.psum(a, ('data', 'model')), mesh2,\n"
        "                       P('data', 'model'), P())(x)\n"
        "np.testing.assert_array_equal(got, x.reshape(2, 2, 2, 4).sum((0, 2)))\n"
        "try:\n"
        "    tracer.shard_map(lambda a: a, mesh2, P('data', 'model'), P('data'))(x)\n"
        "except ValueError as e:\n"
        "    assert \"varies over mesh axis 'model'\" in str(e), e\n"
        "else:\n"
        "    raise AssertionError('a varying output with a replicated spec did not raise')\n"
        "print('ok')\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_LOCALNRANKS"))}
    env.update(TRACER_NUM_CPU_DEVICES="4", TRACER_JIT_COMPILE="none", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
