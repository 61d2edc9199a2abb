"""The loop runner: one compiled function, kept in Numba's disk cache for the installation,
that runs a scan whose body only calls compiled functions, without a generated driver.

A generated driver (``numba_backend.control_flow``) costs Numba 0.3-1.3 s of compile per
loop, about 5-10 ms per statement it types and lowers, however little the statement does.
A scan whose steps are all calls (kernels, ``driver_runtime.dot_mm`` matrix products,
reshaped views) needs none of that code: ``run_scan`` walks a table of call sites
instead (and copies carries and stacked outputs itself, ``copy_bytes``), and a program's
loop runs at compiled speed as soon as its body's kernels are compiled.

How a site is called: Numba passes each array argument of a compiled function as the
flat fields of its structure (meminfo, parent, size, itemsize, data, shape..., strides...),
every one a 64-bit integer or pointer, after the return-value and exception pointers. A
site is then a row of 64-bit words, built once from the static shapes, whose data
pointers ``run_scan`` patches each iteration (the row ``i`` of a stacked input or output,
the current or next buffer of a carry). ``call_words`` calls the function's address with
a fixed number of word arguments (the smallest of ``BUCKETS`` that holds the site's):
under the C calling convention of x86-64 and AArch64 the callee reads its own arguments
and never the extra ones (integer arguments travel in registers, then in the caller's
stack area). The meminfo fields are null: the callees are kernels and copy or product
functions, which keep no reference to their operands (Numba's reference counting skips
null meminfos). A matrix product calls BLAS GEMM or GEMV itself (``call_c_words``), the
library NumPy's matmul calls (``numba_backend.numpy_blas``: the same bits as the NumPy
tier), or where that is not found Numba's own C wrapper, with the arguments a compiled
``dot_mm`` would pass it; so no product function is compiled for the loop at all
(``_blas_call``).

Which scans run here (``plan_scan``): one level of loop (no nested control flow), body
steps that are kernels, ``dot_general`` steps of two float matrices and reshaped views,
and at least one call worth making (a body whose every kernel the driver would paste in,
small element-wise work, runs faster as a generated driver: see ``control_flow``).
"""
from __future__ import annotations

import numpy as np

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit
import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from numba_backend import numpy_blas
from numba_backend.compile_worker import numba_types
from numba_backend.driver_runtime import dot_mm_call
from numba_backend.storage import from_storage, storage_dtype, to_storage

# The word counts ``call_words`` calls with: a site of up to BUCKETS[-1] words
BUCKETS = (16, 64, 256)
_I64 = ir.IntType(64)


