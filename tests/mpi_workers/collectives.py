"""Run under ``mpiexec -n P`` by tests/test_distributed.py: every collective over a
multi-process pmap axis, and its gradient, against the single-process
``vmap(axis_name=...)`` over the stacked blocks of every process.

Each process builds the same global input (a fixed seed), passes its own block to
``pmap`` and compares its block of the result with its block of vmap's. A mismatch
raises AssertionError: the job aborts (tracer.distributed's excepthook) and mpiexec
exits non-zero. Each passing case prints ``OK <case> rank=<r>``, and the names of the
passed cases go to ``<argv[1]>/rank<r>.txt`` (one file per process: the launcher
interleaves the processes' stdout), which the test compares across the processes.
"""
import os
import sys

import numpy as np

import tracer
import tracer.numpy as tnp
from tracer import lax

tracer.distributed.initialize()
P, R, L = tracer.process_count(), tracer.process_index(), tracer.local_device_count()
N = P * L
assert P > 1, "run me under mpiexec -n 2 or more"
assert tracer.device_count() == N and len(tracer.devices()) == N
assert [d.id for d in tracer.local_devices()] == list(range(R * L, R * L + L))
rng = np.random.default_rng(0)
block = slice(R * L, (R + 1) * L)
passed = []


def check(name, got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (
        name, got.shape, got.dtype, want.shape, want.dtype)
    if np.issubdtype(got.dtype, np.inexact):
        tol = 1e-5 if got.dtype in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
    else:
        # integers and bools: bit for bit
        np.testing.assert_array_equal(got, want, err_msg=name)
    print(f"OK {name} rank={R}", flush=True)
    passed.append(name)


def same_as_vmap(name, f, *xs, in_axes=0, out_axes=0):
    """pmap(f) on this process's blocks == this process's block of vmap(f) over all."""
    got = tracer.pmap(f, axis_name="i", in_axes=in_axes, out_axes=out_axes)(
        *[x if a is None else x[block] for x, a in zip(xs, _axes(in_axes, xs))])
    want = tracer.vmap(f, axis_name="i", in_axes=in_axes, out_axes=out_axes)(*xs)
    for k, (g, w) in enumerate(zip(tracer.tree_util.tree_leaves(got),
                                   tracer.tree_util.tree_leaves(want))):
        w = np.asarray(w)
        check(f"{name}[{k}]", g, w if out_axes is None else w[block])


def _axes(in_axes, xs):
    return in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(xs)


def grads_same_as_vmap(name, f, x):
    """grad of a weighted sum of pmap(f)'s outputs == this block of vmap's grad: the
    global loss is the sum of the processes' losses (psum transposes to psum)."""
    w = rng.standard_normal((N,) + _out_shape(f, x))

    def loss_p(xl):
        return tnp.sum(tracer.pmap(f, axis_name="i")(xl) * w[block])

    def loss_v(xg):
        return tnp.sum(tracer.vmap(f, axis_name="i")(xg) * w)

    check(f"grad {name}", tracer.grad(loss_p)(x[block]), np.asarray(tracer.grad(loss_v)(x))[block])
    # the other order: per-member grads inside the mapped function
    g = lambda xi: tnp.sum(f(xi) * tnp.arange(1.0, 1.0 + np.prod(_out_shape(f, x))).reshape(
        _out_shape(f, x)))
    check(f"pmap(grad) {name}", tracer.pmap(tracer.grad(g), axis_name="i")(x[block]),
          np.asarray(tracer.vmap(tracer.grad(g), axis_name="i")(x))[block])


def _out_shape(f, x):
    return tuple(tracer.eval_shape(tracer.vmap(f, axis_name="i"), x).shape[1:])


f32 = rng.standard_normal((N, 3, 4)).astype(np.float32)
f64 = rng.standard_normal((N, 3, 4))
i32 = rng.integers(-1000, 1000, (N, 3, 4)).astype(np.int32)
sq = rng.standard_normal((N, N, 3))          # a dim of the axis size, for scatter/all_to_all
sq_t = rng.standard_normal((N, 2 * N, 3))    # a multiple of it (tiled)
nan = f32.copy()
nan[0, 0, 0] = np.nan

# ---- reductions
same_as_vmap("psum f32", lambda x: lax.psum(x, "i"), f32)
same_as_vmap("psum f64", lambda x: lax.psum(x, "i"), f64)
same_as_vmap("psum i32", lambda x: lax.psum(x, "i"), i32)
same_as_vmap("psum pytree", lambda x, y: lax.psum({"a": x, "b": (y,)}, ("i",)), f64, i32)
same_as_vmap("psum unmapped", lambda x, c: lax.psum(c, "i") + x, f64, f64[0],
             in_axes=(0, None))
same_as_vmap("pmean f32", lambda x: lax.pmean(x, "i"), f32)
same_as_vmap("pmean i32", lambda x: lax.pmean(x, "i"), i32)
same_as_vmap("pmax f32 nan", lambda x: lax.pmax(x, "i"), nan)
same_as_vmap("pmin i32", lambda x: lax.pmin(x, "i"), i32)
same_as_vmap("pmax i32", lambda x: lax.pmax(x, "i"), i32)
same_as_vmap("normalize", lambda x: x / lax.psum(x, "i"), f64)
# 0-d members (a loss, a step counter)
same_as_vmap("psum scalar", lambda x: lax.psum(x[0, 0], "i"), f32)
same_as_vmap("pmax scalar", lambda x: lax.pmax(x[0, 0], "i"), i32)
same_as_vmap("all_gather scalar", lambda x: lax.all_gather(x[0, 0], "i"), f64)
same_as_vmap("pbroadcast scalar", lambda x: lax.pbroadcast(x[0, 0], "i", 0), f64)
same_as_vmap("ppermute scalar", lambda x: lax.ppermute(
    x[0, 0], "i", [(j, (j + 1) % N) for j in range(N)]), i32)
# ---- gathers, indices, scatters, exchanges
same_as_vmap("axis_index", lambda x: lax.axis_index("i") + 0 * x[0, 0].astype(np.int32), i32)
same_as_vmap("all_gather", lambda x: lax.all_gather(x, "i"), i32)
same_as_vmap("all_gather axis=2", lambda x: lax.all_gather(x, "i", axis=2), f64)
same_as_vmap("all_gather tiled", lambda x: lax.all_gather(x, "i", axis=1, tiled=True), i32)
same_as_vmap("psum_scatter", lambda x: lax.psum_scatter(x, "i"), sq)
same_as_vmap("psum_scatter tiled", lambda x: lax.psum_scatter(
    x, "i", scatter_dimension=0, tiled=True), sq_t)
same_as_vmap("all_to_all", lambda x: lax.all_to_all(x, "i", 0, 1), sq)
same_as_vmap("all_to_all 0->0", lambda x: lax.all_to_all(x, "i", 0, 0), sq)
same_as_vmap("all_to_all tiled", lambda x: lax.all_to_all(x, "i", 0, 1, tiled=True), sq_t)
same_as_vmap("ppermute shift", lambda x: lax.ppermute(
    x, "i", [(j, (j + 1) % N) for j in range(N)]), i32)
same_as_vmap("ppermute partial", lambda x: lax.ppermute(x, "i", [(N - 1, 0), (0, N - 1)]),
             f64)
same_as_vmap("pbroadcast", lambda x: lax.pbroadcast(x, "i", N - 1), i32)
same_as_vmap("pshuffle", lambda x: lax.pshuffle(x, "i", list(reversed(range(N)))), f32)
# ---- psend / precv: the data crosses the processes at the precv (MPI_Sendrecv)
from tracer import ShapeDtypeStruct  # noqa: E402
shift = [(j, (j + 1) % N) for j in range(N)]
back = [(j, (j - 1) % N) for j in range(N)]


def send_recv(x, perm=shift):
    return lax.precv(lax.psend(x, "i", perm), ShapeDtypeStruct(x.shape, x.dtype), "i", perm)


def two_sends(x, y):
    # two posts on one perm: first sent, first received; a second perm in between
    t1, t2 = lax.psend(x, "i", shift), lax.psend(y, "i", shift)
    t3 = lax.psend(x * 2, "i", back)
    a = lax.precv(t1, ShapeDtypeStruct(x.shape, x.dtype), "i", shift)
    c = lax.precv(t3, ShapeDtypeStruct(x.shape, x.dtype), "i", back)
    b = lax.precv(t2, ShapeDtypeStruct(y.shape, y.dtype), "i", shift)
    return a, b, c


same_as_vmap("psend/precv shift", send_recv, i32)
same_as_vmap("psend/precv partial", lambda x: send_recv(x, [(N - 1, 0), (0, N - 1)]), f64)
same_as_vmap("psend/precv order", two_sends, f64, i32)
same_as_vmap("psend/precv scalar", lambda x: send_recv(x[0, 0]), f32)
same_as_vmap("pmap of jit psend/precv", tracer.jit(send_recv), i32)
check("jit of pmap psend/precv", tracer.jit(tracer.pmap(send_recv, axis_name="i"))(f64[block]),
      np.asarray(tracer.vmap(send_recv, axis_name="i")(f64))[block])
wsr = rng.standard_normal(f64.shape)
check("grad psend/precv",
      tracer.grad(lambda a: tnp.sum(tracer.pmap(lambda x: send_recv(x * x), axis_name="i")(a)
                                    * wsr[block]))(f64[block]),
      np.asarray(tracer.grad(lambda a: tnp.sum(tracer.vmap(
          lambda x: send_recv(x * x), axis_name="i")(a) * wsr))(f64))[block])
try:     # ranks posting different shapes: ValueError on every process, nothing moved
    tracer.pmap(send_recv, axis_name="i")(np.ones((L, 2 + R), np.float32))
except ValueError as e:
    assert "mismatched collectives" in str(e) and "rank 1" in str(e), e
    print(f"OK psend/precv mismatch rank={R}", flush=True)
    passed.append("psend/precv mismatch")
else:
    raise AssertionError("psend/precv of mismatched shapes across processes did not raise")
try:
    tracer.pmap(lambda x: lax.precv(lax.create_token(), ShapeDtypeStruct(x.shape, x.dtype),
                                    "i", shift), axis_name="i")(f64[block])
except ValueError as e:
    assert "nothing was sent" in str(e) and "pmapped" in str(e), e
    print(f"OK precv without psend rank={R}", flush=True)
    passed.append("precv without psend")
else:
    raise AssertionError("precv without a psend did not raise")
# ---- transformations around the pmap'd collectives
same_as_vmap("vmap inside", lambda x: tracer.vmap(lambda r: lax.psum(r, "i"))(x), f64)
same_as_vmap("vmap inside, named", lambda x: tracer.vmap(
    lambda r: lax.psum(r, ("i", "j")), axis_name="j")(x), f64)
outer = tracer.vmap(tracer.pmap(lambda x: lax.all_gather(x, "i"), axis_name="i"))(
    np.stack([i32[block], 2 * i32[block]]))
want = tracer.vmap(tracer.vmap(lambda x: lax.all_gather(x, "i"), axis_name="i"))(
    np.stack([i32, 2 * i32]))
check("vmap outside", outer, np.asarray(want)[:, block])
same_as_vmap("pmap of jit", tracer.jit(lambda x: lax.psum(x, "i") * lax.axis_index("i")), f64)
check("jit of pmap", tracer.jit(tracer.pmap(lambda x: lax.all_gather(x, "i"), axis_name="i"))(
    f64[block]), np.asarray(tracer.vmap(lambda x: lax.all_gather(x, "i"), axis_name="i")(
        f64))[block])
# ---- gradients (JAX's shard_map transposes, per process)
grads_same_as_vmap("psum", lambda x: lax.psum(x, "i") * x, f64)
grads_same_as_vmap("pmean", lambda x: tnp.sin(lax.pmean(x * x, "i")), f64)
grads_same_as_vmap("all_gather", lambda x: lax.all_gather(x, "i") ** 2, f64)
grads_same_as_vmap("psum_scatter", lambda x: lax.psum_scatter(x * x, "i"), sq)
grads_same_as_vmap("all_to_all", lambda x: lax.all_to_all(x, "i", 0, 1) ** 2, sq)
grads_same_as_vmap("ppermute", lambda x: lax.ppermute(
    x * x, "i", [(j, (j + 1) % N) for j in range(N)]), f64)
grads_same_as_vmap("pbroadcast", lambda x: lax.pbroadcast(x, "i", N - 1) * x, f64)
grads_same_as_vmap("axis_index", lambda x: x * lax.axis_index("i"), f64)

# ---- shard_map over a 1-D mesh of every device: each process passes its own shard (its
# devices' blocks of the global array, concatenated along the partitioned dimension)
from tracer.sharding import Mesh, PartitionSpec as Spec  # noqa: E402
mesh = Mesh(np.array(tracer.devices()), ("x",))
glob = rng.standard_normal((N * 2, 3))
mine = glob[R * L * 2:(R + 1) * L * 2]
blocks = glob.reshape(N, 2, 3)
check("shard_map psum", tracer.shard_map(lambda a: lax.psum(a, "x"), mesh, Spec("x"), Spec())(
    mine), blocks.sum(0))
sm = lambda a, b: a * lax.axis_index("x") + lax.pmean(a, "x") * b
got = tracer.shard_map(sm, mesh, in_specs=(Spec("x"), Spec()), out_specs=Spec("x"))(mine, 3.0)
want = np.asarray(tracer.vmap(lambda a: sm(a, 3.0), axis_name="x")(blocks))
check("shard_map sharded out", got, want.reshape(N * 2, 3)[R * L * 2:(R + 1) * L * 2])
got = tracer.shard_map(lambda a: lax.all_gather(a, "x", axis=1, tiled=True), mesh,
                       Spec(None, "x"), Spec())(glob.T[:, R * L * 2:(R + 1) * L * 2].copy())
check("shard_map all_gather", got, glob.T)
wt = rng.standard_normal(glob.shape)
g = tracer.grad(lambda a: tnp.sum(tracer.shard_map(sm, mesh, (Spec("x"), Spec()), Spec("x"))(
    a, 2.0) * wt[R * L * 2:(R + 1) * L * 2]))(mine)
gv = tracer.grad(lambda a: tnp.sum(tracer.vmap(lambda x: sm(x, 2.0), axis_name="x")(a)
                                   * wt.reshape(N, 2, 3)))(blocks)
check("grad shard_map", g, np.asarray(gv).reshape(N * 2, 3)[R * L * 2:(R + 1) * L * 2])

# ---- pooled outputs (lax/mpi.py _output): an output still held is never reused; a
# dropped one is (no fresh pages per call)
jps = tracer.jit(tracer.pmap(lambda x: lax.psum(x, "i"), axis_name="i"))
big = np.full((L, 1 << 15), R + 1.0, np.float32)       # 128 KiB per process
held = jps(big)
again = jps(2 * big)
held_view = np.asarray(jps(3 * big))[:, 1:]
check("pool keeps held outputs", np.stack([np.asarray(held)[0, 0], np.asarray(again)[0, 0],
                                           held_view[0, 0]]),
      np.float32([1, 2, 3]) * L * sum(range(1, P + 1)))
del held, again, held_view
addrs = {np.asarray(jps(big)).ctypes.data for _ in range(3)}
assert len(addrs) == 1, f"dropped psum outputs were not reused: {len(addrs)} buffers"
passed.append("pool reuses dropped outputs")
# ---- mismatched operands across processes: a clear error on every process, before any
# buffer is exchanged (and the processes can go on)
try:
    tracer.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(np.ones((L, 2 + R), np.float32))
except ValueError as e:
    assert "mismatched collectives" in str(e) and "rank 1" in str(e), e
    print(f"OK mismatch rank={R}", flush=True)
    passed.append("mismatch")
else:
    raise AssertionError("mismatched shapes across processes did not raise")
try:
    tracer.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(
        np.ones((L, 2), np.float32 if R == 0 else np.float64))
except ValueError as e:
    assert "float32" in str(e) and "float64" in str(e), e
    print(f"OK mismatch dtype rank={R}", flush=True)
    passed.append("mismatch dtype")
else:
    raise AssertionError("mismatched dtypes across processes did not raise")
# wrong local block size
try:
    tracer.pmap(lambda x: x, axis_name="i")(np.ones((L + 1, 2)))
except ValueError as e:
    assert "local device count" in str(e), e
    print(f"OK block size rank={R}", flush=True)
    passed.append("block size")
same_as_vmap("after errors", lambda x: lax.psum(x, "i"), i32)
if len(sys.argv) > 1:
    with open(os.path.join(sys.argv[1], f"rank{R}.txt"), "w") as fh:
        fh.write("\n".join(passed) + "\n")
print(f"DONE rank={R}", flush=True)
