"""Loop IR -> Python source for Numba, through a small emitter (no ad-hoc concatenation).

One kernel becomes one module with two functions of the same body: ``kernel`` (serial
loops) and ``kernel_par`` (``prange`` over the outermost kept loop, compiled only when a
call is large enough). The source is written for humans: one statement per IR node,
deterministic names (``in0``, ``out0``, ``n0`` extents, ``p3`` runtime ints, ``f0``
runtime floats, ``i0`` loop indices, ``t5`` temporaries, ``acc0`` accumulators), each
group preceded by a ``# <jaxpr equation>`` comment. A statement sits in the outermost
loop where all its inputs are defined (loop-invariant loads and math are hoisted).

Scalar semantics (the eager NumPy impl is the reference; Numba's typing is not ours):
every value is held in its dtype's *carrier* -- the dtype itself, except float16, carried
as a float32 that is always float16-representable (rounded after every op, stored as
uint16 bits), and the ml_dtypes types (``lowp_carrier``): bfloat16 and the float8/float4
formats carried as a float32 holding a value of the type, 2-/4-bit integers as
int8/uint8; stored as their bits (``numba_backend.storage``). Their arithmetic never
reaches the code here: lowering runs it in the widened types between conversions, as
eager does (``lowering.rules.lowp_plan``); kernels load, convert, select and store them. Integer results are cast back to their dtype (so int8 + int8 wraps), all
constants are typed (``np.float32(2.0)``, never a bare ``2.0`` that would widen to
float64), integer division/remainder/shifts and float->int conversion go through
``numba_backend.scalar`` helpers with the eager edge cases (x / 0, INT_MIN / -1, shifts by
>= the width, NaN -> 0, saturation).
"""
from __future__ import annotations

import hashlib
import importlib.util
import importlib
import inspect
import math
from contextlib import contextmanager

import numpy as np

from numba_backend import inliner
from lowering.ir import (AccRef, Call, Const, FnRef, FParam, IParam, Kernel, Load, LoopIndex,
                         PartRef, Op, children, reduce_run, walk)
from numba_backend import pairwise
from tracer import dtypes

RT = "rt"      # alias of numba_backend.scalar in generated code

# The backend-neutral helper modules that lowering rules name in ``ctx.call`` (e.g.
# ``"scalar.sign_f"``, ``"vecmath.exp_f32"``) and the modules of this backend that
# implement them; any other module name is imported as it is (``lax.special_kernels``).
# ``ffi`` names users' Numba functions by token (numba_backend.user_functions).
HELPER_MODULES = {"scalar": "numba_backend.scalar", "vecmath": "numba_backend.vecmath",
                  "ffi": "numba_backend.user_functions"}


def resolve(fnref: FnRef) -> FnRef:
    """The importable function behind a ``Call``'s ``FnRef``."""
    mod = HELPER_MODULES.get(fnref.module)
    return fnref if mod is None else FnRef(mod, fnref.name)
PW = "pw"      # alias of numba_backend.pairwise
CHUNKS = 64    # chunks of a parallel reduction over everything
F16 = np.dtype(np.float16)


class Emitter:
    """Lines with indentation: ``line(text)``, ``with block(header):``."""

    def __init__(self):
        self.lines: list = []
        self.level = 0

    def line(self, text: str = ""):
        self.lines.append(("    " * self.level + text) if text else "")

    @contextmanager
    def block(self, header: str):
        self.line(header)
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# ------------------------------------ scalar code ----------------------------------------

def np_name(dt: np.dtype) -> str:
    dt = np.dtype(dt)
    return "np.bool_" if dt == np.bool_ else f"np.{dt.name}"


def carrier(dt: np.dtype) -> np.dtype:
    dt = np.dtype(dt)
    if dt == F16:
        return np.dtype(np.float32)
    return lowp_carrier(dt) if dt in dtypes._LOWP else dt


# ------------------------- the ml_dtypes types (numba_backend.scalar) ---------------------

# (by membership, not dtype.kind: ml_dtypes gives float8_e5m2 the kind "f", the others "V")
# (by name: the ml_dtypes types are loaded on first need, ``tracer.dtypes``)
_INT_BITS_OF = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}


def _int_bits(dt: np.dtype):
    """The width of a 2-/4-bit integer type, else None."""
    return _INT_BITS_OF.get(dt.name) if dt in dtypes._LOWP else None


def lowp_carrier(dt: np.dtype) -> np.dtype:
    """The carrier of an ml_dtypes type: float32 for the floats, int8/uint8 (the
    ``dtypes.compute_dtype``) for the 2-/4-bit integers."""
    if dtypes.is_lowp_int(dt):
        return dtypes.compute_dtype(dt)
    if dtypes.is_lowp_float(dt):
        return np.dtype(np.float32)
    raise TypeError(f"codegen: no carrier for dtype {dt}")


def _lowp_load(code: str, dt: np.dtype) -> str:
    """The carrier of a loaded bit pattern."""
    if dt.name == "bfloat16":
        return f"{RT}.bf16_to_f32({code})"
    if _int_bits(dt):
        fn = "wrap_s" if dtypes.is_signed_integer(dt) else "wrap_u"
        return f"{RT}.{fn}({code}, {_int_bits(dt)})"
    return f"{RT}.lowp_decode({code}, {RT}.DEC_{dt.name})"


def _lowp_store(code: str, dt: np.dtype) -> str:
    """The bit pattern of a carrier (exact: carriers hold values of the type)."""
    if dt.name == "bfloat16":
        return f"{RT}.bf16_store({code})"
    if dt.name == "float8_e8m0fnu":
        return f"{RT}.e8m0_store({code})"
    if _int_bits(dt):
        return f"{RT}.wrap_u({code}, {_int_bits(dt)})"
    return f"{RT}.f8_store({code}, {RT}.STORE_{dt.name})"


