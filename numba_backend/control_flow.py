"""Compiled control flow: ``scan``, ``while`` and ``cond`` as generated Numba functions.

``lowering.control_flow`` turns each control-flow equation into a library call of kind
"scan", "while" or "cond" whose ``spec`` (``lowering.ir.ControlFlowSpec``) holds the
lowered Programs of its sub-jaxprs. Here such a call becomes one generated module with a
function ``driver(IP, FP, *operands, *consts, *buffers)``: the sub-programs' steps are
emitted as statements inside a real ``for`` (scan), ``while`` (while) or ``if``/``elif``
(cond), in the order the Program lists them:

- a small kernel step (element-wise, at most ``INLINE_MAX_ELEMENTS`` elements: the call
  would cost more than its work) is pasted in: the kernel's serial function as
  statements of the loop, its locals renamed, its arrays the driver's buffers, its
  integers (extents, offsets) constants of the source and its floats read from ``FP``
  once, before the loop; LLVM then unrolls its few elements and sees the whole body;
- any other kernel step calls the kernel by address (``driver_runtime.call_kernel``:
  the kernel module's dispatcher, compiled for the kernel's own signature and closed to
  other compiles, its function's address in the driver's ``KP`` argument, which
  ``Driver.link_kernels`` fills in), passing its runtime integers and floats as slices
  of ``IP``/``FP``: the driver holds a call, not a second copy of the kernel that LLVM
  would optimize and compile again with the driver;
- a ``dot_general`` library call of two float matrices calls ``driver_runtime.dot_mm``
  (cached, BLAS through ``numba_backend.blas``) on (possibly transposed) views, by
  address as a kernel (so do the copies, ``driver_runtime.copy_c``); others
  call a generated helper (BLAS through ``np.dot`` on contiguous (batch, free,
  contracting) views, integer types by loops), from the step's avals and params;
- a ``reshape_view`` library call is a reshape of the buffer;
- a ``numba_call`` library call calls the user's kernel as a Numba function (through
  ``numba_backend.user_functions``; such a driver compiles in this process, without the
  disk cache);
- a host callback (``pure_callback``, ``io_callback``, ``debug_callback``: a host step)
  is a call back into Python from an ``objmode`` block, by a token read from ``IP``
  (``numba_backend.host_callbacks``: the source names no user function, so such a
  driver is cached and compiled by workers like any other);
- a nested control-flow call is emitted inline: nested loops are nested loops.

Every buffer (step outputs, carries, stacked ys) and every reshaped view of a buffer that
stays bound to one array is allocated by ``CompiledRunner`` and passed in: an ``np.empty``
or ``reshape`` inside the driver costs Numba about a tenth of a second of compile each.
Buffers the driver may return (carries, ys, a cond's results) are arguments of their
own; the scratch ones are views (``driver_runtime.arena_view``) of one arena argument
per dtype, since each array argument costs about 10 ms of compile.
Carries are variables rebound each iteration (every step writes fresh buffers, so nothing
is overwritten while it is read), ys are written into preallocated stacked arrays, and
every shape-dependent integer (loop counts, buffer extents, kernel params) is read from
``IP`` at run time: the source depends on ranks and dtypes only, so new shapes reuse the
compiled driver -- except for the pasted kernels, whose extents are in the source (a new
shape of such a small body compiles a new driver, keyed by its content as any other). The module is written to the kernel cache directory and compiled with
``numba.njit(cache=True)``, like kernels.

A body with a step that has no compiled form (a host step other than a callback, another
library call) makes the whole loop run in Python (``HostRunner``): the body's own Executable (compiled
kernels) is called once per iteration. The tiers of ``config.jit_compile`` apply: "none"
and ``debug_kernels`` use the host loop, "async" uses it while the driver compiles in the
background, "sync" compiles first.

A scan whose body is calls only (kernels, matrix products, views) and not every kernel
pasted needs no driver: ``numba_backend.loop_runner`` runs it (``LOOP_RUNNER``).

The runner of a spec (``runner_for``: a ``loop_runner.ScanRunner``, ``CompiledRunner`` or
``HostRunner``) is built on the call's first run and kept while the spec lives (the
Program holding it).
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import logging
import os
import platform
import re
import sys
import threading
import time
import weakref
from typing import NamedTuple

import numpy as np

from lowering.ir import HostStep, KernelStep, LibraryCall
from numba_backend import cache, codegen, host_callbacks, registers
from numba_backend.driver_runtime import dot_mm_call
from numba_backend.loop_runner import NotRunnable, ScanRunner
from numba_backend.compile_worker import (PACKAGE, array_spec, dispatcher, load_module,
                                          numba_types)
from numba_backend.storage import from_storage, needs_view, storage_dtype, to_storage
from tracer import dtypes
from tracer.config import config
from tracer.core import ShapedArray
from tracer.jaxpr import impl_runner, numpy_tier_scope

logger = logging.getLogger("tracer")
STRICT = os.environ.get("TRACER_STRICT_LOWERING", "") not in ("", "0")
_F16 = np.dtype(np.float16)

stats = {"drivers_compiled": 0, "host_loops": 0}


class NotCompilable(Exception):
    """A step of a body that generated Numba code cannot call."""


class RuntimeFunction(NamedTuple):
    """A function of ``driver_runtime`` a driver calls by address, like its kernels
    (``Driver.link_kernels``)."""
    func: str
    in_process = False


_storage = storage_dtype


def _np_name(dt) -> str:
    dt = _storage(dt)
    return "np.bool_" if dt == np.bool_ else f"np.{dt.name}"


_to_storage = to_storage


def _from_storage(a, aval):
    return from_storage(a, aval.dtype)


# ---------------------------------------- codegen -----------------------------------------

class _Gen:
    """Emits the statements of a driver; collects its runtime ints/floats, its array
    arguments (program consts), the kernels it calls and its helpers.

    Every buffer is allocated once, in the prologue (shapes are loop-invariant), and
    reused by every iteration: a step writes the same buffer each time and its readers
    run later in the same iteration. A loop carry has two buffers, current and next; the
    kernel computing a carry writes the next buffer directly (else the new value is
    copied there), and the two are swapped by reference at the end of the iteration."""

    def __init__(self):
        self.em = codegen.Emitter()
        self.em.level = 1
        self.prologue: list = []
        self.ints: list = []
        self.floats: list = []
        self.arrays: list = []          # (var name, value)
        # the kernels it calls: name (a module constant, its index in ``KP``) ->
        # (CompiledKernel or RuntimeFunction, signature spec), in ``KP``'s order
        self.kernels: dict = {}
        self.helpers: dict = {}         # function name -> source
        # Buffers the caller allocates (an ``np.empty`` or ``reshape`` inside a driver
        # costs Numba a tenth of a second of compile each; a driver holds dozens), and
        # reshaped views of them: (name, aval), (name, buffer, shape). ``build_source``
        # passes those the driver may return as arguments of their own and carves the
        # others out of one arena per dtype (``driver_runtime.arena_view``).
        self.buffers: list = []
        self.views: list = []
        self.swapped: set = set()       # carry buffers: rebound every iteration
        self.partner: dict = {}         # a carry buffer -> the other of its pair
        # the lines swapping carries: (index in ``em.lines``, current, next buffers)
        self.swaps: list = []
        self.aliases: dict = {}         # a cond's result var -> the vars bound to it
        self.counter = 0
        self.flags = _flags()
        self.user = False               # calls a user's kernel (numba_call)
        self.uses_views = False         # reshapes in the loop (numba_backend.views)
        # host callbacks it calls back (numba_backend.host_callbacks entries; their
        # tokens are in ``ints``): the runner keeps them alive
        self.callbacks: list = []
        self.imports: set = set()       # import lines of the kernels pasted in

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def line(self, text: str):
        self.em.line(text)

    def int_range(self, values):
        start = len(self.ints)
        self.ints.extend(int(v) for v in values)
        return start, len(self.ints)

    def float_range(self, values):
        start = len(self.floats)
        self.floats.extend(float(v) for v in values)
        return start, len(self.floats)

    def dims(self, shape) -> str:
        if not shape:
            return "()"
        start, _ = self.int_range(shape)
        return "(" + "".join(f"IP[{start + k}], " for k in range(len(shape))) + ")"

    def add_array(self, value, aval) -> str:
        name = self.fresh("k")
        self.arrays.append((name, _to_storage(np.asarray(value, dtype=aval.dtype))))
        return name

    def alloc(self, aval, prefix="b") -> str:
        v = self.fresh(prefix)
        self.buffers.append((v, aval))
        return v

    def reshape(self, var, shape) -> str:
        """``var`` (C-contiguous) viewed with ``shape``: made by the caller when ``var`` is
        a buffer it allocates and that stays bound to one array, else here."""
        shape = tuple(shape)
        if any(b == var for b, _ in self.buffers) and var not in self.swapped:
            for name, base, sh in self.views:
                if base == var and sh == shape:
                    return name
            v = self.fresh("w")
            self.views.append((v, var, shape))
            return v
        v = self.fresh("v")
        self.uses_views = True
        self.line(f"{v} = reshape_c({var}, {self.dims(shape)})")
        return v

    def copy(self, dst, src, aval, lead=""):
        """``dst[lead..., ...] = src`` for C-contiguous arrays of ``aval``'s dtype and
        shape (``dst`` of rank ``aval.ndim`` with no ``lead``, one more with a loop index
        ``lead``): element by element for a few elements (their copies may then become
        locals, numba_backend.registers), else as a loop (``driver_runtime.copy_c``:
        compiled once, not typed by each driver)."""
        dtype, ndim = aval.dtype, aval.ndim
        if aval.size <= registers.SCALAR_MAX_ELEMENTS:
            for idx in np.ndindex(*aval.shape):
                d = ", ".join([lead] * bool(lead) + [str(i) for i in idx]) or "()"
                self.line(f"{dst}[{d}] = {src}[{', '.join(map(str, idx)) or '()'}]")
            return
        if lead:
            dst = f"{dst}[{lead}]"
        a = array_spec(dtype, ndim, False)
        self.line(f"call_kernel(KP[{self.runtime_global('copy_c', [a, a])}], {src}, {dst})")

    def runtime_global(self, func, spec) -> str:
        """The name of ``driver_runtime.<func>`` compiled for ``spec`` in ``KP``."""
        tag = hashlib.sha256(repr(spec).encode()).hexdigest()[:8]
        name = f"R_{func}_{tag}"
        self.kernels.setdefault(name, (RuntimeFunction(func), spec))
        return name

    # -- programs --
    def program(self, prog, in_vars, targets=None):
        """Emit ``prog``'s steps on ``in_vars``; returns (output vars, which outputs were
        written into their ``targets`` entry by the step producing them)."""
        env = dict(zip(prog.invars, in_vars))
        for name, val in prog.consts:
            env[name] = self.add_array(val, prog.buffers[name])
        preset: dict = {}
        written = [False] * len(prog.outvars)
        if targets:
            produced = {o for st in prog.steps if isinstance(st, KernelStep) for o in st.outs}
            names = [o for o in prog.outvars if isinstance(o, str)]
            for k, (o, t) in enumerate(zip(prog.outvars, targets)):
                if t is not None and isinstance(o, str) and o in produced and \
                        names.count(o) == 1 and o not in env:
                    preset[o] = t
                    written[k] = True
        for step in prog.steps:
            if isinstance(step, KernelStep):
                self.kernel_step(step, prog, env, preset)
            elif isinstance(step, LibraryCall):
                self.library_step(step, prog, env)
            elif isinstance(step, HostStep):
                self.host_step(step, prog, env)
            else:
                raise NotCompilable(f"step {type(step).__name__}")
        outs = []
        for o, aval in zip(prog.outvars, prog.out_avals):
            outs.append(env[o] if isinstance(o, str) else self.add_array(o[1], aval))
        return outs, written

    def kernel_step(self, step, prog, env, preset):
        src = codegen.generate(step.kernel, self.flags)
        inline = _inline_plan(step, src)
        name = None if inline is not None else self.kernel_global(step.kernel, src)
        for t in step.text.splitlines()[:4]:
            self.line(f"# {t}")
        outs = []
        for o in step.outs:
            v = preset.get(o) or self.alloc(prog.buffers[o])
            env[o] = v
            outs.append(v)
        i0, i1 = self.int_range(step.iparams)
        f0, f1 = self.float_range(step.fparams)
        # Slices made once, in the prologue: the loop passes them as they are.
        ip, fp = self.fresh("ip"), self.fresh("fp")
        slices = {ip: f"{ip} = IP[{i0}:{i1}]", fp: f"{fp} = FP[{f0}:{f1}]"}
        args = [env[x] for x in step.ins] + outs
        if getattr(step, "flat", False):
            # one flat loop over C-contiguous arrays: raveled views (as the executor does)
            args = [self.flat_view(v, prog.buffers[x])
                    for v, x in zip(args, list(step.ins) + list(step.outs))]
        k = step.kernel
        if inline is not None:
            self.inline_kernel(inline, args, slices, step.iparams)
            return
        self.prologue += slices.values()
        call = f"call_kernel(KP[{name}], {', '.join(args + [ip, fp])})"
        if k.reductions or k.ndim == 0:
            self.line(call)
        else:
            # An empty iteration space without reductions writes nothing; running it could
            # still evaluate loop-invariant loads hoisted out of the (empty) loops.
            with self.em.block(f"if {' and '.join(f'{ip}[{d}] != 0' for d in range(k.ndim))}:"):
                self.line(call)

    def inline_kernel(self, plan, args, slices, iparams):
        """The kernel's serial function pasted into the loop (``_inline_plan``): its
        locals renamed with a fresh prefix, its parameters bound to the driver's
        buffers, its reads of ``ip``/``fp`` (loop-invariant) moved to the prologue as
        scalar locals. The loop then runs straight-line code, without a call per
        kernel and iteration, and LLVM sees the whole body at once."""
        prefix = self.fresh("q") + "_"
        names = dict(zip(plan.params, args + list(slices)))
        names.update((n, prefix + n) for n in plan.locals)

        def rename(line):
            return registers.substitute(line, names)

        head = []
        for line in plan.header:
            # the kernel's integers (extents, offsets) are constants here, written into
            # the code: a loop of a few elements is unrolled, its indices fold, and its
            # small arrays can live in locals (numba_backend.registers)
            line = _IP_READ.sub(lambda m: str(int(iparams[int(m.group(1))])), line)
            const = _INT_LINE.match(line)
            if const is not None and const.group(1) not in plan.stored:
                value = int(const.group(2))
                names[const.group(1)] = str(value) if value >= 0 else f"({value})"
                continue
            head.append(rename(line))
        self.imports.update(plan.imports)
        self.line(f"# (its kernel inlined: locals {prefix}*)")
        if any(int(n) == 0 for n in iparams[:plan.ndim]):
            # (as for a called kernel: an empty iteration space runs nothing)
            self.line("pass  # (empty)")
            body = []
        else:
            body = registers.fold(registers.unroll([rename(line) for line in plan.body]))
            level = "    " * self.em.level
            self.em.lines += [level + line for line in body]
        # (the ``ip``/``fp`` slices only where a line still reads them: each costs Numba
        # a typing; the extents and offsets are constants in the code now)
        used = {m.group(0) for line in head + body
                for m in registers.NAME.finditer(line.partition("#")[0])}
        self.prologue += [text for name, text in slices.items() if name in used] + head

    def flat_view(self, var, aval) -> str:
        if aval.ndim <= 1:
            return var
        return self.reshape(var, (aval.size,))

    def kernel_global(self, kernel, src=None) -> str:
        if src is None:
            src = codegen.generate(kernel, self.flags)
        # One kernel module serves every dtype its code does not spell out: the global
        # this driver calls is its compile for this call's signature (_driver_kernel_spec).
        spec = _driver_kernel_spec(kernel)
        tag = hashlib.sha256(repr(spec).encode()).hexdigest()[:8]
        name = f"K_{src.key[:16]}_{tag}"
        if name not in self.kernels:
            self.kernels[name] = (cache.get_kernel(src, kernel), spec)
        return name

    def library_step(self, step, prog, env):
        """The library calls with a compiled form; any other kind makes the loop run in
        Python (``NotCompilable``)."""
        ins = [env[x] for x in step.ins]
        params = dict(step.params)
        if step.kind in ("scan", "while", "cond"):
            spec = params["spec"]
            self.line(f"# {spec.describe()}")
            outs = self.control(spec, ins)
        elif step.kind == "dot_general":
            outs = [self.dot(step, ins)]
        elif step.kind == "reshape_view":
            outs = [self.reshape(ins[0], params["shape"])]
        elif step.kind == "numba_call":
            outs = self.numba_call(step, ins)
        else:
            raise NotCompilable(f"library call {step.name}")
        for o, v in zip(step.outs, outs):
            env[o] = v

    def numba_call(self, step, ins):
        """The user's kernel called as a Numba function (numba_backend.user_functions),
        on the operand buffers and fresh output buffers, static params by keyword."""
        p = dict(step.params)
        k = p["kernel"]
        outs = [self.alloc(a) for a in step.out_avals]
        self.user = True
        kw = "".join(f", {n}={_static_code(v)}" for n, v in p["statics"])
        self.line(f"# numba_call {k.name}: ({', '.join(a.str_short() for a in step.in_avals)})"
                  f" -> ({', '.join(a.str_short() for a in step.out_avals)})")
        self.line(f"{_UF}.{k.token}({', '.join(list(ins) + outs)}{kw})")
        return outs

    def host_step(self, step, prog, env):
        """A host callback (``host_callbacks.PRIMITIVES``) called back from the driver: an
        object-mode block calls ``host_callbacks.call`` with the step's token (read from
        ``IP`` at run time, so the source names nothing of this process), the operand
        buffers and fresh result buffers it writes. Any other host step makes the loop
        run in Python."""
        if not host_callbacks.compilable(step):
            raise NotCompilable(f"host step {step.primitive.name}")
        ins, in_avals = [], []
        for x in step.ins:
            if isinstance(x, str):
                ins.append(env[x])
                in_avals.append(prog.buffers[x])
            else:       # ('lit', value)
                v = np.asarray(x[1])
                aval = ShapedArray(v.shape, v.dtype)
                ins.append(self.add_array(v, aval))
                in_avals.append(aval)
        out_avals = [prog.buffers[o] for o in step.outs]
        if not all(isinstance(a, ShapedArray) for a in in_avals + out_avals):
            raise NotCompilable(f"host step {step.primitive.name} on tokens")
        entry = host_callbacks.register(step.primitive, dict(step.params), in_avals,
                                        out_avals)
        self.callbacks.append(entry)
        outs = [self.alloc(a) for a in out_avals]
        slot, _ = self.int_range([entry.token])
        self.line(f"# {entry.name}: ({', '.join(a.str_short() for a in in_avals)}) -> "
                  f"({', '.join(a.str_short() for a in out_avals)})")
        with self.em.block("with objmode():"):
            self.line(f"{_HC}(IP[{slot}]{''.join(', ' + v for v in ins + outs)})")
        for o, v in zip(step.outs, outs):
            env[o] = v

    # -- control flow --
    def control(self, spec, ins):
        if spec.kind == "scan":
            return self.scan(spec, ins)
        if spec.kind == "while":
            return self.while_(spec, ins)
        return self.cond(spec, ins)

    def carries(self, avals, init):
        """(current, next) buffers of each carry, the current ones set to ``init``."""
        cur = [self.alloc(a, "c") for a in avals]
        nxt = [self.alloc(a, "n") for a in avals]
        self.swapped.update(cur + nxt)
        for c, n in zip(cur, nxt):
            self.partner[c], self.partner[n] = n, c
        for c, v, a in zip(cur, init, avals):
            self.copy(c, v, a)
        return cur, nxt

    def advance(self, cur, nxt, outs, written, avals):
        for n, o, w, a in zip(nxt, outs, written, avals):
            if not w:
                self.copy(n, o, a)
        if cur:
            self.swaps.append((len(self.em.lines), cur, nxt))
            self.line(f"{', '.join(cur + nxt)}, = {', '.join(nxt + cur)},")

    def scan(self, spec, ins):
        p = spec.params
        nc, nk = p["num_consts"], p["num_carry"]
        (prog,) = spec.programs
        consts, init, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
        k_avals = spec.out_avals[:nk]
        x_avals = spec.in_avals[nc + nk:]
        y_avals = spec.out_avals[nk:]
        cur, nxt = self.carries(k_avals, init)
        ys = [self.alloc(a, "ys") for a in y_avals]
        x_bufs = [None if a.ndim >= 2 else self.alloc(a.update(shape=()), "x")
                  for a in x_avals]
        n_slot, _ = self.int_range([p["length"]])
        it, i = self.fresh("it"), self.fresh("i")
        with self.em.block(f"for {it} in range(IP[{n_slot}]):"):
            self.line(f"{i} = IP[{n_slot}] - 1 - {it}" if p["reverse"] else f"{i} = {it}")
            x_vars = []
            for x, buf in zip(xs, x_bufs):
                if buf is None:
                    v = self.fresh("x")
                    self.line(f"{v} = {x}[{i}]")
                else:
                    v = buf
                    self.line(f"{v}[()] = {x}[{i}]")
                x_vars.append(v)
            outs, written = self.program(prog, consts + cur + x_vars,
                                         nxt + [None] * len(y_avals))
            for y, o, a in zip(ys, outs[nk:], y_avals):
                if a.ndim >= 2:
                    self.copy(y, o, a.update(shape=a.shape[1:]), lead=i)
                else:
                    self.line(f"{y}[{i}] = {o}[()]")
            self.advance(cur, nxt, outs[:nk], written[:nk], k_avals)
        return cur + ys

    def while_(self, spec, ins):
        p = spec.params
        ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
        cprog, bprog = spec.programs
        cc, bc, init = ins[:ncc], ins[ncc:ncc + nbc], ins[ncc + nbc:]
        avals = spec.out_avals
        cur, nxt = self.carries(avals, init)
        with self.em.block("while True:"):
            (pred,), _ = self.program(cprog, cc + cur)
            with self.em.block(f"if not {pred}[()]:"):
                self.line("break")
            outs, written = self.program(bprog, bc + cur, nxt)
            self.advance(cur, nxt, outs, written, avals)
        return cur

    def cond(self, spec, ins):
        index, ops = ins[0], ins[1:]
        n = len(spec.programs)
        k = self.fresh("k")
        self.line(f"{k} = {index}[()]")
        with self.em.block(f"if {k} < 0 or {k} >= {n}:"):
            self.line(f"{k} = {n - 1}")
        res = [self.fresh("r") for _ in spec.out_avals]
        for b, prog in enumerate(spec.programs):
            if n == 1:
                head = "if True:"
            elif b == 0:
                head = f"if {k} == 0:"
            elif b < n - 1:
                head = f"elif {k} == {b}:"
            else:
                head = "else:"
            with self.em.block(head):
                outs, _ = self.program(prog, ops)
                for r, o in zip(res, outs):
                    self.aliases.setdefault(r, set()).add(o)
                if res:
                    self.line(f"{', '.join(res)}, = {', '.join(outs)},")
                else:
                    self.line("pass")
        return res

    # -- dot_general --
    def dot(self, step, ins):
        lhs_a, rhs_a = step.in_avals
        (out_a,) = step.out_avals
        dts = {np.dtype(lhs_a.dtype), np.dtype(rhs_a.dtype), np.dtype(out_a.dtype)}
        if _F16 in dts or lhs_a.dtype != rhs_a.dtype:
            raise NotCompilable("dot_general on float16 or mixed dtypes")
        dn = dict(step.params)["dimension_numbers"]
        v = self.alloc(out_a)
        mm = dot_mm_call(lhs_a, rhs_a, out_a, dn)
        if mm is not None:
            # a matrix product: the shared, cached driver_runtime.dot_mm on (m, k) and
            # (k, n) views (a transpose is an F-layout view, not a copy)
            ta, tb, spec = mm
            a = f"{ins[0]}.T" if ta else ins[0]
            b = f"{ins[1]}.T" if tb else ins[1]
            self.line(f"call_kernel(KP[{self.runtime_global('dot_mm', spec)}], {a}, {b}, {v})")
            return v
        name, src = _dot_helper(lhs_a, rhs_a, out_a, dn)
        self.helpers[name] = src
        self.line(f"{name}({ins[0]}, {ins[1]}, {v})")
        return v


_UF = "uf"      # alias of numba_backend.user_functions in drivers
_HC = "hc_call"     # numba_backend.host_callbacks.call in drivers


def _static_code(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    return codegen._float_lit(float(v))


def _prod_code(arr, dims) -> str:
    return " * ".join([f"{arr}.shape[{d}]" for d in dims]) or "1"


def _dot_helper(lhs_a, rhs_a, out_a, dimension_numbers):
    """A register_jitable ``dot(lhs, rhs, out)`` computing dot_general into ``out`` as the
    eager impl does (operands in (batch, free, contracting) order, one matrix product per
    batch member in the compute dtype, cast to the output dtype). Products of rank <= 2
    in one float dtype call BLAS directly on the operands (a transpose is a Fortran-order
    view, not a copy); the rest goes through contiguous copies."""
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = tuple(lc), tuple(rc), tuple(lb), tuple(rb)
    lfree = tuple(i for i in range(lhs_a.ndim) if i not in lc and i not in lb)
    rfree = tuple(i for i in range(rhs_a.ndim) if i not in rc and i not in rb)
    in_dt, out_dt = np.dtype(lhs_a.dtype), np.dtype(out_a.dtype)
    if in_dt == np.bool_:
        compute = np.dtype(np.int64)
    else:
        compute = out_dt if dtypes.promote_types(in_dt, out_dt) == out_dt else in_dt
    lperm, rperm = lb + lfree + lc, rb + rc + rfree
    key = hashlib.sha256(repr((lhs_a.ndim, rhs_a.ndim, str(in_dt), str(out_dt),
                               dimension_numbers)).encode()).hexdigest()[:16]
    name = f"dot_{key}"
    em = codegen.Emitter()
    em.line("@register_jitable")
    with em.block(f"def {name}(lhs, rhs, out):"):
        em.line(f"# dot_general {dimension_numbers}: {lhs_a.str_short()} x "
                f"{rhs_a.str_short()} -> {out_a.str_short()}")
        direct = (not lb and in_dt == out_dt == compute and in_dt.kind in "fc"
                  and lhs_a.ndim <= 2 and rhs_a.ndim <= 2 and len(lc) <= 1)
        if direct and len(lc) == 1:
            a = "lhs" if lhs_a.ndim == 1 or lperm == (0, 1) else "lhs.T"
            b = "rhs" if rhs_a.ndim == 1 or rperm == (0, 1) else "rhs.T"
            # A single contracted element (an outer product): BLAS GEMM with k = 1 is
            # slow; the loop gives the same exact products, added to a zero as NumPy's
            # matmul adds them (so a -0.0 product gives 0.0).
            with em.block(f"if lhs.shape[{lc[0]}] == 1:"):
                li = {lc[0]: "0"}
                if lfree:
                    li[lfree[0]] = "m"
                ri = {rc[0]: "0"}
                if rfree:
                    ri[rfree[0]] = "n"
                lhs_el = f"lhs[{', '.join(li[d] for d in range(lhs_a.ndim))}]"
                rhs_el = f"rhs[{', '.join(ri[d] for d in range(rhs_a.ndim))}]"
                out_idx = ", ".join((["m"] if lfree else []) + (["n"] if rfree else [])) or "()"
                m_n = f"lhs.shape[{lfree[0]}]" if lfree else "1"
                n_n = f"rhs.shape[{rfree[0]}]" if rfree else "1"
                with em.block(f"for m in range({m_n}):"):
                    with em.block(f"for n in range({n_n}):"):
                        em.line(f"out[{out_idx}] = 0")
                        em.line(f"out[{out_idx}] += {lhs_el} * {rhs_el}")
            if lhs_a.ndim == 2 and rhs_a.ndim == 2:
                # matrix x matrix: GEMM as np.dot calls it (numba_backend.blas), which
                # takes no empty operand
                with em.block(f"elif lhs.shape[{lc[0]}] == 0:"):
                    with em.block(f"for m in range(lhs.shape[{lfree[0]}]):"):
                        with em.block(f"for n in range(rhs.shape[{rfree[0]}]):"):
                            em.line(f"out[m, n] = {_np_name(out_dt)}(0)")
                # a matrix times a vector (one free extent 1, the other above 1): GEMV,
                # as NumPy's matmul and dot call it (GEMM with n = 1 costs 3-8 times
                # as much at 128 x 128); 1 x 1 products stay with GEMM
                with em.block(f"elif rhs.shape[{rfree[0]}] == 1 and "
                              f"lhs.shape[{lfree[0]}] > 1:"):
                    em.line(f"matvec_into({a}, {b}, out)")
                with em.block(f"elif lhs.shape[{lfree[0]}] == 1 and "
                              f"rhs.shape[{rfree[0]}] > 1:"):
                    em.line(f"vecmat_into({a}, {b}, out)")
                with em.block(f"elif lhs.shape[{lfree[0]}] != 0 and "
                              f"rhs.shape[{rfree[0]}] != 0:"):
                    em.line(f"matmul_into({a}, {b}, out)")
            else:
                with em.block("else:"):
                    if out_a.ndim == 0:
                        em.line(f"out[()] = np.dot({a}, {b})")
                    else:
                        em.line(f"np.dot({a}, {b}, out)")
        elif direct and not lc and lhs_a.ndim == 1 and rhs_a.ndim == 1:
            with em.block("for m in range(lhs.shape[0]):"):
                with em.block("for n in range(rhs.shape[0]):"):
                    em.line("out[m, n] = lhs[m] * rhs[n]")
        else:
            em.line(f"nb = {_prod_code('lhs', lb)}")
            em.line(f"nm = {_prod_code('lhs', lfree)}")
            em.line(f"nk = {_prod_code('lhs', lc)}")
            em.line(f"nn = {_prod_code('rhs', rfree)}")
            for arr, perm, shape in (("lhs", lperm, "(nb, nm, nk)"),
                                     ("rhs", rperm, "(nb, nk, nn)")):
                src = arr if perm == tuple(range(len(perm))) else \
                    f"np.transpose({arr}, ({''.join(f'{d}, ' for d in perm)}))"
                em.line(f"{arr}3 = np.ascontiguousarray({src}).reshape({shape})"
                        f".astype({_np_name(compute)})")
            em.line(f"res = np.empty((nb, nm, nn), {_np_name(compute)})")
            with em.block("for bi in range(nb):"):
                if compute.kind in "fc":
                    em.line("np.dot(lhs3[bi], rhs3[bi], res[bi])")
                else:
                    with em.block("for m in range(nm):"):
                        with em.block("for n in range(nn):"):
                            em.line(f"acc = {_np_name(compute)}(0)")
                            with em.block("for k in range(nk):"):
                                em.line("acc += lhs3[bi, m, k] * rhs3[bi, k, n]")
                            em.line("res[bi, m, n] = acc")
            res = "res" if in_dt != np.bool_ else "(res > 0)"
            em.line(f"out.reshape((nb * nm * nn,))[:] = {res}.reshape((nb * nm * nn,))"
                    f".astype({_np_name(out_dt)})")
    return name, em.text()


# ------------------------------------ inlined kernels -------------------------------------

# A kernel step of a loop body is pasted into the driver (instead of called) when it is
# element-wise (no reductions), runs over at most this many elements and its serial
# function has at most this many lines: the call, with its array arguments, costs more
# than such a kernel's work, and a pasted kernel compiles with the driver.
INLINE_MAX_ELEMENTS = 64
INLINE_MAX_LINES = 120

_HOISTED = re.compile(r"^    \w+ = (ip\[\d+\]|np\.\w+\(fp\[\d+\]\))\s*(#.*)?$")
_IP_READ = re.compile(r"\bip\[(\d+)\]")
_INT_LINE = re.compile(r"^(\w+) = (-?\d+)\s*(#.*)?$")
_plans: dict = {}


class _Paste(NamedTuple):
    """A kernel's serial function as ``_Gen.inline_kernel`` pastes it: its parameters,
    the lines reading ``ip``/``fp`` (to the prologue), the rest (the loop nest), its
    rank, the names it assigns and its module's imports."""
    params: tuple
    header: tuple
    body: tuple
    ndim: int
    locals: frozenset
    imports: tuple
    stored: frozenset       # the locals ``body`` assigns


