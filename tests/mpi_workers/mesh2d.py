"""Run under ``mpiexec -n 4`` by tests/test_distributed.py: shard_map over a 2x2
(data, model) mesh, one device per process, each mesh axis an MPI sub-communicator.
Each process passes its shard of a global array and checks its shard of the result
against the global result computed with NumPy; names of passed cases go to
``<argv[1]>/rank<r>.txt``."""
import os
import sys

import numpy as np

import tracer
import tracer.numpy as tnp
from tracer import lax
from tracer.sharding import Mesh, PartitionSpec as P

R = tracer.process_index()
assert tracer.process_count() == 4 and tracer.local_device_count() == 1
mesh = Mesh(np.array(tracer.devices()).reshape(2, 2), ("data", "model"))
a, b = divmod(R, 2)                       # this process's (data, model) coordinates
x = np.arange(32.0).reshape(4, 8) ** 1.5
blk = x[2 * a:2 * a + 2, 4 * b:4 * b + 4]  # its shard under P('data', 'model')
passed = []


def check(name, got, want):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13, atol=1e-12, err_msg=name)
    passed.append(name)
    print(f"OK {name} rank={R}", flush=True)


sm = tracer.shard_map
check("psum model", sm(lambda v: lax.psum(v, "model"), mesh, P("data", "model"),
                       P("data", None))(blk),
      x[2 * a:2 * a + 2].reshape(2, 2, 4).sum(1))
check("psum both", sm(lambda v: lax.psum(v, ("data", "model")), mesh, P("data", "model"),
                      P())(blk), x.reshape(2, 2, 2, 4).sum((0, 2)))
check("axis_index", sm(lambda v: v * (10 * lax.axis_index("data") + lax.axis_index("model")),
                       mesh, P("data", "model"), P("data", "model"))(blk), blk * (10 * a + b))
check("all_gather data", sm(lambda v: lax.all_gather(v, "data", tiled=True), mesh,
                            P("data", "model"), P(None, "model"))(blk), x[:, 4 * b:4 * b + 4])
check("matmul", sm(lambda u, v: u @ v, mesh, (P("data", None), P(None, "model")),
                   P("data", "model"))(x[2 * a:2 * a + 2], x.T[:, 2 * b:2 * b + 2]),
      (x @ x.T)[2 * a:2 * a + 2, 2 * b:2 * b + 2])
check("ppermute model", sm(lambda v: lax.ppermute(v, "model", [(0, 1), (1, 0)]), mesh,
                           P("data", "model"), P("data", "model"))(blk),
      x[2 * a:2 * a + 2, 4 * (1 - b):4 * (1 - b) + 4])
check("jit psum data", tracer.jit(sm(lambda v: lax.pmean(v, "data"), mesh, P("data", "model"),
                                     P(None, "model")))(blk),
      x[:, 4 * b:4 * b + 4].reshape(2, 2, 4).mean(0))
W = np.arange(8.0).reshape(4, 2) + 1      # the weights of each data row block
g = tracer.grad(lambda v: tnp.sum(sm(lambda u: lax.psum(u * u, "model"), mesh,
                                     P("data", "model"), P("data", None))(v)
                                  * W[2 * a:2 * a + 2, :1]))(blk)
# the output, replicated over "model", is one global value (JAX's shard_map): the loss
# counts it once, though processes (a, 0) and (a, 1) both hold it
check("grad psum model", g, 2 * blk * W[2 * a:2 * a + 2, :1])

# Replicated values under grad, as JAX's global semantics: the loss of a replicated output
# (out_specs=P()) counts once, a replicated input's cotangent sums every process's part.
g = tracer.grad(lambda v: tnp.sum(sm(lambda u: lax.psum(u * u, ("data", "model")), mesh,
                                     P("data", "model"), P())(v)))(blk)
check("grad psum P()", g, 2 * blk)
th0 = 0.5
loss = lambda th, v: sm(lambda t, u: lax.pmean(tnp.sum((t * u) ** 2), ("data", "model")),
                        mesh, (P(), P("data", "model")), P())(th, v)
want = np.mean([np.sum(2 * th0 * x[2 * i:2 * i + 2, 4 * j:4 * j + 4] ** 2)
                for i in range(2) for j in range(2)])
check("grad data-parallel pmean", tracer.grad(loss)(tnp.asarray(th0), blk), want)
check("jit grad data-parallel pmean", tracer.jit(tracer.grad(loss))(tnp.asarray(th0), blk),
      want)
check("grad replicated pass-through", tracer.grad(
    lambda t: sm(lambda u: u * 3.0, mesh, P(), P())(t))(tnp.asarray(2.0)), 3.0)
row = x[R:R + 1]                          # pmap over all 4 processes, one member each
g = tracer.grad(lambda v: tnp.sum(tracer.pmap(lambda u: lax.psum(u * u, "i"), axis_name="i",
                                              out_axes=None)(v)))(row)
check("grad pmap out_axes=None", g, 2 * row)
g = tracer.grad(lambda t: tnp.sum(tracer.pmap(lambda u, t: u * t, axis_name="i",
                                              in_axes=(0, None))(row, t)))(tnp.asarray(1.0))
check("grad pmap in_axes=None", g, x[:4].sum())
if len(sys.argv) > 1:
    with open(os.path.join(sys.argv[1], f"rank{R}.txt"), "w") as fh:
        fh.write("\n".join(passed) + "\n")
