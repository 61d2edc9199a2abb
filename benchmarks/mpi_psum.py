"""psum over a multi-process pmap axis against the raw mpi4py Allreduce on the same
buffers (issue 19's target: <= 1.1x raw MPI).

    mpiexec -n 4 python benchmarks/mpi_psum.py [repeats]

Rank 0 prints, per size, the median seconds of: raw ``comm.Allreduce`` on a
preallocated float32 buffer; ``jit(pmap(psum))`` (the MPI step as a host step, with its
header exchange and output allocation); eager ``pmap(psum)``.
"""
import sys
import time

import numpy as np

import tracer
from tracer import lax


def median_time(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main():
    from mpi4py import MPI
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    tracer.distributed.initialize()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    psum = tracer.pmap(lambda x: lax.psum(x, "i"), axis_name="i")
    jpsum = tracer.jit(psum)
    for mb in (1, 64):
        n = mb * (1 << 20) // 4
        x = np.random.default_rng(rank).standard_normal((1, n)).astype(np.float32)
        out = np.empty_like(x)
        raw = median_time(lambda: comm.Allreduce(x, out, op=MPI.SUM), repeats)
        want = out.copy()
        jit_t = median_time(lambda: jpsum(x).block_until_ready(), repeats)
        eager = median_time(lambda: psum(x), repeats)
        np.testing.assert_allclose(np.asarray(jpsum(x)), want, rtol=1e-6, atol=1e-5)
        if rank == 0:
            print(f"{size} processes, {mb:3d} MB f32: raw Allreduce {raw * 1e3:8.2f} ms, "
                  f"jit(pmap(psum)) {jit_t * 1e3:8.2f} ms ({jit_t / raw:.2f}x), "
                  f"eager pmap {eager * 1e3:8.2f} ms ({eager / raw:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