@intrinsic
def call_words(typingctx, addr, words, start, count):
    """Call the Numba-compiled function at ``addr`` with the ``count`` 64-bit words
    ``words[start:start + count]`` as its flattened arguments (see the module docstring;
    ``words`` holds at least ``BUCKETS[-1]`` more words after them), its status and
    exception propagated as for a linked call. The function returns an int64, dropped."""
    if not (isinstance(addr, types.Integer) and isinstance(words, types.Array)
            and words.dtype == types.int64 and words.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        addr_v, words_v, start_v, count_v = args
        arr = context.make_array(sig.args[1])(context, builder, words_v)
        base = builder.gep(arr.data, [start_v])
        proto = context.call_conv.get_function_type(types.int64, ())
        ret_t, exc_t = proto.args[0], proto.args[1]
        retval = cgutils.alloca_once(builder, ret_t.pointee)
        builder.store(cgutils.get_null_value(ret_t.pointee), retval)
        excinfo = cgutils.alloca_once(builder, exc_t.pointee, name="excinfo")
        code_slot = cgutils.alloca_once(builder, proto.return_type)
        count_v = context.cast(builder, count_v, sig.args[3], types.int64)
        end = builder.append_basic_block("call_words.end")
        for n in BUCKETS:
            fnty = ir.FunctionType(proto.return_type, [ret_t, exc_t] + [_I64] * n)
            here = builder.append_basic_block(f"call_words.{n}")
            nxt = builder.append_basic_block(f"call_words.not{n}")
            if n == BUCKETS[-1]:
                builder.branch(here)
            else:
                fits = builder.icmp_signed("<=", count_v, ir.Constant(_I64, n))
                builder.cbranch(fits, here, nxt)
            builder.position_at_end(here)
            fn = builder.inttoptr(addr_v, fnty.as_pointer())
            vals = [builder.load(builder.gep(base, [ir.Constant(_I64, j)])) for j in range(n)]
            builder.store(builder.call(fn, [retval, excinfo] + vals), code_slot)
            builder.branch(end)
            builder.position_at_end(nxt)
        builder.unreachable()
        builder.position_at_end(end)
        status = context.call_conv._get_return_status(builder, builder.load(code_slot),
                                                      builder.load(excinfo))
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(addr, words, start, count), codegen


@intrinsic
def copy_bytes(typingctx, dst, src, nbytes):
    """``memcpy(dst, src, nbytes)`` between two addresses (integers): a copy site."""
    if not all(isinstance(t, types.Integer) for t in (dst, src, nbytes)):
        return None

    def codegen(context, builder, sig, args):
        vp = cgutils.voidptr_t
        d = builder.inttoptr(args[0], vp)
        s = builder.inttoptr(args[1], vp)
        cgutils.raw_memcpy(builder, d, s, args[2], 1)
        return context.get_dummy_value()

    return types.none(dst, src, nbytes), codegen


# ``run_scan``'s argument types (``compile_worker.array_spec``)
RUN_SCAN_SIG = [[np.dtype(np.int64).str, nd, False] for nd in (1, 2, 2, 1, 1)]

# patch kinds: a fixed base, the current buffer of a carry pair, its next buffer
FIXED, CURRENT, NEXT = 0, 1, 2

# site kinds: a Numba-compiled function, a copy of contiguous bytes, a C function that
# returns a status, a C function that returns nothing (NumPy's BLAS, Fortran interface)
CALL, COPY, CALL_C, CALL_VOID = 0, 1, 2, 3
# the word count of every C call (BLAS: at most 14 arguments)
C_WORDS = 16


@intrinsic
def call_c_words(typingctx, addr, words, start):
    """Call the C function at ``addr`` with the ``C_WORDS`` 64-bit words from
    ``words[start]`` as its arguments (its own fewer arguments, each an integer or pointer
    of at most 64 bits, read from them: see the module docstring); returns its int32
    result as an int64."""
    if not (isinstance(addr, types.Integer) and isinstance(words, types.Array)
            and words.dtype == types.int64 and words.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        addr_v, words_v, start_v = args
        arr = context.make_array(sig.args[1])(context, builder, words_v)
        base = builder.gep(arr.data, [start_v])
        i32 = ir.IntType(32)
        fn = builder.inttoptr(addr_v, ir.FunctionType(i32, [_I64] * C_WORDS).as_pointer())
        vals = [builder.load(builder.gep(base, [ir.Constant(_I64, j)]))
                for j in range(C_WORDS)]
        return builder.sext(builder.call(fn, vals), _I64)

    return types.int64(addr, words, start), codegen


@njit(cache=True, nogil=True, error_model="numpy")
def run_scan(ctl, sites, patches, words, bases):
    """Run ``ctl[0]`` iterations of a scan's call sites, backwards when ``ctl[1]`` (``i`` runs
    from ``n - 1`` down). ``sites``: rows (address, first word, word count, first patch, end
    patch, site kind: CALL a Numba-compiled function (``call_words``), COPY contiguous bytes
    (its words the source, the destination and the byte count), CALL_C a C function
    (``call_c_words``: BLAS), whose nonzero result ends the loop and is returned, CALL_VOID
    a C function whose result is ignored); ``patches``: rows (word index, kind, base slot,
    byte offset, bytes per iteration): before each call its patches set ``words[index] =
    bases[slot'] + offset + i * step``, with ``slot'`` the slot itself (FIXED) or, for a
    carry's pair of buffers at ``slot`` and ``slot + 1``, the one the iteration reads
    (CURRENT) or writes (NEXT). After the loop the carries' values are in the buffers at
    ``slot + n % 2``. Every array is int64 and C-contiguous. Returns 0."""
    n, reverse = ctl[0], ctl[1] != 0
    for it in range(n):
        i = n - 1 - it if reverse else it
        par = it & 1
        for s in range(sites.shape[0]):
            for p in range(sites[s, 3], sites[s, 4]):
                slot = patches[p, 2]
                kind = patches[p, 1]
                if kind == CURRENT:
                    slot += par
                elif kind == NEXT:
                    slot += 1 - par
                words[patches[p, 0]] = bases[slot] + patches[p, 3] + i * patches[p, 4]
            w = sites[s, 1]
            how = sites[s, 5]
            if how == COPY:             # (source, destination, bytes)
                copy_bytes(words[w + 1], words[w], words[w + 2])
            elif how == CALL_C:
                code = call_c_words(sites[s, 0], words, w)
                if code != 0:
                    return code
            elif how == CALL_VOID:
                call_c_words(sites[s, 0], words, w)
            else:
                call_words(sites[s, 0], words, w, sites[s, 2])
    return 0


# ------------------------------------------ plans -----------------------------------------

class NotRunnable(Exception):
    """A scan body with a step the loop runner has no call for."""


_ALIGN = 64       # buffers in the scratch arena start at multiples of this many bytes


class _Loc:
    """Where an array of the body lives: a base (``kind``, ``slot``; ``kind`` None: a
    static array of the plan at address ``addr``), a byte offset, bytes per iteration,
    its shape and strides (bytes)."""
    __slots__ = ("kind", "slot", "offset", "step", "shape", "strides", "addr", "dtype")

    def __init__(self, kind, slot, offset, step, shape, strides, dtype, addr=0):
        self.kind, self.slot, self.offset, self.step = kind, slot, offset, step
        self.shape, self.strides, self.dtype, self.addr = \
            tuple(shape), tuple(strides), np.dtype(dtype), addr

    def view(self, shape, strides=None):
        return _Loc(self.kind, self.slot, self.offset, self.step, shape,
                    _c_strides(shape, self.dtype) if strides is None else strides,
                    self.dtype, self.addr)

    def flat(self):
        """A rank >= 1 view of the same elements (C order): 0-d as 1 element."""
        return self.view((int(np.prod(self.shape, dtype=np.int64)),)) \
            if len(self.shape) != 1 else self


def _c_strides(shape, dtype) -> tuple:
    st, acc = [], np.dtype(dtype).itemsize
    for d in reversed(tuple(shape)):
        st.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(st))


class ScanPlan:
    """The call sites of one scan body, as ``run_scan`` takes them, with the buffers each
    call needs (see ``plan_scan``)."""

    def __init__(self):
        self.words: list = []
        self.sites: list = []        # [callee, first word, word count, patch range]
        self.patches: list = []
        self.static: list = []       # arrays whose addresses are in ``words``
        self.text: list = []         # a line per site, for ``as_text``
        self.arena = 0               # bytes of scratch

    def alloc(self, aval) -> _Loc:
        off = -(-self.arena // _ALIGN) * _ALIGN
        dt = storage_dtype(aval.dtype)
        self.arena = off + max(int(np.prod(aval.shape, dtype=np.int64)), 1) * dt.itemsize
        return _Loc(FIXED, ARENA, off, 0, aval.shape, _c_strides(aval.shape, dt), dt)

    def const(self, value, dtype) -> _Loc:
        a = np.ascontiguousarray(to_storage(np.asarray(value, dtype=dtype)))
        a.flags.writeable = False
        self.static.append(a)
        return _Loc(None, 0, 0, 0, a.shape, a.strides, a.dtype,
                    a.__array_interface__["data"][0])

    def site(self, callee, locs, text):
        first, p0 = len(self.words), len(self.patches)
        for loc in locs:
            data = len(self.words) + 4
            self.words += [0, 0, int(np.prod(loc.shape, dtype=np.int64)), loc.dtype.itemsize,
                           loc.addr + loc.offset, *loc.shape, *loc.strides]
            if loc.kind is not None:
                self.patches.append([data, loc.kind, loc.slot, loc.offset, loc.step])
        n = len(self.words) - first
        if n > BUCKETS[-1]:
            raise NotRunnable(f"a call of {n} words")
        self.sites.append([callee, first, n, p0, len(self.patches)])
        self.text.append(text)

    def c_site(self, callee, args, text):
        """A call of a C function: ``args`` are integers (passed as they are) or ``_Loc``
        (the address of its first element)."""
        first, p0 = len(self.words), len(self.patches)
        for a in args:
            if isinstance(a, _Loc):
                if a.kind is not None:
                    self.patches.append([len(self.words), a.kind, a.slot, a.offset, a.step])
                self.words.append(a.addr + a.offset)
            else:
                self.words.append(int(a))
        if len(args) > C_WORDS:
            raise NotRunnable(f"a C call of {len(args)} words")
        self.sites.append([callee, first, len(args), p0, len(self.patches)])
        self.text.append(text)

    def copy(self, src, dst, text):
        """A copy site: ``dst``'s elements from ``src`` (both contiguous, one size)."""
        first, p0 = len(self.words), len(self.patches)
        for k, loc in enumerate((src, dst)):
            self.words.append(loc.addr + loc.offset)
            if loc.kind is not None:
                self.patches.append([first + k, loc.kind, loc.slot, loc.offset, loc.step])
        self.words.append(int(np.prod(src.shape, dtype=np.int64)) * src.dtype.itemsize)
        self.sites.append([("copy",), first, 3, p0, len(self.patches)])
        self.text.append(text)


ARENA = 0          # the slot of the scratch arena; operands' slots follow


def plan_scan(spec, pasted):
    """The ``ScanPlan`` of a scan ``spec`` and its slots: (plan, slot table) where the
    table lists (role, index) per slot: ("arena", 0) first, then ("const", j),
    ("carry", j) (two slots each: current and next), ("xs", j), ("ys", j). A kernel site's
    callee is ("kernel", k, Numba signature), the body's k-th kernel step. ``pasted(step)``: whether a
    generated driver would paste that kernel step in (the plan must call something
    else too). Raises ``NotRunnable``."""
    from lowering.ir import KernelStep, LibraryCall
    from numba_backend.cache import signature
    p = spec.params
    (prog,) = spec.programs
    nc, nk = p["num_consts"], p["num_carry"]
    c_avals = spec.in_avals[:nc]
    k_avals = spec.out_avals[:nk]
    x_avals = spec.in_avals[nc + nk:]
    y_avals = spec.out_avals[nk:]
    plan = ScanPlan()
    slots = [("arena", 0)]

    def add_slot(role, j):
        slots.append((role, j))
        return len(slots) - 1

    def dense(kind, slot, aval, step=0):
        dt = storage_dtype(aval.dtype)
        return _Loc(kind, slot, 0, step, aval.shape, _c_strides(aval.shape, dt), dt)

    env = {}
    invars = list(prog.invars)
    for j, a in enumerate(c_avals):
        env[invars[j]] = dense(FIXED, add_slot("const", j), a)
    carry_slot = []
    for j, a in enumerate(k_avals):
        s = add_slot("carry", j)
        slots.append(("carry", j))
        carry_slot.append(s)
        env[invars[nc + j]] = dense(CURRENT, s, a)
    for j, a in enumerate(x_avals):
        row = a.update(shape=a.shape[1:])
        env[invars[nc + nk + j]] = dense(FIXED, add_slot("xs", j), row,
                                         storage_dtype(a.dtype).itemsize *
                                         int(np.prod(row.shape, dtype=np.int64)))
    y_slot = [add_slot("ys", j) for j in range(len(y_avals))]
    for name, val in prog.consts:
        env[name] = plan.const(val, prog.buffers[name].dtype)

    # a carry's next value goes straight into its next buffer when one kernel step
    # computes it (as the generated driver does)
    produced = {o for st in prog.steps if isinstance(st, KernelStep) for o in st.outs}
    names = [o for o in prog.outvars if isinstance(o, str)]
    preset = {}
    for j, o in enumerate(prog.outvars[:nk]):
        if isinstance(o, str) and o in produced and names.count(o) == 1 and o not in env:
            preset[o] = dense(NEXT, carry_slot[j], k_avals[j])

    k = 0
    calls = 0
    for step in prog.steps:
        if isinstance(step, KernelStep):
            kern = step.kernel
            outs = [preset.get(o) or plan.alloc(prog.buffers[o]) for o in step.outs]
            for o, loc in zip(step.outs, outs):
                env[o] = loc
            args = [env[x] for x in step.ins] + outs
            if getattr(step, "flat", False):
                args = [a.flat() if len(a.shape) > 1 else a for a in args]
            ip = plan.const(np.asarray(step.iparams, np.int64), np.int64)
            fp = plan.const(np.asarray(step.fparams, np.float64), np.float64)
            empty = not (kern.reductions or kern.ndim == 0) and \
                any(int(v) == 0 for v in list(step.iparams)[:kern.ndim])
            if not empty:
                plan.site(("kernel", k, signature(kern)), args + [ip, fp],
                          step.text.splitlines()[0]
                          if step.text else f"kernel {k}")
                calls += not pasted(step)
            k += 1
        elif isinstance(step, LibraryCall) and step.kind == "reshape_view":
            (x,) = step.ins
            env[step.outs[0]] = env[x].view(tuple(dict(step.params)["shape"]))
        elif isinstance(step, LibraryCall) and step.kind == "dot_general":
            lhs_a, rhs_a = step.in_avals
            (out_a,) = step.out_avals
            mm = dot_mm_call(lhs_a, rhs_a, out_a, dict(step.params)["dimension_numbers"])
            if mm is None:
                raise NotRunnable(f"dot_general {lhs_a.str_short()} x {rhs_a.str_short()}")
            ta, tb, spec_ = mm
            a, b = env[step.ins[0]], env[step.ins[1]]
            if ta:
                a = a.view(a.shape[::-1], a.strides[::-1])
            if tb:
                b = b.view(b.shape[::-1], b.strides[::-1])
            out = plan.alloc(out_a)
            env[step.outs[0]] = out
            what = f"({'a.T' if ta else 'a'}, {'b.T' if tb else 'b'}) " \
                f"{lhs_a.str_short()} x {rhs_a.str_short()}"
            blas = _blas_call(plan, a, b, out, ta, tb)
            if blas is None:
                plan.site(("dot_mm", spec_), [a, b, out], "dot_mm" + what)
            else:
                plan.c_site(blas[0], blas[1], blas[0][1] + what)
            calls += 1
        else:
            raise NotRunnable(getattr(step, "name", None) or type(step).__name__)
    if not calls:
        raise NotRunnable("every kernel of the body is pasted into a driver")

    def copy(src, dst, what):
        plan.copy(src, dst, f"copy -> {what}")

    for j, (o, a) in enumerate(zip(prog.outvars[:nk], k_avals)):
        if isinstance(o, str) and o in preset:
            continue
        src = env[o] if isinstance(o, str) else plan.const(o[1], a.dtype)
        copy(src, dense(NEXT, carry_slot[j], a), f"carry {j}")
    for j, (o, a) in enumerate(zip(prog.outvars[nk:], y_avals)):
        row = a.update(shape=a.shape[1:])
        src = env[o] if isinstance(o, str) else plan.const(o[1], a.dtype)
        dst = dense(FIXED, y_slot[j], row,
                    storage_dtype(a.dtype).itemsize * int(np.prod(row.shape, dtype=np.int64)))
        copy(src, dst, f"ys {j}[i]")
    return plan, slots


_BLAS_KIND = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


def _blas_call(plan, a, b, out, ta, tb):
    """``out = a @ b`` (``_Loc`` matrices, ``a``/``b`` transposed views where ``ta``/``tb``) as
    a direct call of BLAS GEMV or GEMM: ((site kind, function name), arguments), or None
    where ``dot_mm`` does something else (a single or no contracted element, an empty
    result), which then stays a ``dot_mm`` call. The arguments are those NumPy's matmul
    passes its CBLAS interface for these shapes and layouts
    (``numpy/_core/src/umath/matmul.c.src``: GEMV for a matrix times a vector, with the
    transpose flag the matrix's layout sets; GEMM of the row-major product as the
    column-major ``out.T = b.T @ a.T``), which are also those
    ``numba.np.linalg.call_xxgemv``/``call_xxgemm`` pass Numba's wrappers; the function is
    NumPy's library's (``numba_backend.numpy_blas``), or Numba's wrapper where that is not
    found. No compiled ``dot_mm`` is needed for the common products (0.15-0.25 s of a
    worker's compile per dtype and layouts). Not as NumPy: a 1 x 1 result (GEMM here,
    NumPy's dot there) and ``x @ x.T`` of one operand (GEMM here, SYRK there) may differ
    from the NumPy tier in their last bits."""
    (m, k), n = a.shape, b.shape[1]
    kind = _BLAS_KIND.get(out.dtype.name)
    if kind is None or k <= 1 or m == 0 or n == 0:
        return None
    one, zero = plan.const(1, out.dtype), plan.const(0, out.dtype)
    lay_a, lay_b = "F" if ta else "C", "F" if tb else "C"
    fns = numpy_blas.functions()
    if fns is not None:
        int_t = np.int64 if fns["int_bytes"] == 8 else np.int32

        def val(v):     # (Fortran: every argument by reference)
            return plan.const(v, int_t)

        def char(c):
            return plan.const(ord(c), np.uint8)
    if (n == 1 and m > 1) or (m == 1 and n > 1):
        # GEMV: dot_mm's matvec_into (the matrix a) or vecmat_into (the matrix b)
        mat, lay, vec = (a, lay_a, b) if n == 1 else (b, lay_b, a)
        trans = (lay == "C") if n == 1 else (lay == "F")
        rows, cols = mat.shape
        mm, nn, ld = (rows, cols, rows) if lay == "F" else (cols, rows, cols)
        if fns is None:
            return ("blas", "xxgemv"), [ord(kind), ord("t" if trans else "n"), mm, nn,
                                        one, mat, ld, vec, zero, out]
        return ("numpy_blas", kind + "gemv"), [
            char("t" if trans else "n"), val(mm), val(nn), one, mat, val(ld), vec, val(1),
            zero, out, val(1)]
    trans_b, ld_b = ("n", n) if lay_b == "C" else ("t", k)
    trans_a, ld_a = ("n", k) if lay_a == "C" else ("t", m)
    if fns is None:
        return ("blas", "xxgemm"), [ord(kind), ord(trans_b), ord(trans_a), n, m, k, one,
                                    b, ld_b, a, ld_a, zero, out, n]
    return ("numpy_blas", kind + "gemm"), [
        char(trans_b), char(trans_a), val(n), val(m), val(k), one, b, val(ld_b), a,
        val(ld_a), zero, out, val(n)]


# ------------------------------------------ runner ----------------------------------------

class ScanRunner:
    """Runs a scan through ``run_scan`` once its body's kernels are compiled, through the
    host loop (``control_flow.HostRunner``) until then, or after waiting for them where
    ``wait`` (a scan whose host loop would take long)."""

    def __init__(self, spec, host, pasted, wait):
        self.kind, self.out_avals = spec.kind, spec.out_avals
        p = spec.params
        self.nc, self.nk, self.length, self.reverse = \
            p["num_consts"], p["num_carry"], p["length"], bool(p["reverse"])
        self.plan, self.slots = plan_scan(spec, pasted)
        self.host = host
        self.wait = wait       # (async) wait for the compiles rather than run the host loop
        self.sites = None      # the site table with addresses, once linked
        self.callees = []      # the dispatchers whose code the sites call
        self.y_shapes = [(storage_dtype(a.dtype), tuple(a.shape)) for a in spec.out_avals[self.nk:]]
        self.k_shapes = [(storage_dtype(a.dtype), tuple(a.shape)) for a in spec.out_avals[:self.nk]]
        self.primed = None     # Future of the runtime functions' compile (async)
        self.ctl = np.array([self.length, self.reverse], np.int64)
        self.words = np.array(self.plan.words + [0] * BUCKETS[-1], np.int64)
        self.patches = np.array(self.plan.patches, np.int64).reshape(-1, 5)

    def _runtime(self) -> list:
        """(module, function, signature spec) of the compiled functions besides the
        kernels: ``run_scan`` and the products and copies it calls."""
        out = [(__name__, "run_scan", RUN_SCAN_SIG)]
        for callee, *_ in self.plan.sites:
            if callee[0] not in ("kernel", "copy", "blas", "numpy_blas"):
                entry = ("numba_backend.driver_runtime", callee[0], callee[1])
                if entry not in out:
                    out.append(entry)
        return out

    def _cached(self) -> bool:
        """Whether Numba's disk cache holds every function of ``_runtime`` (loaded now:
        milliseconds, where a worker's start would take a second)."""
        import importlib
        for mod_name, func, sig in self._runtime():
            disp = getattr(importlib.import_module(mod_name), func)
            types_ = numba_types(sig)
            if types_ in disp.overloads:
                continue
            cres = disp._cache.load_overload(types_, disp.targetctx)
            if cres is None:
                return False
            disp.add_overload(cres)
        return True

    def _prime(self):
        from numba_backend.compile_worker import run_job
        run_job({"runtime": self._runtime()})

    def prefetch(self):
        """In "async" mode, start the body's kernel compiles now, and a worker compiling
        (or finding in Numba's cache) the runner and the functions it calls."""
        from tracer.config import config
        if config.jit_compile == "async":
            for ex in self.host.exes:
                ex._compile_in_background()
            if self.primed is None and not self._cached():
                from numba_backend.workers import pool
                self.primed = pool.submit({"runtime": self._runtime()}, self._prime)

    def _link(self) -> bool:
        """Fill in the sites' addresses; False while the body's kernels are not all
        compiled (the host loop runs meanwhile and drives their compiles)."""
        from tracer.config import config
        (ex,) = self.host.exes
        if config.jit_compile == "async":
            if self.primed is None and not self._cached():
                self.prefetch()
            if self.primed is not None and not self.primed.done():
                return False
        elif ex.state != "ready":
            ex.ensure_compiled()
        if ex.state != "ready" or ex._broken:
            return False
        from numba import _helperlib
        from numba_backend import driver_runtime
        rows, callees = [], []
        for callee, *rest in self.plan.sites:
            if callee[0] == "copy":
                rows.append([0, *rest, COPY])
                continue
            if callee[0] == "blas":
                rows.append([_helperlib.c_helpers[callee[1]], *rest, CALL_C])
                continue
            if callee[0] == "numpy_blas":
                rows.append([numpy_blas.functions()[callee[1]], *rest, CALL_VOID])
                continue
            if callee[0] == "kernel":
                # (one kernel module can serve several dtypes: this step's own signature)
                disp, sig = ex.handles[callee[1]].dispatcher(), callee[2]
                disp.compile(sig)
            else:
                disp = getattr(driver_runtime, callee[0])
                sig = numba_types(callee[1])
                disp.compile(sig)
            cres = disp.overloads[sig]
            ret = cres.signature.return_type
            if not (isinstance(ret, types.Integer) and ret.bitwidth == 64 and ret.signed):
                raise TypeError(f"{callee[0]} returns {ret}, not int64")
            callees.append(disp)
            rows.append([cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name),
                         *rest, CALL])
        run_scan.compile(numba_types(RUN_SCAN_SIG))
        self.callees = callees
        self.sites = np.array(rows, np.int64).reshape(-1, 6)
        return True

    def __call__(self, arrays):
        from tracer.config import config
        if self.sites is None:
            if config.jit_compile == "none" or config.debug_kernels:
                return self.host(arrays)
            if not self._link():
                if not (self.wait and config.jit_compile == "async"):
                    return self.host(arrays)
                # a scan too long for the host loop: its compiles, then the runner
                from numba_backend.workers import pool
                (ex,) = self.host.exes
                ex._compile_in_background()
                ex.wait()
                if self.primed is not None:
                    with pool.waiting():
                        self.primed.result()
                if not self._link():
                    return self.host(arrays)
        nc, nk = self.nc, self.nk
        bases = np.zeros(len(self.slots), np.int64)
        keep = [np.empty(max(self.plan.arena, 1), np.uint8)]
        carries = []
        for s, (role, j) in enumerate(self.slots):
            if role == "arena":
                a = keep[0]
            elif role == "const":
                a = np.ascontiguousarray(to_storage(np.asarray(arrays[j])))
            elif role == "carry":
                if len(carries) <= j:
                    dt, shape = self.k_shapes[j]
                    pair = (np.empty(shape, dt), np.empty(shape, dt))
                    pair[0][...] = to_storage(np.asarray(arrays[nc + j]))
                    carries.append(pair)
                    a = pair[0]
                else:
                    a = carries[j][1]
            elif role == "xs":
                a = np.ascontiguousarray(to_storage(np.asarray(arrays[nc + nk + j])))
            else:
                dt, shape = self.y_shapes[j]
                a = np.empty(shape, dt)
            keep.append(a)
            bases[s] = a.__array_interface__["data"][0]
        if run_scan(self.ctl, self.sites, self.patches, self.words.copy(), bases):
            raise RuntimeError("scan on the loop runner: a BLAS call failed (Numba's "
                               "wrapper found no BLAS: is SciPy installed?)")
        last = self.length % 2
        outs = [pair[last] for pair in carries] + \
            [a for (role, _), a in zip(self.slots, keep[1:]) if role == "ys"]
        return [from_storage(o, a.dtype) for o, a in zip(outs, self.out_avals)]

    def describe(self) -> str:
        lines = [f"# scan on the loop runner (numba_backend.loop_runner.run_scan): "
                 f"{self.length} iterations{' in reverse' if self.reverse else ''} of "
                 f"{len(self.plan.sites)} calls, {self.plan.arena} bytes of scratch"]
        lines += [f"#   {t}" for t in self.plan.text]
        return "\n".join(lines) + "\n"