def _lowp_from(code: str, src: np.dtype, dst: np.dtype) -> str:
    """convert_element_type from the carrier ``code`` of ``src`` (not an ml_dtypes type)
    to the ml_dtypes type ``dst``, as ``lax.elementwise._convert_np`` does."""
    if src == np.bool_:
        mid = np.dtype(np.int8) if _int_bits(dst) else np.dtype(np.float32)
        return cast_code(cast_code(code, src, mid), mid, dst)
    if _int_bits(dst):
        if src.kind == "f":      # truncated, saturated to the type's range, NaN -> 0
            info = dtypes.iinfo(dst)
            conv = (f"{RT}.f2i(np.float64({code}), {_float_lit(float(info.min))}, "
                    f"{_float_lit(float(info.max))}, np.int64({info.min}), "
                    f"np.int64({info.max}))")
            return f"{np_name(lowp_carrier(dst))}({conv})"
        fn = "wrap_s" if dtypes.is_signed_integer(dst) else "wrap_u"
        return f"{RT}.{fn}(np.int64({code}), {_int_bits(dst)})"
    # floats and integers up to 32 bits are exact in float64: one rounding from there
    # (int64/uint64 sources stay host steps: lowering.rules.lowp_plan)
    x = f"np.float64({code})"
    if dst.name == "bfloat16":
        if src == np.float32 or src == F16 or (src.kind in "iu" and src.itemsize <= 2):
            return f"{RT}.bf16_round32(np.float32({code}))"   # (exact in float32)
        return f"{RT}.bf16_round({x})"
    if dst.name == "float8_e8m0fnu":
        return f"{RT}.e8m0_round({x})"
    if src == F16:
        return f"{RT}.f8_from16({code}, {RT}.ENC_{dst.name}, {RT}.DEC_{dst.name})"
    import ml_dtypes
    fi = ml_dtypes.finfo(dst)
    return (f"{RT}.f8_round({x}, {fi.nmant + 1}, {fi.minexp}, {RT}.ENC_{dst.name}, "
            f"{RT}.DEC_{dst.name})")


def _lowp_to(code: str, src: np.dtype, dst: np.dtype) -> str:
    """convert_element_type from the ml_dtypes type ``src`` to ``dst``: through its
    carrier's value (NaN payloads of the float8/float4 formats dropped, as ml_dtypes
    decodes them)."""
    if dtypes.is_lowp_float(src) and src.name != "bfloat16" and src.name != "float8_e8m0fnu":
        code = f"{RT}.lowp_widen({code})"
        if dst == F16:      # (a value of the format is a float16 value)
            return code
    return cast_code(code, lowp_carrier(src), dst)


