"""Processes and devices: the MPI runtime behind multi-process ``pmap``.

tracer runs SPMD programs over MPI processes (``mpiexec -n 4 python prog.py``), through
mpi4py. Each process owns ``local_device_count`` CPU "devices"; ``pmap`` maps a function
over its local devices with the vmap machinery, and a collective over the pmap's axis
name combines the local members first and then the processes, by an MPI call on the
NumPy buffers (a host step of the program, see ``lax/mpi.py``).

- ``initialize(local_device_count=None)`` reads the MPI environment. Launched by
  ``mpiexec``/``mpirun``/``srun`` (the launcher's ``PMI_*``, ``OMPI_*``, ``PMIX_*`` or
  ``MPI_LOCALNRANKS`` variables are set), it imports mpi4py (which calls ``MPI_Init``)
  and uses a duplicate of ``MPI.COMM_WORLD``, so that a program's own MPI traffic never
  matches tracer's. Otherwise it is a single process and mpi4py is not imported. It is
  called by the first query below, so calling it is optional; calling it again is a
  no-op (a different ``local_device_count`` then raises ValueError).
- ``process_index()`` / ``process_count()``: this process's rank and the number of
  processes (0 and 1 without MPI), as ``jax.process_index`` / ``jax.process_count``.
- ``devices()`` / ``local_devices()``: every process's devices (global ids
  ``process_index * local_device_count + i``, in process order) and this process's.

Several devices per process: ``TRACER_NUM_CPU_DEVICES=4`` (or
``initialize(local_device_count=4)``) gives each process 4 devices, as JAX users write
``XLA_FLAGS=--xla_force_host_platform_device_count=4``. They are logical devices: a
process runs its members with vmap's batched primitives on its own cores. Every process
must have the same count (checked at initialize, ValueError otherwise).

Faults: once MPI is initialized with more than one process, an uncaught exception in any
process prints its traceback, then ``tracer.distributed: process R of N raised ...;
aborting the MPI job`` on stderr, and calls ``MPI_Abort``: the launcher ends every
process and exits non-zero, instead of the others waiting forever in a collective
(``sys.excepthook`` is chained, not replaced). A process killed by a signal ends the job
through the launcher (mpich's hydra kills the others and exits non-zero).

Requires the ``mpi`` extra (``pip install tracer-numba[mpi]``: mpi4py and the mpich
wheel, which provides ``mpiexec``) for more than one process. This module imports only
NumPy and the standard library; mpi4py loads in ``initialize``.
"""
from __future__ import annotations

import os
import sys
import threading

__all__ = ["initialize", "is_initialized", "process_index", "process_count", "devices",
           "local_devices", "local_device_count", "Device", "ProcessGroup", "world"]

# Variables MPI launchers set in the processes they start (mpich/hydra: PMI_*; Open MPI:
# OMPI_COMM_WORLD_*; PMIx launchers, Slurm's srun: PMIX_*; Intel MPI and mpich: MPI_LOCALNRANKS).
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMI_FD", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                  "MPI_LOCALNRANKS")
_ENV_DEVICES = "TRACER_NUM_CPU_DEVICES"

_lock = threading.RLock()
_world: "ProcessGroup | None" = None


class Device:
    """One logical CPU device: ``id`` (global, unique across processes),
    ``process_index`` (the process owning it), ``platform`` ("cpu")."""

    __slots__ = ("id", "process_index")
    platform = "cpu"
    device_kind = "cpu"

    def __init__(self, id: int, process_index: int):
        self.id = id
        self.process_index = process_index

    def __repr__(self):
        return f"CpuDevice(id={self.id}, process_index={self.process_index})"

    def __eq__(self, other):
        return (isinstance(other, Device) and other.id == self.id
                and other.process_index == self.process_index)

    def __hash__(self):
        return hash((Device, self.id))


class ProcessGroup:
    """The processes a pmap axis spans: ``comm`` (an mpi4py communicator, None for one
    process), ``rank``, ``size`` (processes) and ``local_size`` (devices per process).
    Hashed by identity: it is a static param of the MPI primitives (``lax/mpi.py``)."""

    def __init__(self, comm, rank: int, size: int, local_size: int):
        self.comm = comm
        self.rank = rank
        self.size = size
        self.local_size = local_size

    def __repr__(self):
        return f"ProcessGroup(rank={self.rank}, processes={self.size}, local={self.local_size})"


def _launched_by_mpi() -> bool:
    return any(v in os.environ for v in _LAUNCHER_VARS)


def _env_device_count() -> int:
    raw = os.environ.get(_ENV_DEVICES)
    if raw is None or raw == "":
        return 1
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"tracer.distributed: {_ENV_DEVICES}={raw!r} must be a positive "
                         "integer (the number of CPU devices of each process)")
    return n