def _inline_plan(step, src):
    """The ``_Paste`` of a kernel step to paste into a driver, or None when the step is called instead: a kernel with reductions, one
    calling a user's function, one above ``INLINE_MAX_ELEMENTS`` elements or
    ``INLINE_MAX_LINES`` lines, or one whose source is not the plain shape this pastes
    (straight assignments and loops, one final ``return 0``)."""
    k = step.kernel
    if k.reductions or src.in_process:
        return None
    size = 1
    for n in step.iparams[:k.ndim]:
        size *= int(n)
    if size > INLINE_MAX_ELEMENTS:
        return None
    # (by the full text: the comments naming the equations are pasted too)
    plan = _plans.get(src.text)
    if plan is None:
        plan = _plans[src.text] = _make_plan(src, k.ndim) or False
    return plan or None


def _make_plan(src, ndim):
    text = src.text
    head, sep, rest = text.partition("\ndef kernel(")
    if not sep:
        return None
    fn_text = "def kernel(" + rest.split("\n\n\ndef ", 1)[0]
    try:
        tree = ast.parse(fn_text)
    except SyntaxError:
        return None
    (fn,) = tree.body
    params = [a.arg for a in fn.args.args]
    if tuple(params) != tuple(src.arg_names):
        return None
    local = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.Return,)) and node is not fn.body[-1]:
            return None
        if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.Global, ast.Nonlocal,
                             ast.With, ast.Try, ast.Yield, ast.Break, ast.Continue)) \
                and node is not fn:
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return None
    if local & set(params):
        return None
    last = fn.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Constant)):
        return None
    lines = fn_text.rstrip("\n").splitlines()[1:]
    if len(lines) > INLINE_MAX_LINES or lines[-1].strip() != "return 0":
        return None
    lines = lines[:-1]
    header = []
    while lines and _HOISTED.match(lines[0]):
        header.append(lines.pop(0)[4:])
    if [h.split(" = ", 1)[0] for h in header[:ndim]] != [f"n{d}" for d in range(ndim)]:
        return None
    body = [line[4:] if line.startswith("    ") else line.lstrip() for line in lines]
    imports = tuple(line for line in head.splitlines()
                    if line.startswith(("import ", "from ")))
    # (the header's lines are the function's first statements, one each)
    stored = {node.id for stmt in fn.body[len(header):] for node in ast.walk(stmt)
              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    return _Paste(tuple(params), tuple(header), tuple(body), ndim, frozenset(local), imports,
                  frozenset(stored))


def _flags() -> str:
    import numba
    return "boundscheck" if numba.config.BOUNDSCHECK else ""


# ---------------------------------------- drivers -----------------------------------------

_drivers: dict = {}
_lock = threading.RLock()


def _driver_kernel_spec(kernel) -> list:
    """The signature a driver calls a kernel with: the kernel's own
    (``cache.signature_spec``: read-only inputs), which the executor and the kernel's
    compile job compile. The driver's writable buffers convert to read-only arrays
    safely, so the driver links that very code instead of compiling the kernel again."""
    return cache.signature_spec(kernel)


def _kernel_for_driver(module, func, opts, sig):
    """A dispatcher of a kernel compiled (or loaded) for ``sig`` and closed to further
    compiles: Numba then types a driver's calls with writable arrays against it."""
    disp = dispatcher(module, func, opts)
    disp.compile(sig)
    disp.disable_compile()
    return disp


class Driver:
    """A generated driver module and its compiled function. ``in_process``: it calls
    users' Numba functions (a numba_call, or a kernel calling one), so it compiles in
    this process and never from or into Numba's disk cache
    (numba_backend.user_functions)."""

    def __init__(self, text, key, kernels):
        from numba_backend.host_callbacks import calls_host_callbacks
        from numba_backend.user_functions import calls_user_functions
        self.text = text
        self.key = key
        self.kernels = kernels
        self.in_process = calls_user_functions(text) or \
            any(h.in_process for h, _ in kernels.values())
        # Numba's options: a driver calling host callbacks keeps the GIL (each call back
        # would take it again; the rest of such a loop is too short to gain from it)
        self.opts = {}
        if self.in_process:
            self.opts["cache"] = False
        if calls_host_callbacks(text):
            self.opts["nogil"] = False
        self.path = os.path.join(cache._kernel_dir(), f"d_{key[:32]}.py")
        cache._write_source(self.path, text)
        self.module = self._import()
        self.fn = dispatcher(self.module, "driver", self.opts)
        self.compiled = False
        self.failed = None
        self.job = None      # Future of a compile worker's reply
        self.lock = threading.Lock()
        # the kernels' dispatchers (kept alive: the driver calls their code) and their
        # compiled functions' addresses, the driver's ``KP`` (``link_kernels``)
        self.kernel_fns: dict = {}
        self.kp = None

    def link_kernels(self):
        """Compile (or load from the disk cache) each kernel the driver calls, for the
        signature it calls it with, and collect their addresses into ``kp``. The
        driver's code does not contain them: it calls them by address
        (``driver_runtime.call_kernel``), so the same addresses serve a driver
        compiled here, by a worker or loaded from the disk cache."""
        from numba import types

        from numba_backend.driver_runtime import KERNEL_RETURN
        addrs = []
        from numba_backend import driver_runtime
        for name, (h, spec) in self.kernels.items():
            sig = numba_types(spec)
            if isinstance(h, RuntimeFunction):
                # (Numba's disk cache: a worker compiled it with the driver)
                disp = getattr(driver_runtime, h.func)
                disp.compile(sig)
            elif h.in_process:
                # its executor's dispatcher, compiled for ``spec`` (no disk cache to
                # load a second copy from)
                disp = h.dispatcher()
                disp.disable_compile()
            else:   # (after a worker's compile: disk-cache loads)
                disp = _kernel_for_driver(h.module, "kernel", h.opts(False), sig)
            cres = disp.overloads[sig]
            ret = cres.signature.return_type
            if not (isinstance(ret, types.Integer) and ret.bitwidth == 64 and ret.signed):
                raise TypeError(f"kernel {name} returns {ret}, not {KERNEL_RETURN}")
            addrs.append(cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))
            self.kernel_fns[name] = disp
        kp = np.array(addrs, dtype=np.int64)
        kp.flags.writeable = False
        self.kp = kp

    def _import(self):
        return load_module(f"{PACKAGE}.d_{self.key[:32]}", self.path)

    def on_disk(self) -> bool:
        return not self.in_process and cache.on_disk(self.path, "driver")


