"""Run under ``mpiexec -n P`` by tests/test_distributed.py: process 1 fails while the
others wait in a psum over the pmap axis. ``argv[1]`` is how it fails: ``raise`` (an
uncaught exception: tracer.distributed's excepthook aborts the job), ``exit`` (it exits
with status 3 without finalizing MPI) or ``kill`` (SIGKILL). The job must end, non-zero,
instead of hanging."""
import os
import signal
import sys

import numpy as np

import tracer
from tracer import lax

tracer.distributed.initialize()
how = sys.argv[1]
psum = tracer.pmap(lambda x: lax.psum(x, "i"), axis_name="i")
psum(np.ones((1, 3)))            # every process gets here: MPI works
if tracer.process_index() == 1:
    if how == "raise":
        raise RuntimeError("boom on purpose")
    if how == "exit":
        os._exit(3)
    if how == "sysexit":
        sys.exit(0)
    os.kill(os.getpid(), signal.SIGKILL)
psum(np.ones((1, 3)))            # the others wait here for process 1
print("UNREACHABLE", flush=True)