def const_code(value, dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "True" if value else "False"
    if dt.kind in "iu":
        return f"{np_name(dt)}({int(value)})"
    if dt.kind == "f" or dtypes.is_lowp_float(dt):
        return f"{np_name(carrier(dt))}({_float_lit(float(value))})"
    if dtypes.is_lowp_int(dt):
        return f"{np_name(carrier(dt))}({int(value)})"
    if dt.kind == "c":
        c = complex(value)
        return f"{np_name(dt)}(complex({_float_lit(c.real)}, {_float_lit(c.imag)}))"
    raise TypeError(f"codegen: constant of dtype {dt}")


def _float_lit(v: float) -> str:
    if math.isnan(v):
        return "np.nan"
    if math.isinf(v):
        return "np.inf" if v > 0 else "-np.inf"
    return repr(v)


def cast_code(code: str, src: np.dtype, dst: np.dtype) -> str:
    """Convert a carrier value of dtype ``src`` to dtype ``dst`` with
    convert_element_type's semantics."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return code
    if src in dtypes._LOWP:
        return _lowp_to(code, src, dst)
    if src.kind == "c" and dst.kind != "c":
        return cast_code(f"{RT}.real({code})", np.dtype(f"f{src.itemsize // 2}"), dst)
    if dst == np.bool_:
        return f"({code} != 0)"
    if dst in dtypes._LOWP:
        return _lowp_from(code, src, dst)
    if dst == F16:
        if src.kind == "f" and src != np.float64:
            return f"{RT}.f16r({code})"
        return f"{RT}.f16r(np.float64({code}))"
    if dst.kind in "iu" and src.kind == "f":
        if dst == np.uint64:
            return f"{RT}.f2u64(np.float64({code}))"
        info = np.iinfo(dst)
        conv = (f"{RT}.f2i(np.float64({code}), {_float_lit(float(info.min))}, "
                f"{_float_lit(float(info.max))}, np.int64({info.min}), np.int64({info.max}))")
        return conv if dst == np.int64 else f"{np_name(dst)}({conv})"
    if dst.kind == "c" and src.kind != "c":
        real = np.dtype(f"f{dst.itemsize // 2}")
        return f"{np_name(dst)}(complex({cast_code(code, src, real)}, 0.0))"
    return f"{np_name(dst)}({code})"


def _wrap(code: str, dt: np.dtype) -> str:
    """Bring an arithmetic result back to the carrier of ``dt`` (wrap ints, round f16)."""
    dt = np.dtype(dt)
    if dt == F16:
        return f"{RT}.f16r({code})"
    if dt.kind in "iu":
        return f"{np_name(dt)}({code})"
    if dt.kind in "fc":
        return f"{np_name(dt)}({code})"
    return code


def _signed(dt):
    return np.dtype(f"i{dt.itemsize}")


def _as_u64(code: str, dt) -> str:
    """An integer carrier's code as uint64 with the bits of its int64 value."""
    dt = np.dtype(dt)
    if dt == np.uint64:
        return code
    return f"np.uint64({code})" if dt == np.int64 else f"np.uint64(np.int64({code}))"


def _unsigned(dt):
    return np.dtype(f"u{dt.itemsize}")


_PY_OPS = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH_SAME = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def op_code(op: str, args: list, arg_dtypes: list, dt: np.dtype) -> str:
    """Code for IR op ``op`` on carrier codes ``args`` giving a carrier of dtype ``dt``."""
    dt = np.dtype(dt)
    a0 = np.dtype(arg_dtypes[0]) if arg_dtypes else None
    if op in _CMP:
        return f"({args[0]} {_CMP[op]} {args[1]})"
    if op == "select":
        return f"({args[1]} if {args[0]} else {args[2]})"
    if op == "cast":
        return cast_code(args[0], a0, dt)
    if op == "bitcast":
        return _bitcast_code(args[0], a0, dt)
    if op in ("floordiv", "mod"):
        return f"({args[0]} {'//' if op == 'floordiv' else '%'} {args[1]})"
    if dt == np.int64 and op in ("add", "sub", "mul"):
        # Numba's signed 64-bit arithmetic carries LLVM's ``nsw`` flag (an overflow is
        # undefined), so LLVM may fold ``x + 1 > x`` to True where the bits wrap. The
        # operation in uint64 has the same bits, defined on overflow (as eager's).
        a, b = (_as_u64(x, d) for x, d in zip(args, arg_dtypes))
        return f"np.int64({a} {_PY_OPS[op]} {b})"
    if op in _ARITH_SAME and dt in _FLOATS and all(np.dtype(d) == dt for d in arg_dtypes):
        # float32/float64 operands of the result's dtype: Numba's own result type is
        # that dtype, so no cast (each ``np.float64(...)`` costs Numba about 1 ms of
        # typing: a fifth of a small loop body's compile; the LLVM IR is the same)
        return f"({args[0]} {_ARITH_SAME[op]} {args[1]})"
    if op in _PY_OPS:
        if dt == np.bool_:
            sym = {"add": "|", "mul": "&", "and": "&", "or": "|", "xor": "^"}.get(op)
            if sym is None:
                raise TypeError(f"codegen: {op} on bool")
            return f"({args[0]} {sym} {args[1]})"
        return _wrap(f"{args[0]} {_PY_OPS[op]} {args[1]}", dt)
    if op == "div":
        if dt.kind == "c":
            return f"{RT}.cdiv{dt.itemsize * 8}({args[0]}, {args[1]})"
        if dt.kind == "f":
            return _wrap(f"{args[0]} / {args[1]}", dt)
        if dt.kind == "i":
            return _wrap(f"{RT}.idiv_s(np.int64({args[0]}), np.int64({args[1]}))", dt)
        return _wrap(f"{RT}.idiv_u(np.uint64({args[0]}), np.uint64({args[1]}))", dt)
    if op == "rem":
        if dt.kind == "f":
            return _wrap(f"np.fmod({args[0]}, {args[1]})", dt)
        if dt.kind == "i":
            return _wrap(f"{RT}.irem_s(np.int64({args[0]}), np.int64({args[1]}))", dt)
        if dt.kind == "u":
            return _wrap(f"{RT}.irem_u(np.uint64({args[0]}), np.uint64({args[1]}))", dt)
    if op == "pow":
        if dt.kind in "fc":
            return _wrap(f"np.power({args[0]}, {args[1]})", dt)
        if dt.kind == "i":
            return _wrap(f"{RT}.ipow_s(np.int64({args[0]}), np.int64({args[1]}))", dt)
        return _wrap(f"{RT}.ipow_u(np.uint64({args[0]}), np.uint64({args[1]}))", dt)
    if op in ("max", "min"):
        if dt == np.bool_:
            return f"({args[0]} {'|' if op == 'max' else '&'} {args[1]})"
        if dt.kind == "f":
            return f"{RT}.f{op}({args[0]}, {args[1]})"
        cmp = ">=" if op == "max" else "<="
        return f"({args[0]} if {args[0]} {cmp} {args[1]} else {args[1]})"
    if op == "neg":
        if dt.kind in "fc":
            return f"(-{args[0]})"
        if dt == np.uint64:
            return f"(np.uint64(0) - {args[0]})"
        if dt == np.int64:     # (wrapping: see add)
            return f"np.int64(np.uint64(0) - {_as_u64(args[0], a0)})"
        return _wrap(f"-{args[0]}", dt)
    if op == "abs":
        if a0.kind == "c":
            return _wrap(f"abs({args[0]})", dt)
        if dt.kind == "f":
            return f"abs({args[0]})"
        if dt == np.int64:     # (abs of the minimum is the minimum, as eager's)
            u = _as_u64(args[0], a0)
            return f"np.int64({u} if {args[0]} >= 0 else np.uint64(0) - {u})"
        return _wrap(f"abs(np.int64({args[0]}))", dt)
    if op == "not":
        if dt == np.bool_:
            return f"(not {args[0]})"
        return _wrap(f"~{args[0]}", dt)
    if op in ("shl", "shr_a", "shr_l"):
        bits = dt.itemsize * 8
        y = f"np.int64({args[1]})"
        if op == "shl":
            x = f"np.int64({args[0]})" if dt.kind == "i" else f"np.uint64({args[0]})"
        elif op == "shr_a":
            x = f"np.int64({np_name(_signed(dt))}({args[0]}))"
        else:
            x = f"np.uint64({np_name(_unsigned(dt))}({args[0]}))"
        return _wrap(f"{RT}.{op}({x}, {y}, {bits})", dt)
    raise TypeError(f"codegen: no code for op {op!r} with dtype {dt}")


def _bitcast_code(code, src, dst):
    if src.itemsize != dst.itemsize:
        raise TypeError(f"codegen: bitcast {src} -> {dst} changes the width")
    if src == F16:
        code, src = f"{RT}.f16_bits(np.float64({code}))", np.dtype(np.uint16)
    if dst == F16:
        bits = code if src == np.uint16 else f"{code}.view(np.uint16)"
        return f"{RT}.f16_to_f32({bits})"
    if src == np.bool_ or dst == np.bool_:
        return cast_code(code, src, dst)
    return f"{np_name(src)}({code}).view({np_name(dst)})"


def call_code(fn: str, args: list, dt: np.dtype) -> str:
    return _cast_result(f"{fn}({', '.join(args)})", dt)


def _cast_result(inner: str, dt: np.dtype) -> str:
    """A function's result (of its dtype's kind) brought to the carrier of ``dt``."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return f"bool({inner})"
    if dt == F16:
        return f"{RT}.f16r(np.float64({inner}))"
    return f"{np_name(dt)}({inner})"


# ------------------------------------ kernel source --------------------------------------

class KernelSource:
    """The generated module for one kernel: ``text`` (the full source), ``key`` (sha256 of
    the text: the cache key), the argument names; ``in_process``: it calls users' Numba
    functions, so it compiles in this process, without Numba's disk cache
    (numba_backend.user_functions)."""

    def __init__(self, text: str, key: str, arg_names: tuple):
        from numba_backend.user_functions import calls_user_functions
        self.text = text
        self.key = key
        self.arg_names = arg_names
        self.in_process = calls_user_functions(text)


_HELPER_HASH = None


def helper_hash() -> str:
    """A hash of the helper module's source: part of every kernel's text, so that a change
    to a helper gives new cache entries (Numba's cache does not track callees)."""
    global _HELPER_HASH
    if _HELPER_HASH is None:
        # The modules' files are read, not imported: ``blas`` (the drivers' matrix
        # products) imports Numba's linear algebra, 0.03 s of a warm program's start,
        # which only a driver needs. pairwise: the order of float sums (kernels compiled
        # before it existed, with reassociating fast math, must not be reused); the
        # special-function kernels: lowering/special.py calls them by name.
        src = ""
        for mod in ("numba_backend.scalar", "numba_backend.vecmath", "numba_backend.inliner",
                    "numba_backend.pairwise", "numba_backend.blas", "lax.special_kernels",
                    "lax.special_coeffs"):
            with open(importlib.util.find_spec(mod).origin) as f:
                src += f.read()
        # the float8/float4 tables of numba_backend.scalar come from ml_dtypes: its
        # __init__, which holds its version, as text (without importing ml_dtypes,
        # ``tracer.dtypes``, or importlib.metadata, 0.015 s of a warm program's start)
        with open(importlib.util.find_spec("ml_dtypes").origin) as f:
            src += f.read()
        # the BLAS the drivers' products call by name (numba_backend.blas)
        from numba_backend import numpy_blas
        src += numpy_blas.identity()
        _HELPER_HASH = hashlib.sha256(src.encode()).hexdigest()[:16]
    return _HELPER_HASH


_MODULE_HASHES: dict = {}


def module_hash(module: str) -> str:
    """A hash of the source of a module whose functions a kernel calls."""
    h = _MODULE_HASHES.get(module)
    if h is None:
        try:
            src = inspect.getsource(importlib.import_module(module))
        except (OSError, TypeError, ImportError):
            src = module
        h = _MODULE_HASHES[module] = hashlib.sha256(src.encode()).hexdigest()[:12]
    return h


def generate(kernel: Kernel, flags: str = "") -> KernelSource:
    """Python source for ``kernel`` (functions ``kernel`` and ``kernel_par``)."""
    gen = _KernelGen(kernel)
    body_serial = gen.function("kernel", parallel=False)
    body_par = gen.function("kernel_par", parallel=True) if kernel.parallel_dim is not None \
        else None
    imports = sorted(gen.imports)
    em = Emitter()
    name_imports = sorted(gen.name_imports)
    em.line("# Generated by tracer (numba_backend.codegen): one fused loop nest.")
    mods = " ".join(f"{m}:{module_hash(m)}" for m, _ in imports)
    em.line(f"# helpers {helper_hash()}{' ' + mods if mods else ''}"
            f"{' ' + flags if flags else ''}")
    em.line("import math")
    em.line("import numpy as np")
    em.line("from numba import prange")
    em.line(f"import numba_backend.scalar as {RT}")
    for mod, alias in imports:
        em.line(f"import {mod} as {alias}")
    for mod, name, alias in name_imports:
        em.line(f"from {mod} import {name} as {alias}")
    text = em.text() + "\n\n" + body_serial
    if body_par is not None:
        text += "\n\n" + body_par
    key = source_key(text)
    names = tuple(f"in{i}" for i in range(len(kernel.inputs))) + \
        tuple(f"out{i}" for i in range(len(kernel.outputs))) + ("ip", "fp")
    return KernelSource(text, key, names)


def source_key(text: str) -> str:
    """sha256 of the code without its comments (they name the equations, with shapes, and
    must not make a new shape compile a new kernel); the header's helper hash stays."""
    return hashlib.sha256(code_only(text).encode()).hexdigest()


def code_only(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("# helpers"):
            line = line.split("#", 1)[0].rstrip()
        if line:
            lines.append(line)
    return "\n".join(lines)


class _KernelGen:
    def __init__(self, k: Kernel):
        self.k = k
        self.imports: set = set()
        self.name_imports: set = set()
        order = k.loop_order()
        self.order = order
        self.outer = bool(k.reductions) and k.strategy == "outer"
        self.pos = {d: p for p, d in enumerate(order)}      # dim -> loop position
        self.n_kept = len(k.kept_dims)
        self.n_loops = k.ndim
        self.run = k.run_dims      # pairwise sums over these dims: _emit_run_nest
        # where NumPy's float16 loops round their float32 accumulators (an "inner" kernel
        # holds one run per output element, rounded when stored): after each element when
        # the innermost dim is kept, else after the innermost run of reduced dims
        rounding = self.outer and any(r.round_dtype is not None for r in k.reductions)
        plain_run = reduce_run(k.ndim, k.reduce_dims, k.unit_dims) if rounding else ()
        self.round_each = rounding and not plain_run
        self.round_after = self.pos[plain_run[0]] if plain_run and not self.run else None
        roots = [s.value for s in k.stores]
        for r in k.reductions:
            roots += list(r.init)
            roots += list(r.summands) if self.run and r.summands else list(r.combine)
        self.nodes = []
        seen = set()
        for r in roots:
            for n in walk(r):
                if n not in seen:
                    seen.add(n)
                    self.nodes.append(n)
        uses: dict = {}
        for n in self.nodes:
            for c in children(n):
                uses[c] = uses.get(c, 0) + 1
        for r in roots:
            uses[r] = uses.get(r, 0) + 1
        self.uses = uses
        # level: 0 = before all loops, L = inside loop at position L-1
        self.level: dict = {}
        for n in self.nodes:
            if isinstance(n, LoopIndex):
                lv = self.pos[n.dim] + 1
            elif isinstance(n, AccRef):
                lv = self.n_loops
            else:
                lv = max((self.level[c] for c in children(n)), default=0)
            self.level[n] = lv

    # -- naming --
    def _fn_alias(self, fnref) -> str:
        fnref = resolve(fnref)
        mod = fnref.module
        if mod in ("numpy", "np"):
            return f"np.{fnref.name}"
        if mod == "math":
            return f"math.{fnref.name}"
        if mod == "numba_backend.scalar":
            return f"{RT}.{fnref.name}"
        alias = "m_" + mod.replace(".", "_")
        self.imports.add((mod, alias))
        return f"{alias}.{fnref.name}"

    def function(self, fname: str, parallel: bool) -> str:
        k = self.k
        em = Emitter()
        args = [f"in{i}" for i in range(len(k.inputs))] + \
            [f"out{i}" for i in range(len(k.outputs))] + ["ip", "fp"]

        def build(fast):
            """The statements of each loop level, and whether a fast path was used."""
            names: dict = {}
            used = [False]
            rares: dict = {}     # loop level -> the fast path's counts of other arguments
            counter = [0]
            blocks: list = [[] for _ in range(self.n_loops + 1)]

            def expr(n) -> str:
                if n in names:
                    return names[n]
                return inline(n)

            def inline(n) -> str:
                if isinstance(n, Const):
                    return str(int(n.value)) if n.dtype == np.int64 \
                        else const_code(n.value, n.dtype)
                if isinstance(n, LoopIndex):
                    return f"i{n.dim}"
                if isinstance(n, IParam):
                    return f"n{n.slot}" if n.slot < k.ndim else f"p{n.slot}"
                if isinstance(n, FParam):
                    return f"f{n.slot}"
                if isinstance(n, AccRef):
                    return self._acc(n.slot)
                if isinstance(n, Load):
                    inp = k.inputs[n.arg]
                    idx = ", ".join(expr(i) for i in n.index) if n.index else "()"
                    code = f"in{n.arg}[{idx}]"
                    if inp.dtype == F16:
                        code = f"{RT}.f16_to_f32({code})"
                    elif np.dtype(inp.dtype) in dtypes._LOWP:
                        code = _lowp_load(code, np.dtype(inp.dtype))
                    return code
                if isinstance(n, Op):
                    return op_code(n.op, [expr(a) for a in n.args],
                                   [a.dtype for a in n.args], n.dtype)
                if isinstance(n, Call):
                    return call_code(self._fn_alias(n.fn), [expr(a) for a in n.args],
                                     n.dtype)
                raise TypeError(f"codegen: unknown node {n!r}")

            last_origin = [None] * (self.n_loops + 1)
            for n in self.nodes:
                if isinstance(n, (Const, LoopIndex, IParam, FParam, AccRef)):
                    continue
                # index arithmetic used once stays inline
                if self.uses.get(n, 0) <= 1 and n.dtype == np.int64 and isinstance(n, Op):
                    continue
                lv = self.level[n]
                name = f"t{counter[0]}"
                counter[0] += 1
                origin = getattr(n, "origin", "")
                if origin and origin != last_origin[lv]:
                    blocks[lv].append(f"# {origin}")
                    last_origin[lv] = origin
                ref = resolve(n.fn) if isinstance(n, Call) else None
                if ref is not None and inliner.is_inline(ref.module, ref.name):
                    # pasted in: a call LLVM would not inline keeps the loop scalar
                    fn = getattr(importlib.import_module(ref.module), ref.name)
                    blocks[lv].append(f"# {ref} (inlined)")
                    argv = [expr(a) for a in n.args]
                    fast_path = getattr(fn, "_tracer_fast_path", None) if fast else None
                    if fast_path is not None:
                        # the fast version, and a count of the arguments it does not cover
                        fn, rare = fast_path
                        blocks[lv].extend(inliner.expand(rare, argv, f"{name}_rare",
                                                         f"{name}_r_", self.name_imports))
                        rares.setdefault(lv, []).append(f"{name}_rare")
                        used[0] = True
                    blocks[lv].extend(inliner.expand(fn, argv, f"{name}_ret", f"{name}_l_",
                                                     self.name_imports))
                    code = _cast_result(f"{name}_ret", n.dtype)
                else:
                    code = inline(n)
                blocks[lv].append(f"{name} = {code}")
                names[n] = name
            # one update of the count per loop level (a prange reduction must be one)
            for lv, rs in rares.items():
                blocks[lv].append(f"rare_ += {' + '.join(rs)}")
            if parallel and (len(rares) > 1 or 0 in rares):
                return build(False)
            return blocks, expr, used[0]

        # Functions with a fast path for common arguments (vecmath.sin_f32: |x| < 2**17)
        # run it in a first pass that counts the other arguments; when there are any, a
        # second pass recomputes everything with the full versions (outputs are fresh
        # arrays, and a nest sets up its accumulators and pairwise scratch itself: running
        # twice is harmless): a sum of float32 cosines ran the full reduction for every
        # element, 7x NumPy's time. A parallel nest counts them as a prange reduction,
        # where its prange is its outermost loop and the counts are at one level inside
        # it (Numba refuses a reduction updated twice); the full versions keep the loop
        # scalar: elementwise's parallel variant (benchmarks/workloads.py) on one thread
        # took 40 ms against the serial variant's 19.
        fast_ok = not parallel or self._rare_reduction_ok()
        blocks, expr, used = build(fast_ok)
        if used:
            blocks_full, expr_full, _ = build(False)
        with em.block(f"def {fname}({', '.join(args)}):"):
            for d in range(k.ndim):
                em.line(f"n{d} = ip[{d}]")
            for s in range(k.ndim, k.n_iparams):
                label = k.param_labels[s] if s < len(k.param_labels) else ""
                em.line(f"p{s} = ip[{s}]" + (f"  # {label}" if label else ""))
            for j, dt in enumerate(k.fparam_dtypes):
                em.line(f"f{j} = {np_name(carrier(dt))}(fp[{j}])")
            if used:
                em.line("rare_ = 0")
            self._emit_nest(em, blocks, expr, parallel)
            if used:
                with em.block("if rare_ != 0:"):
                    self._emit_nest(em, blocks_full, expr_full, parallel)
            em.line("return 0")
        return em.text()

    def _acc(self, slot, depth=None) -> str:
        if self.outer:
            return f"acc{slot}[{self._kept_index(depth)}]"
        return f"acc{slot}"

    def _rare_reduction_ok(self) -> bool:
        """Whether the parallel nest is a prange over its outermost loop, emitted by
        ``_emit_loops`` (where a fast path's count can be a prange reduction)."""
        k = self.k
        return (not self.run and self.n_loops > 0 and self.order[0] == k.parallel_dim
                and not (k.reductions and self.n_kept == 0 and k.chunked))

    def _emit_nest(self, em, blocks, expr, parallel):
        k = self.k
        if self.run:
            self._emit_run_nest(em, blocks, expr, parallel)
            return
        for line in blocks[0]:
            em.line(line)
        if k.reductions and self.outer:
            self._emit_acc_arrays(em, expr)
            self._emit_loops(em, blocks, expr, 0, parallel)
            self._emit_kept_loops(em, 0, lambda: self._emit_acc_final(em, expr))
            return
        if k.reductions and self.n_kept == 0 and parallel and k.chunked:
            self._emit_chunked(em, blocks, expr)
            return
        if k.reductions and self.n_kept == 0:
            self._emit_acc_init(em, expr)
        self._emit_loops(em, blocks, expr, 0, parallel)
        if k.reductions and self.n_kept == 0:
            self._emit_acc_final(em, expr)

    def _emit_chunked(self, em, blocks, expr):
        """A reduction over everything, in parallel: a fixed number of chunks of the
        outermost loop (so the result does not depend on the thread count), each reduced
        on its own, then the partial accumulators merged in chunk order."""
        k = self.k
        d0 = self.order[0]
        dts = [dt for r in k.reductions for dt in r.acc_dtypes]
        em.line(f"nch = n{d0} if n{d0} < {CHUNKS} else {CHUNKS}")
        for j, dt in enumerate(dts):
            em.line(f"part{j} = np.empty(nch, {np_name(dt)})")
        with em.block("for c in prange(nch):"):
            # lo >= 0 and a count from 0, as in _emit_run_fill: LLVM then sees that the
            # indices are not negative, Numba's wraparound goes, and a 1-d chunk's loop
            # vectorizes (over range(lo, hi), the parallel variant of a 1-d max on one
            # thread took 7x the serial variant's time)
            em.line(f"lo = max((c * n{d0}) // nch, 0)")
            em.line(f"hi = ((c + 1) * n{d0}) // nch")
            self._emit_acc_init(em, expr)
            with em.block("for j_ in range(hi - lo):"):
                em.line(f"i{d0} = lo + j_")
                for line in blocks[1]:
                    em.line(line)
                self._emit_loops(em, blocks, expr, 1, False)
            for j in range(len(dts)):
                em.line(f"part{j}[c] = acc{j}")
        self._emit_acc_init(em, expr)
        with em.block("for c in range(nch):"):
            merged = [(f"acc{j}", m) for j, m in
                      enumerate(m for r in k.reductions for m in r.merge)]
            em.line(", ".join(n for n, _ in merged) + " = " +
                    ", ".join(cast_code(self._final_code(m), m.dtype, dt)
                              for (_, m), dt in zip(merged, dts)))
        self._emit_acc_final(em, expr)

    def _emit_acc_arrays(self, em, expr):
        """Accumulator arrays of the kept shape; the outputs are written at the end."""
        shape = ", ".join(f"n{d}" for d in self.k.kept_dims) + ","
        for r, names in zip(self.k.reductions, self._acc_names()):
            if r.origin:
                em.line(f"# {r.origin}")
            for name, init, dt in zip(names, r.init, r.acc_dtypes):
                em.line(f"{name} = np.full(({shape}), {cast_code(expr(init), init.dtype, dt)}, "
                        f"{np_name(dt)})")

    def _emit_kept_loops(self, em, j, body):
        kept = self.k.kept_dims
        if j == len(kept):
            body()
            return
        with em.block(f"for i{kept[j]} in range(n{kept[j]}):"):
            self._emit_kept_loops(em, j + 1, body)

    def _emit_loops(self, em, blocks, expr, p, parallel):
        k = self.k
        if p == self.n_loops:
            for s in k.stores:
                em.line(f"out{s.out}[{self._full_index()}] = {self._store_code(s.out, expr(s.value), s.value.dtype)}")
            if k.reductions:
                self._emit_combine(em, expr)
            return
        d = self.order[p]
        rng = "prange" if (parallel and p == 0 and d == k.parallel_dim) else "range"

        with em.block(f"for i{d} in {rng}(n{d}):"):
            for line in blocks[p + 1]:
                em.line(line)
            inner_reduce = k.reductions and not self.outer and p + 1 == self.n_kept
            if inner_reduce:
                self._emit_acc_init(em, expr)
            self._emit_loops(em, blocks, expr, p + 1, parallel)
            if inner_reduce:
                self._emit_acc_final(em, expr)
        if p == self.round_after:
            self._emit_rounding(em, self.k.reductions, depth=p)

    # ------------------------- float sums in NumPy's pairwise order -------------------------

    def _pairwise_slots(self):
        """(slot, accumulator dtype, summand) of each pairwise sum's accumulator."""
        out = []
        for r in self.k.reductions:
            if r.summands:
                for j, dt, e in zip(self._slots(r), r.acc_dtypes, r.summands):
                    out.append((j, np.dtype(dt), e))
        return out

    def _direct_loads(self):
        """When every summand is an input element whose trailing axes are the run's (from
        its first dim on), and nothing else happens per element, the pairwise sums read
        the inputs in place (a run is then a contiguous row): slot -> its Load; else None
        (the elements are computed into buffers)."""
        k = self.k
        if k.stores or any(not r.summands for r in k.reductions):
            return None
        tail = tuple(LoopIndex(d) for d in range(self.run[0], k.ndim))
        loads = {}
        for j, dt, e in self._pairwise_slots():
            if not (isinstance(e, Load) and e.index[len(e.index) - len(tail):] == tail and
                    k.inputs[e.arg].dtype == dt) or \
                    any(n in tail for i in e.index[:len(e.index) - len(tail)] for n in walk(i)):
                return None
            loads[j] = e
        return loads

    def _row(self, e, expr) -> str:
        """The input row a direct Load's run reads (a 1-d C-contiguous view)."""
        outer = e.index[:len(e.index) - (self.k.ndim - self.run[0])]
        src = f"in{e.arg}[{', '.join(expr(i) for i in outer)}]" if outer else f"in{e.arg}"
        # (not numba_backend.views.reshape_c: kernels also run as plain Python, in the
        # debug_kernels mode, where an intrinsic cannot)
        return src if len(e.index) - len(outer) == 1 else f"{src}.reshape(-1)"

    def _emit_run_nest(self, em, blocks, expr, parallel):
        """A kernel whose float sums are added up in NumPy's order (module
        ``numba_backend.pairwise``): dims of extent 1 are index 0; the loops outside the
        run, in order (scalar accumulators per output element when they are all kept, else
        accumulator arrays), and in each iteration the run's elements in the order of
        NumPy's pairwise recursion. Parallel: chunks of the outermost loop when it is kept,
        or, for a sum over everything, the recursion's subtrees at a fixed depth."""
        k = self.k
        self.imports.add(("numba_backend.pairwise", PW))
        slots = self._pairwise_slots()
        self.run_c = 1 if slots[0][1].kind == "c" else 0
        self.direct = self._direct_loads()
        # a run that fits one buffer (as most of a small program's do) is filled and summed
        # without the walk down NumPy's recursion: the same sums, and about half the
        # kernel's compile (the walk's loops and stacks: 0.27 -> 0.16 s for a 1-d sum)
        self.small = 0 < k.run_elements <= pairwise.BLOCK
        for line in blocks[0]:
            em.line(line)
        for d in self.order:
            if d in k.unit_dims:
                em.line(f"i{d} = 0")
                for line in blocks[self.pos[d] + 1]:
                    em.line(line)
        rest = [d for d in self.order if d not in k.unit_dims and d not in self.run]
        em.line("rn = " + " * ".join(f"n{d}" for d in self.run) + "  # elements per run")
        if self.outer:
            self._emit_acc_arrays(em, expr)
        if parallel and not rest:
            self._emit_run_frontier(em, blocks, expr)
            return
        if not (parallel and rest):
            self._emit_run_scratch(em)
        self._emit_run_loops(em, blocks, expr, rest, 0, parallel)
        if self.outer:
            self._emit_kept_loops(em, 0, lambda: self._emit_acc_final(em, expr))

    def _emit_run_scratch(self, em):
        """The walk's stacks and the element buffers (one set per thread)."""
        if self.direct is not None:
            return
        if self.small:
            for j, dt, _ in self._pairwise_slots():
                em.line(f"wbuf{j} = np.empty({pairwise.BLOCK}, {np_name(dt)})")
            return
        em.line(f"wtlo = np.empty({pairwise.STACK}, np.int64)")
        em.line(f"wtsz = np.empty({pairwise.STACK}, np.int64)")
        for j, dt, _ in self._pairwise_slots():
            em.line(f"wst{j} = np.empty({pairwise.STACK}, {np_name(dt)})")
            em.line(f"wbuf{j} = np.empty({pairwise.BLOCK}, {np_name(dt)})")

    def _emit_run_loops(self, em, blocks, expr, rest, j, parallel):
        if j == len(rest):
            if not self.outer:
                self._emit_acc_init(em, expr)
            self._emit_run(em, blocks, expr, "0", "rn")
            self._emit_run_merge(em, "rs{}")
            if not self.outer:
                self._emit_acc_final(em, expr)
            return
        d = rest[j]
        p = self.pos[d]
        if parallel and j == 0:
            # chunks of the outermost (kept) loop: each writes its own output elements
            em.line(f"nch = n{d} if n{d} < {CHUNKS} else {CHUNKS}")
            with em.block("for c in prange(nch):"):
                self._emit_run_scratch(em)
                with em.block(f"for i{d} in range((c * n{d}) // nch, ((c + 1) * n{d}) // nch):"):
                    for line in blocks[p + 1]:
                        em.line(line)
                    self._emit_run_loops(em, blocks, expr, rest, j + 1, False)
            return
        with em.block(f"for i{d} in range(n{d}):"):
            for line in blocks[p + 1]:
                em.line(line)
            self._emit_run_loops(em, blocks, expr, rest, j + 1, parallel)

    def _emit_run(self, em, blocks, expr, lo, n):
        """``rs<slot>``: the pairwise sums of the run's elements [lo, lo + n)."""
        c = self.run_c
        slots = self._pairwise_slots()
        if self.direct is not None:
            for j, dt, e in slots:
                em.line(f"rs{j} = {PW}.pairwise({self._row(e, expr)}, {lo}, {n})")
            return
        if self.small:
            em.line(f"# the run fits one buffer (at most {pairwise.BLOCK} elements)")
            em.line(f"wlo = {lo}")
            em.line(f"wn = {n}")
            self._emit_run_fill(em, blocks, expr)
            for j, _, _ in slots:
                em.line(f"rs{j} = {PW}.pairwise_cached(wbuf{j}, 0, wn)")
            return
        # the walk is written out (helper calls would cost compile time, not run time)
        em.line("# the top of NumPy's recursion (numba_backend.pairwise), down to nodes of at")
        em.line(f"# most {pairwise.BLOCK} elements, each buffered; right halves wait on a stack")
        em.line("wsp = 0")
        em.line(f"wlo = {lo}")
        em.line(f"wn = {n}")
        with em.block("while True:"):
            with em.block(f"while wn > {pairwise.BLOCK}:"):
                if c:   # pairwise.split
                    em.line("wh = (wn - wn % 8) // 2")
                else:
                    em.line("wh = wn // 2")
                    em.line("wh -= wh % 8")
                em.line("wtlo[wsp] = wlo + wh")
                em.line("wtsz[wsp] = wn - wh")
                em.line("wsp += 1")
                em.line("wn = wh")
            self._emit_run_fill(em, blocks, expr)
            for j, _, _ in slots:
                em.line(f"rs{j} = {PW}.pairwise_cached(wbuf{j}, 0, wn)")
            em.line("# add the finished left halves (size -1), innermost first")
            with em.block("while wsp > 0 and wtsz[wsp - 1] < 0:"):
                em.line("wsp -= 1")
                for j, _, _ in slots:
                    em.line(f"rs{j} = wst{j}[wsp] + rs{j}")
            with em.block("if wsp == 0:"):
                em.line("break")
            em.line("# the right half on top next; this sum waits for it")
            for j, _, _ in slots:
                em.line(f"wst{j}[wsp - 1] = rs{j}")
            em.line("wlo = wtlo[wsp - 1]")
            em.line("wn = wtsz[wsp - 1]")
            em.line("wtsz[wsp - 1] = -1")

    def _emit_run_fill(self, em, blocks, expr):
        """The run's elements [wlo, wlo + wn) into the buffers, with the kernel's stores
        and its other reductions; a run over several dims goes row segment by row segment
        (the inner loop stays vectorizable)."""
        k = self.k
        run = self.run
        g = run[-1]
        others = any(not r.summands for r in k.reductions)

        def body(at):
            for line in blocks[self.pos[g] + 1]:
                em.line(line)
            for s in k.stores:
                em.line(f"out{s.out}[{self._full_index()}] = "
                        f"{self._store_code(s.out, expr(s.value), s.value.dtype)}")
            for j, dt, e in self._pairwise_slots():
                em.line(f"wbuf{j}[{at}] = {cast_code(expr(e), e.dtype, dt)}")
            if others:
                self._emit_combine(em, expr, skip_pairwise=True)

        # max(.., 0) (a no-op) shows LLVM the indices are not negative: Numba then drops
        # its wraparound of negative indices and the inner loop vectorizes
        if len(run) == 1:
            em.line("wlo = max(wlo, 0)")
            with em.block("for wj in range(wn):"):
                em.line(f"i{g} = wlo + wj")
                body("wj")
            return
        em.line("wr = wlo")
        em.line(f"ws0 = max(wr % n{g}, 0)")
        em.line(f"wr //= n{g}")
        for d in reversed(run[1:-1]):
            em.line(f"i{d} = wr % n{d}")
            em.line(f"wr //= n{d}")
        em.line(f"i{run[0]} = wr")
        em.line("wat = 0")
        with em.block("while wat < wn:"):
            for d in run[:-1]:
                for line in blocks[self.pos[d] + 1]:
                    em.line(line)
            em.line(f"wseg = n{g} - ws0")
            with em.block("if wseg > wn - wat:"):
                em.line("wseg = wn - wat")
            em.line("wat = max(wat, 0)")
            with em.block("for wj in range(wseg):"):
                em.line(f"i{g} = ws0 + wj")
                body("wat + wj")
            em.line("wat += wseg")
            em.line("ws0 = 0")
            self._emit_carry(em, run[:-1])

    def _emit_carry(self, em, dims):
        d = dims[-1]
        em.line(f"i{d} += 1")
        if len(dims) > 1:
            with em.block(f"if i{d} == n{d}:"):
                em.line(f"i{d} = 0")
                self._emit_carry(em, dims[:-1])

    def _emit_run_merge(self, em, part):
        """Each pairwise sum's accumulator takes the run's sum (``part`` names it); then
        float16 accumulators round, as after each of NumPy's inner loops."""
        for r in self.k.reductions:
            if r.summands:
                for j, m, dt in zip(self._slots(r), r.merge, r.acc_dtypes):
                    em.line(f"{self._acc(j)} = "
                            f"{cast_code(self._final_code(m, part), m.dtype, dt)}")
        self._emit_rounding(em, self.k.reductions)

    def _emit_run_frontier(self, em, blocks, expr):
        """A sum over everything, in parallel: the subtrees of the recursion at depth
        ``pairwise.TOP_DEPTH``, each walked on its own, their sums combined as the
        recursion combines them (the serial result, for any thread count); the other
        reductions merge their chunks' partial results in order."""
        k = self.k
        c = self.run_c
        slots = self._pairwise_slots()
        others = [(j, m, dt) for r in k.reductions if not r.summands
                  for j, m, dt in zip(self._slots(r), r.merge, r.acc_dtypes)]
        self.small = False     # (the chunks' sizes are the recursion's, not the run's)
        em.line(f"wfl = np.empty({2 ** pairwise.TOP_DEPTH}, np.int64)")
        em.line(f"wfs = np.empty({2 ** pairwise.TOP_DEPTH}, np.int64)")
        em.line(f"nch = {PW}.frontier(rn, {c}, wfl, wfs)")
        for j, dt, _ in slots:
            em.line(f"wpart{j} = np.empty(nch, {np_name(dt)})")
        for j, _, dt in others:
            em.line(f"part{j} = np.empty(nch, {np_name(dt)})")
        with em.block("for c in prange(nch):"):
            self._emit_run_scratch(em)
            self._emit_acc_init(em, expr, skip_pairwise=True)
            self._emit_run(em, blocks, expr, "wfl[c]", "wfs[c]")
            for j, _, _ in slots:
                em.line(f"wpart{j}[c] = rs{j}")
            for j, _, _ in others:
                em.line(f"part{j}[c] = acc{j}")
        self._emit_acc_init(em, expr)
        if others:
            with em.block("for c in range(nch):"):
                em.line(", ".join(f"acc{j}" for j, _, _ in others) + " = " +
                        ", ".join(cast_code(self._final_code(m), m.dtype, dt)
                                  for _, m, dt in others))
        for j, dt, _ in slots:
            em.line(f"wtop{j} = np.empty({pairwise.STACK}, {np_name(dt)})")
            em.line(f"rtop{j} = {PW}.combine_top(wpart{j}, rn, {c}, wtop{j})")
        self._emit_run_merge(em, "rtop{}")
        self._emit_acc_final(em, expr)

    def _full_index(self):
        if self.k.ndim == 0:
            return "()"
        return ", ".join(f"i{d}" for d in range(self.k.ndim))

    def _kept_index(self, depth=None):
        """The output index; with ``depth``, after the loops from that position on (their
        dims are then of extent 1: index 0)."""
        kept = self.k.kept_dims
        if not kept:
            return "()"
        return ", ".join("0" if depth is not None and self.pos[d] >= depth else f"i{d}"
                         for d in kept)

    def _store_code(self, out, code, src_dt):
        odt = np.dtype(self.k.outputs[out].dtype)
        code = cast_code(code, src_dt, odt) if np.dtype(src_dt) != odt else code
        if odt == F16:
            return f"{RT}.f16_bits(np.float64({code}))"
        if odt in dtypes._LOWP:
            return _lowp_store(code, odt)
        return code

    def _acc_names(self):
        names = []
        j = 0
        for r in self.k.reductions:
            names.append([f"acc{j + i}" for i in range(len(r.init))])
            j += len(r.init)
        return names

    def _emit_acc_init(self, em, expr, skip_pairwise=False):
        for r, names in zip(self.k.reductions, self._acc_names()):
            if skip_pairwise and r.summands:
                continue
            if r.origin:
                em.line(f"# {r.origin}")
            for name, init, dt in zip(names, r.init, r.acc_dtypes):
                em.line(f"{name} = {cast_code(expr(init), init.dtype, dt)}")

    def _emit_combine(self, em, expr, skip_pairwise=False):
        # new values first, then assign (the combine reads all old accumulators)
        tmp = []
        j = 0
        rs = []
        for r in self.k.reductions:
            if skip_pairwise and r.summands:
                j += len(r.combine)
                continue
            rs.append(r)
            for c, dt in zip(r.combine, r.acc_dtypes):
                tmp.append((self._acc(j), cast_code(expr(c), c.dtype, dt)))
                j += 1
        if len(tmp) <= 1 or all(len(r.combine) == 1 for r in rs):
            for name, code in tmp:
                em.line(f"{name} = {code}")
        else:
            em.line(", ".join(n for n, _ in tmp) + " = " + ", ".join(c for _, c in tmp))
        if self.round_each:
            self._emit_rounding(em, rs)

    def _slots(self, r):
        """The accumulator slots of reduction ``r``."""
        j = 0
        for q in self.k.reductions:
            if q is r:
                return range(j, j + len(q.init))
            j += len(q.init)
        raise AssertionError("codegen: reduction not in the kernel")

    def _emit_rounding(self, em, reductions, depth=None):
        """Round float16 accumulators (carried in float32) as NumPy's float16 loop does."""
        for r in reductions:
            if r.round_dtype is None:
                continue
            for j, dt in zip(self._slots(r), r.acc_dtypes):
                acc = self._acc(j, depth)
                em.line(f"{acc} = {cast_code(cast_code(acc, dt, r.round_dtype), r.round_dtype, dt)}")

    def _emit_acc_final(self, em, expr):
        for r in self.k.reductions:
            for out, fin in zip(r.outs, r.finals):
                em.line(f"out{out}[{self._kept_index()}] = "
                        f"{self._store_code(out, self._final_code(fin), fin.dtype)}")

    def _final_code(self, n, part="part{}[c]") -> str:
        """Code of an expression of the accumulators, after the reduction loops (small:
        written inline, no temporaries); ``part``: the code of a ``PartRef``."""
        if isinstance(n, AccRef):
            return self._acc(n.slot)
        if isinstance(n, PartRef):
            return part.format(n.slot)
        if isinstance(n, Const):
            return str(int(n.value)) if n.dtype == np.int64 else const_code(n.value, n.dtype)
        if isinstance(n, IParam):
            return f"n{n.slot}" if n.slot < self.k.ndim else f"p{n.slot}"
        if isinstance(n, FParam):
            return f"f{n.slot}"
        if isinstance(n, Op):
            return op_code(n.op, [self._final_code(a, part) for a in n.args],
                           [a.dtype for a in n.args], n.dtype)
        if isinstance(n, Call):
            ref = resolve(n.fn)
            if inliner.is_inline(ref.module, ref.name):
                raise TypeError("codegen: an inline_source function in a reduction's final "
                                "expression; use a register_jitable helper")
            return call_code(self._fn_alias(n.fn), [self._final_code(a, part) for a in n.args],
                             n.dtype)
        raise TypeError(f"codegen: {type(n).__name__} in a reduction's final expression")