def initialize(local_device_count: int | None = None) -> None:
    """Set up the processes and devices (see the module docstring): under an MPI launcher,
    import mpi4py and use a duplicate of COMM_WORLD; else one process. The local device
    count is ``local_device_count``, else ``TRACER_NUM_CPU_DEVICES``, else 1.

    Raises ImportError (naming the fix) when launched by an MPI launcher with more than
    one process but mpi4py is missing (each process would otherwise compute alone,
    silently), ValueError for a count that is not a positive int, differs between
    processes, or differs from an earlier initialize."""
    global _world
    with _lock:
        if local_device_count is not None:
            if (isinstance(local_device_count, bool) or not isinstance(local_device_count, int)
                    or local_device_count < 1):
                raise ValueError(f"tracer.distributed.initialize: local_device_count must be "
                                 f"a positive int, got {local_device_count!r}")
        if _world is not None:
            if local_device_count is not None and local_device_count != _world.local_size:
                raise ValueError(
                    f"tracer.distributed.initialize: already initialized with "
                    f"{_world.local_size} local devices, asked for {local_device_count}; "
                    "call initialize once, before the first pmap or device query")
            return
        n_local = local_device_count if local_device_count is not None else _env_device_count()
        if not _launched_by_mpi():
            _world = ProcessGroup(None, 0, 1, n_local)
            return
        try:
            from mpi4py import MPI
        except ImportError as e:
            size = os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE")
            if size in (None, "", "1"):
                _world = ProcessGroup(None, 0, 1, n_local)
                return
            raise ImportError(
                f"tracer.distributed.initialize: this process was started by an MPI "
                f"launcher ({size} processes) but mpi4py cannot be imported ({e}); install "
                "the 'mpi' extra: pip install 'tracer-numba[mpi]' (mpi4py and mpich)") from e
        comm = MPI.COMM_WORLD.Dup()
        rank, size = comm.Get_rank(), comm.Get_size()
        counts = comm.allgather(n_local)
        if len(set(counts)) != 1:
            raise ValueError(f"tracer.distributed.initialize: the processes have different "
                             f"local device counts {counts} (rank r has counts[r]); give "
                             f"every process the same {_ENV_DEVICES} / local_device_count")
        _world = ProcessGroup(comm if size > 1 else None, rank, size, n_local)
        if size > 1:
            _install_abort_hook(rank, size, MPI)
            _share_blas_threads(comm, MPI)


def _share_blas_threads(comm, MPI):
    """Give each process of a node its share of the node's cores for BLAS.

    NumPy's OpenBLAS starts one thread per core in *every* process; with several
    processes per node those threads, and MPI's busy-polling waits, oversubscribe the
    cores: tutorial 08's step took 243 ms on 2 processes of a 2-core machine instead of
    2.6 ms with one BLAS thread each. So, unless ``TRACER_MPI_BLAS_THREADS`` says
    otherwise (a count; 0 leaves BLAS alone), the BLAS libraries loaded in the process
    get ``max(1, cores // processes on this node)`` threads, through threadpoolctl (a
    dependency of scikit-learn; without it, a warning names the fix: set
    OPENBLAS_NUM_THREADS / OMP_NUM_THREADS in the launcher's environment)."""
    raw = os.environ.get("TRACER_MPI_BLAS_THREADS", "")
    if raw == "0":
        return
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    per_node = node.Get_size()
    node.Free()
    try:
        n = int(raw) if raw else max(1, (os.cpu_count() or 1) // per_node)
    except ValueError:
        raise ValueError(f"tracer.distributed: TRACER_MPI_BLAS_THREADS={raw!r} must be an "
                         "integer (BLAS threads per process; 0: leave BLAS alone)") from None
    try:
        import threadpoolctl
    except ImportError:
        import warnings
        warnings.warn(f"tracer.distributed: {per_node} processes share this node's "
                      f"{os.cpu_count()} cores, and BLAS may start a thread per core in "
                      f"each; install threadpoolctl, or launch with OPENBLAS_NUM_THREADS={n} "
                      f"OMP_NUM_THREADS={n}", RuntimeWarning, stacklevel=3)
        return
    # kept for the life of the process (threadpool_limits as a plain call, not a context)
    global _blas_limits
    _blas_limits = threadpoolctl.threadpool_limits(limits=n, user_api="blas")


_blas_limits = None


def _install_abort_hook(rank, size, MPI):
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        # The traceback first (the previous hook), then the rank, then the abort: the
        # other processes may be waiting in a collective that would never complete.
        try:
            previous(exc_type, exc, tb)
            sys.stderr.write(f"tracer.distributed: process {rank} of {size} raised "
                             f"{exc_type.__name__}: {exc}; aborting the MPI job\n")
            sys.stderr.flush()
        finally:
            MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook

    def thread_hook(args):
        hook(args.exc_type, args.exc_value, args.exc_traceback)

    threading.excepthook = thread_hook


def is_initialized() -> bool:
    """Whether ``initialize`` has run (explicitly or through a query)."""
    return _world is not None


def world() -> ProcessGroup:
    """The group of all processes (initializing on first use)."""
    if _world is None:
        initialize()
    return _world


def process_index() -> int:
    """This process's index, 0 ... process_count() - 1 (jax.process_index); 0 without
    MPI."""
    return world().rank


def process_count() -> int:
    """The number of processes (jax.process_count); 1 without MPI."""
    return world().size


def device_count() -> int:
    """The number of devices of every process together (jax.device_count)."""
    w = world()
    return w.size * w.local_size


def local_device_count() -> int:
    """The number of devices of this process (jax.local_device_count)."""
    return world().local_size


def devices() -> list:
    """Every process's devices, ordered by global id (jax.devices)."""
    w = world()
    return [Device(p * w.local_size + i, p) for p in range(w.size)
            for i in range(w.local_size)]


def local_devices() -> list:
    """This process's devices (jax.local_devices)."""
    w = world()
    return [Device(w.rank * w.local_size + i, w.rank) for i in range(w.local_size)]