def _driver_for(text, kernels) -> Driver:
    key = hashlib.sha256(codegen.code_only(text).encode()).hexdigest()
    with _lock:
        d = _drivers.get(key)
        if d is None:
            d = _drivers[key] = Driver(text, key, kernels)
        return d


# Buffers carved out of an arena start at multiples of this many bytes (as NumPy's own
# allocations are aligned for vector loads).
_ARENA_ALIGN = 64


def _returned(g, outs) -> set:
    """The variables a driver may return: its outputs, the vars bound to a cond's
    result, and the other buffer of each returned carry (the two swap every
    iteration)."""
    seen, todo = set(), list(outs)
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        todo.extend(g.aliases.get(v, ()))
        if v in g.partner:
            todo.append(g.partner[v])
    return seen


def _arenas(g, outs):
    """Split the driver's buffers: those it may return stay arguments of their own
    (a result must not hold an arena alive, nor share one with another result); the
    others become views into one arena per dtype, made in the prologue, their offsets
    and extents read from ``IP``. -> (argument buffers, views of those [(name, base,
    shape)], arenas [(name, dtype, elements)], prologue lines)."""
    returned = _returned(g, outs)
    own = [(v, a) for v, a in g.buffers if v in returned]
    own_names = {v for v, _ in own}
    arenas: dict = {}          # dtype -> [name, elements so far]
    where: dict = {}           # buffer -> (arena name, first element)
    lines = []
    for v, aval in g.buffers:
        if v in own_names:
            continue
        dt = _storage(aval.dtype)
        arena = arenas.setdefault(dt, [f"A{len(arenas)}", 0])
        step = max(1, _ARENA_ALIGN // dt.itemsize)
        first = -(-arena[1] // step) * step
        arena[1] = first + int(np.prod(aval.shape, dtype=np.int64))
        where[v] = (arena[0], first)
        k, _ = g.int_range([first, *aval.shape])
        lines.append(f"{v} = arena_view({arena[0]}, IP, {k}, {aval.ndim})")
    views = []
    for v, base, shape in g.views:
        if base in where:
            name, first = where[base]
            k, _ = g.int_range([first, *shape])
            lines.append(f"{v} = arena_view({name}, IP, {k}, {len(shape)})")
        else:
            views.append((v, base, shape))
    return own, views, [(n, dt, size) for dt, (n, size) in arenas.items()], lines


def _scalarize(g, outs) -> list:
    """Keep the driver's buffers of a few elements in locals where their uses allow
    (``registers.scalarize``): they leave ``g.buffers``. -> the statements that store
    the returned carries kept in locals into their arrays, before the return."""
    viewed = {base for _, base, _ in g.views}
    returned = _returned(g, outs)
    candidates, convert = {}, {}
    for v, aval in g.buffers:
        if aval.size <= registers.SCALAR_MAX_ELEMENTS and not needs_view(aval.dtype) and \
                v not in viewed and (v not in returned or v in g.swapped):
            candidates[v] = tuple(aval.shape)
            convert[v] = _np_name(aval.dtype)
    if not candidates:
        return []
    lines, done = registers.scalarize(g.em.lines, candidates, g.swaps, convert)
    g.em.lines = lines
    kept = [o for o in outs if o in done]
    g.buffers = [(v, a) for v, a in g.buffers if v not in done or v in kept]
    return [line for o in dict.fromkeys(kept) for line in registers.write_back(o, done[o])]


def build_source(spec):
    """(source text, kernels, IP, FP, const arrays, (buffers, views, arenas), host
    callback entries) of the driver of ``spec``."""
    g = _Gen()
    ins = [f"a{i}" for i in range(len(spec.in_avals))]
    outs = g.control(spec, ins)
    write_back = _scalarize(g, outs)
    own, views, arenas, arena_lines = _arenas(g, outs)
    consts = [name for name, _ in g.arrays]
    bufs = [name for name, _, _ in arenas] + [name for name, _ in own] + \
        [name for name, _, _ in views]
    em = codegen.Emitter()
    em.line(f"# Generated by tracer (numba_backend.control_flow): a compiled {spec.kind}.")
    em.line(f"# helpers {codegen.helper_hash()}{' ' + g.flags if g.flags else ''}")
    em.line("import math")
    em.line("import numpy as np")
    if g.helpers:
        em.line("from numba.extending import register_jitable")
    if any("matmul_into(" in src for src in g.helpers.values()):
        em.line("from numba_backend.blas import matmul_into, matvec_into, vecmat_into")
    runtime = [n for n, used in (("arena_view", arena_lines), ("call_kernel", g.kernels))
               if used]
    if runtime:
        em.line(f"from numba_backend.driver_runtime import {', '.join(runtime)}")
    if g.uses_views:
        em.line("from numba_backend.views import reshape_c")
    for line in sorted(g.imports - {"import math", "import numpy as np",
                                    "from numba import prange"}):
        em.line(line)
    if g.user:
        em.line(f"import numba_backend.user_functions as {_UF}")
    if g.callbacks:
        em.line("from numba import objmode")
        em.line(f"from numba_backend.host_callbacks import call as {_HC}")
    if g.kernels:
        # the kernels' indices in ``KP`` (their addresses, filled in by the caller):
        # module constants, so the source names each kernel it calls
        em.line("")
        for k, name in enumerate(g.kernels):
            em.line(f"{name} = {k}")
    for src in g.helpers.values():
        em.line("")
        em.line("")
        em.lines += src.rstrip("\n").splitlines()
    em.line("")
    em.line("")
    # The operands and consts come in as writable copies (every array in the loop then
    # has one Numba type per dtype and rank, and nothing the caller holds is ever
    # written), then the arenas, the buffers of their own and their views
    # (``CompiledRunner`` makes them).
    params = ["IP", "FP", "KP"] + ins + consts + bufs
    with em.block(f"def driver({', '.join(params)}):"):
        if g.callbacks:
            # Numba sets up an object-mode call's Python environment where it lowers the
            # function's first one: an empty block here puts that at the entry, so that
            # blocks in both arms of an if (a cond) see it (else LLVM rejects the code)
            with em.block("with objmode():"):
                em.line("pass")
        for line in arena_lines + g.prologue:
            em.line(line)
    em.lines += g.em.lines
    em.level = 1
    for line in write_back:
        em.line(line)
    em.line(f"return ({''.join(o + ', ' for o in outs)})")
    ip = np.array(g.ints, dtype=np.int64)
    fp = np.array(g.floats, dtype=np.float64)
    for a in (ip, fp):
        a.flags.writeable = False
    arrays = [_to_storage(np.array(v, copy=True)) for _, v in g.arrays]
    buffers = [(_storage(a.dtype), tuple(a.shape)) for _, a in own]
    index = {name: i for i, (name, _) in enumerate(own)}
    views = [(index[base], shape) for _, base, shape in views]
    arenas = [(dt, size) for _, dt, size in arenas]
    return (em.text(), g.kernels, ip, fp, arrays, (buffers, views, arenas),
            tuple(g.callbacks))


# Scans whose bodies are calls run on the loop runner (``numba_backend.loop_runner``)
# instead of a generated driver; False: every loop gets a driver (tests run both). Its
# calls rely on the 64-bit C calling conventions of x86-64 and AArch64.
LOOP_RUNNER = platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64") and \
    sys.maxsize > 2 ** 32

# A scan whose Python loop would take longer than this waits for its compiled driver.
_HOST_BUDGET_S = 0.5
_SECONDS_PER_EQN = 10e-6


def numpy_tier_seconds(jaxpr) -> float:
    """About how long one run of ``jaxpr`` (a Jaxpr) takes on the NumPy impls, equation
    by equation: some microseconds per equation run, a scan's body ``length`` times, a
    cond's costliest branch; a while loop's trip count is unknown (inf)."""
    total = 0.0
    for e in jaxpr.eqns:
        name = e.primitive.name
        if name == "while":
            return float("inf")
        subs = [v for v in e.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")]
        subs += [b for v in e.params.values() if isinstance(v, tuple)
                 for b in v if hasattr(b, "eqns") or hasattr(b, "jaxpr")]
        inner = [numpy_tier_seconds(getattr(j, "jaxpr", j)) for j in subs]
        if name == "scan":
            total += e.params["length"] * sum(inner)
        elif name == "cond":
            total += max(inner, default=0.0)
        else:
            total += sum(inner) if inner else _SECONDS_PER_EQN
    return total


class CompiledRunner:
    """Runs a control-flow call through its generated driver (host loop meanwhile when
    the driver is still compiling in the background)."""

    def __init__(self, spec, driver, ip, fp, consts, buffers, host, callbacks=()):
        # what it needs of the spec, not the spec (``runner_for`` caches by the spec)
        self.kind, self.in_avals, self.out_avals = spec.kind, spec.in_avals, spec.out_avals
        self.driver = driver
        self.ip, self.fp = ip, fp
        self.consts = consts             # writable copies, never written by the driver
        # buffers of their own (dtype, shape), views of them (buffer, shape), arenas
        # (dtype, elements)
        self.buffers, self.views, self.arenas = buffers
        self.host = host
        # the host callbacks' entries (their tokens are in ``ip``): alive while this is
        self.callbacks = callbacks
        # no operand or result travels as its bits (numba_backend.storage)
        self.plain = not any(needs_view(a.dtype) for a in self.in_avals + self.out_avals)

    def _sig_spec(self) -> list:
        return ([array_spec(self.ip.dtype, 1, True), array_spec(self.fp.dtype, 1, True),
                 array_spec(np.int64, 1, True)]
                + [array_spec(a.dtype, a.ndim, False) for a in self.in_avals]
                + [array_spec(c.dtype, c.ndim, False) for c in self.consts]
                + [array_spec(dt, 1, False) for dt, _ in self.arenas]
                + [array_spec(dt, len(shape), False) for dt, shape in self.buffers]
                + [array_spec(self.buffers[b][0], len(shape), False)
                   for b, shape in self.views])

    def _job(self) -> dict | None:
        """The driver's compile as a compile worker's job (its kernels as globals); None
        for a driver compiled in this process (``Driver.in_process``)."""
        d = self.driver
        if d.in_process:
            return None
        return {"module": d.module.__name__, "path": d.path, "func": "driver", "opts": d.opts,
                "sig": self._sig_spec(),
                "globals": [{"name": n, "runtime": h.func, "sig": spec}
                            if isinstance(h, RuntimeFunction) else
                            {"name": n, "module": h.module.__name__, "path": h.path,
                             "func": "kernel", "opts": h.opts(False), "sig": spec}
                            for n, (h, spec) in d.kernels.items()]}

    def _host_seconds(self) -> float:
        """About how long the Python loop would take: the NumPy tier costs some
        microseconds per equation of the body and iteration."""
        p = self.host.params
        return p.get("length", 1) * sum(numpy_tier_seconds(ex.program.jaxpr.jaxpr)
                                        for ex in self.host.exes)

    def _buffers(self) -> list:
        """The driver's arenas, buffers and views of them, fresh for one call."""
        bufs = [np.empty(shape, dt) for dt, shape in self.buffers]
        return ([np.empty(n, dt) for dt, n in self.arenas] + bufs
                + [bufs[b].reshape(shape) for b, shape in self.views])

    def _compile(self):
        d = self.driver
        with d.lock:
            if d.compiled or d.failed is not None:
                return
            t0 = time.perf_counter()
            try:
                d.link_kernels()
                d.fn.compile(numba_types(self._sig_spec()))
                d.compiled = True
                stats["drivers_compiled"] += 1
                if config.log_compiles:
                    logger.warning("Compiled %s driver %s in %.1f ms", self.kind,
                                   d.key[:12], (time.perf_counter() - t0) * 1e3)
            except Exception as e:   # a bug in the generated code: fall back, loudly
                if STRICT:
                    raise
                self._fail(e)

    def _fail(self, e):
        self.driver.failed = e
        logger.warning("tracer: compiling the %s loop %s failed (%s); it runs as a Python "
                       "loop around compiled kernels. This is a bug in tracer's backend; "
                       "please report it.", self.kind, self.driver.path, e)

    def prefetch(self):
        """In "async" mode, start the driver's compile in a worker now (a driver in the
        disk cache needs none: it loads on the first call); for a scan short enough to
        run as a Python loop meanwhile, after the body's own kernels: that loop runs them,
        each switched to compiled code in a fraction of a second, where the driver takes
        seconds (and then loads them from the cache instead of compiling them)."""
        d = self.driver
        if config.jit_compile != "async" or d.compiled or d.failed is not None:
            return
        if d.job is None and not d.on_disk():
            from numba_backend.workers import pool
            if self.kind != "while" and self._host_seconds() < _HOST_BUDGET_S:
                # (a scan this short runs its Python loop meanwhile; a long one and a
                # while loop wait for, or soon hand over to, the driver)
                for ex in self.host.exes:
                    ex._compile_in_background()
            d.job = pool.submit(self._job(), self._compile)

    def __call__(self, arrays):
        d = self.driver
        if d.compiled and not self.callbacks and not config.debug_kernels and \
                config.jit_compile != "none":
            # the steady state: the compiled driver on fresh buffers
            if self.plain:
                args = [np.array(a, copy=True, order="C") for a in arrays]
                bufs = [np.empty(shape, dt) for dt, shape in self.buffers]
                outs = d.fn(self.ip, self.fp, d.kp, *args, *self.consts,
                            *[np.empty(n, dt) for dt, n in self.arenas], *bufs,
                            *[bufs[b].reshape(shape) for b, shape in self.views])
                return list(outs)
            args = [_writable(_to_storage(a)) for a in arrays]
            outs = d.fn(self.ip, self.fp, d.kp, *args, *self.consts, *self._buffers())
            return [_from_storage(o, a) for o, a in zip(outs, self.out_avals)]
        mode = config.jit_compile
        if config.debug_kernels or mode == "none" or d.failed is not None:
            return self.host(arrays)
        if not d.compiled:
            if mode == "async" and not (d.job is None and d.on_disk()):
                # (a driver already in the disk cache loads at once, below)
                from numba_backend.workers import pool
                if d.job is None:
                    d.job = pool.submit(self._job(), self._compile)
                if not d.job.done():
                    if self.kind == "while":
                        # the Python loop, until the driver is ready to take the carry over
                        arrays, done = self.host.run_while(arrays, d.job.done)
                        if done:
                            return arrays
                    elif self.kind == "cond" or self._host_seconds() < _HOST_BUDGET_S:
                        return self.host(arrays)
                    # else a long scan: waiting for its compile beats running it in Python
                with pool.waiting():
                    reply = d.job.result()
                if not reply["ok"]:
                    self._fail(reply.get("error"))
                    return self.host(arrays)
            self._compile()        # after a worker's compile: a disk-cache load
            if not d.compiled:
                return self.host(arrays)
        args = [_writable(_to_storage(a)) for a in arrays]
        bufs = self._buffers()
        if not self.callbacks:
            outs = d.fn(self.ip, self.fp, d.kp, *args, *self.consts, *bufs)
            return [_from_storage(o, a) for o, a in zip(outs, self.out_avals)]
        err = None
        try:
            outs = d.fn(self.ip, self.fp, d.kp, *args, *self.consts, *bufs)
        except BaseException as e:
            # a callback's exception propagates as it is; should Numba wrap it, the
            # callback's own exception (with its traceback) is raised instead
            err = host_callbacks.take_pending()
            if err is None or err is e:
                raise
        if err is not None:
            raise err
        return [_from_storage(o, a) for o, a in zip(outs, self.out_avals)]


def _writable(a):
    """A writable C-contiguous copy of ``a`` (the driver's operands)."""
    return np.array(a, copy=True, order="C")


def _prep(a):
    a = np.asarray(a)
    if not a.flags.c_contiguous:      # (np.ascontiguousarray would make 0-d arrays 1-d)
        a = np.ascontiguousarray(a)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


# --------------------------------------- host loops ---------------------------------------

class HostRunner:
    """The loop in Python around the sub-programs' Executables (compiled kernels)."""

    def __init__(self, spec):
        from numba_backend.executor import compile_program
        # what it needs of the spec, not the spec (``runner_for`` caches by the spec)
        self.kind, self.params, self.out_avals = spec.kind, dict(spec.params), spec.out_avals
        self.exes = [compile_program(p, f"{spec.kind} body") for p in spec.programs]
        for ex in self.exes:
            ex.loop_body = spec.kind != "cond"
        self.why = ""

    def prefetch(self):
        """Nothing to start: a Python loop's bodies compile on their first call."""

    def __call__(self, arrays):
        if self.kind == "while":
            return self.run_while(arrays, lambda: False)[0]
        stats["host_loops"] += 1
        p = self.params
        arrays = [np.asarray(a) for a in arrays]
        if self.kind == "cond":
            n = len(self.exes)
            i = int(arrays[0])
            i = n - 1 if i < 0 or i >= n else i
            return _outs(self.exes[i](arrays[1:]), self.out_avals)
        nc, nk, n = p["num_consts"], p["num_carry"], p["length"]
        consts, carry, xs = arrays[:nc], arrays[nc:nc + nk], arrays[nc + nk:]
        y_avals = self.out_avals[nk:]
        ys = [np.empty(a.shape, a.dtype) for a in y_avals]
        (ex,) = self.exes
        body_avals = self.out_avals[:nk] + tuple(a.update(shape=a.shape[1:])
                                                 for a in y_avals)
        body, scope = ex, contextlib.nullcontext()
        if ex.tier()[0] == "numpy":
            # the whole loop on the NumPy tier, its body's tier asked once and NumPy's
            # error state switched once (a GRU cell runs about 75 us an iteration there;
            # asking per iteration took 5-10 more)
            closed = ex.program.jaxpr
            body = impl_runner(closed.jaxpr, closed.consts)
            scope = numpy_tier_scope()
        with scope:
            for k in range(n):
                i = n - 1 - k if p["reverse"] else k
                outs = _outs(body(consts + carry + [x[i] for x in xs]), body_avals)
                carry = outs[:nk]
                for y, o in zip(ys, outs[nk:]):
                    y[i] = o
        return carry + ys

    def run_while(self, arrays, stop):
        """Iterate the while loop until it ends -> (final carry, True), or until
        ``stop()`` -> (operands with the carry reached so far, False): a while loop can
        be resumed from any carry, so the compiled driver can take over mid-loop."""
        stats["host_loops"] += 1
        p = self.params
        arrays = [np.asarray(a) for a in arrays]
        ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
        consts, carry = arrays[:ncc + nbc], arrays[ncc + nbc:]
        cc, bc = consts[:ncc], consts[ncc:]
        cond_ex, body_ex = self.exes
        while bool(np.asarray(cond_ex(cc + carry)[0])):
            carry = _outs(body_ex(bc + carry), self.out_avals)
            if stop():
                return consts + carry, False
        return carry, True


def _outs(outs, avals):
    res = []
    for o, a in zip(outs, avals):
        o = np.asarray(o)
        if o.dtype != a.dtype:
            o = o.astype(a.dtype)
        res.append(o)
    return res


def describe_runner(runner) -> str:
    if isinstance(runner, ScanRunner):
        return runner.describe()
    if isinstance(runner, CompiledRunner):
        return runner.driver.text
    return f"# {runner.kind}: a Python loop around compiled bodies ({runner.why})\n"


_runners: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # spec -> runner


def runner_for(spec):
    """The runner of a control-flow spec, made on first use and kept while the spec
    lives (runners hold no reference to their spec, so the entry dies with it)."""
    r = _runners.get(spec)
    if r is None:
        r = make_runner(spec)
        with _lock:
            r = _runners.setdefault(spec, r)
    return r


def generated_source(spec) -> str:
    """The generated Numba source running a control-flow call (or why it runs in
    Python)."""
    return describe_runner(runner_for(spec))


def make_runner(spec):
    """The callable behind a control-flow library call: the compiled driver when every
    step of the bodies can be called from Numba, else the host loop."""
    host = HostRunner(spec)
    if spec.kind == "scan" and LOOP_RUNNER:
        # a body of calls needs no generated driver (numba_backend.loop_runner)
        flags = _flags()
        long = spec.params["length"] * sum(numpy_tier_seconds(ex.program.jaxpr.jaxpr)
                                           for ex in host.exes) >= _HOST_BUDGET_S
        try:
            return ScanRunner(spec, host, lambda step: _inline_plan(
                step, codegen.generate(step.kernel, flags)) is not None, long)
        except NotRunnable:
            pass
    try:
        text, kernels, ip, fp, consts, buffers, callbacks = build_source(spec)
    except NotCompilable as e:
        host.why = str(e)
        if config.log_compiles:
            logger.warning("tracer: %s runs as a Python loop around compiled kernels: %s",
                           spec.kind, e)
        return host
    driver = _driver_for(text, kernels)
    return CompiledRunner(spec, driver, ip, fp, consts, buffers, host, callbacks)
