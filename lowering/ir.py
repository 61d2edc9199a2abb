"""The loop IR: what a jitted program becomes between the jaxpr and the generated source.

A ``Program`` is a list of steps over named buffers (NumPy arrays at run time):

- ``KernelStep``: one fused loop nest (a ``Kernel``) with the runtime integers and floats
  it needs (extents, slice starts, literals that depend on shapes);
- ``LibraryCall``: a whole-array operation named by a ``kind`` ("dot_general", "sort",
  "scatter", "conv_general_dilated", "reshape_view", "scan"/"while"/"cond", ...) with its
  static params and avals; the backend implements each kind (``lowering.rules``);
- ``HostStep``: a primitive without a lowering yet, run through its NumPy impl.

A ``Kernel`` is shape-generic: its iteration space has ``ndim`` dims whose extents are the
runtime integers ``iparams[0:ndim]``; every other shape-dependent integer is an ``IParam``
too, and literals that may depend on shapes (``x / 128.0`` in a mean) are ``FParam``s. Its
outputs are element-wise ``Store``s over the whole iteration space and ``Reduction``s over
``reduce_dims``. Values are scalar expression DAGs (``Expr``) of frozen, hash-consed nodes:

- ``Const(value, dtype)``, ``IParam(slot)``, ``FParam(slot, dtype)``, ``LoopIndex(dim)``,
- ``Load(arg, index, dtype)``: kernel input ``arg`` at a tuple of int64 index expressions,
- ``Op(op, args, dtype)``: one of ``SCALAR_OPS`` (dtype semantics: the eager impls'; the
  backend's code generator lists them),
- ``Call(fn, args, dtype)``: a scalar function named by a ``FnRef`` (``np.sin``, a
  backend helper such as ``scalar.sign_f``), its result cast to ``dtype``,
- ``AccRef(slot, dtype)``: the running accumulator inside a reduction's combine.

Every node carries ``origin`` (the jaxpr equation it comes from, for comments in the
generated source); ``origin`` is not part of equality, so CSE merges equal nodes.
Index expressions are int64 ``Expr``s; ``+ - * // %`` on them build ``Op`` nodes.

Everything here is data: no step holds a Python callable, and nothing in ``lowering``
imports a backend. A backend turns a Program into running code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tracer.dtypes import dtype_key

INDEX = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)

# The scalar op vocabulary of the IR (tinygrad-style property sets).
BINARY_ARITH = frozenset({"add", "sub", "mul", "div", "rem", "pow", "max", "min",
                          "and", "or", "xor", "shl", "shr_a", "shr_l"})
COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
UNARY = frozenset({"neg", "not", "abs"})
INDEX_OPS = frozenset({"floordiv", "mod"})   # int64, non-negative operands only
OTHER = frozenset({"select", "cast", "bitcast"})
SCALAR_OPS = BINARY_ARITH | COMPARE | UNARY | INDEX_OPS | OTHER


# ------------------------------------ expressions ----------------------------------------

class Expr:
    """Base of scalar expression nodes. Subclasses are frozen dataclasses with a cached
    hash (trees are shared, so hashing must not walk them each time)."""

    __slots__ = ()
    dtype: np.dtype

    def _key(self):
        raise NotImplementedError

    def __hash__(self):
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((type(self).__name__,) + self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, other):
        if self is other:
            return True
        return type(self) is type(other) and hash(self) == hash(other) and \
            self._key() == other._key()

    # index arithmetic (int64 only): i * 2 + s
    def _idx(self, op, other, swap=False):
        other = other if isinstance(other, Expr) else Const(int(other), INDEX)
        a, b = (other, self) if swap else (self, other)
        return index_op(op, a, b)

    def __add__(self, o):
        return self._idx("add", o)

    def __radd__(self, o):
        return self._idx("add", o, True)

    def __sub__(self, o):
        return self._idx("sub", o)

    def __rsub__(self, o):
        return self._idx("sub", o, True)

    def __mul__(self, o):
        return self._idx("mul", o)

    def __rmul__(self, o):
        return self._idx("mul", o, True)

    def __floordiv__(self, o):
        return self._idx("floordiv", o)

    def __mod__(self, o):
        return self._idx("mod", o)


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: Any           # a Python bool/int/float/complex (exact for the dtype)
    dtype: np.dtype
    origin: str = field(default="", compare=False)

    def _key(self):
        v = self.value
        # -0.0 and 0.0, nan: compare by repr so distinct constants stay distinct
        return (repr(v), type(v).__name__, dtype_key(self.dtype))


@dataclass(frozen=True, eq=False)
class IParam(Expr):
    slot: int
    label: str = field(default="", compare=False)
    dtype: np.dtype = INDEX

    def _key(self):
        return (self.slot,)


@dataclass(frozen=True, eq=False)
class FParam(Expr):
    slot: int
    dtype: np.dtype
    origin: str = field(default="", compare=False)

    def _key(self):
        return (self.slot, dtype_key(self.dtype))


@dataclass(frozen=True, eq=False)
class LoopIndex(Expr):
    dim: int
    dtype: np.dtype = INDEX

    def _key(self):
        return (self.dim,)


@dataclass(frozen=True, eq=False)
class Load(Expr):
    arg: int                      # kernel input number
    index: tuple                  # int64 Exprs, one per dim of the input
    dtype: np.dtype
    origin: str = field(default="", compare=False)

    def _key(self):
        return (self.arg, self.index, dtype_key(self.dtype))


@dataclass(frozen=True, eq=False)
class Op(Expr):
    op: str
    args: tuple
    dtype: np.dtype
    origin: str = field(default="", compare=False)

    def _key(self):
        return (self.op, self.args, dtype_key(self.dtype))


@dataclass(frozen=True)
class FnRef:
    """A scalar function callable from generated code, by name: ``module.name``.
    ``module`` is ``numpy``/``math`` (``np.sin``, ``math.erf``), one of the backend's
    helper modules named neutrally (``scalar.sign_f``, ``vecmath.exp_f32``: the backend
    maps ``scalar``/``vecmath`` to its own modules), or an importable module whose
    functions the backend can call (``lax.special_kernels.lgamma_f64``)."""
    module: str
    name: str

    @staticmethod
    def of(fn: Callable | str) -> "FnRef":
        if isinstance(fn, FnRef):
            return fn
        if isinstance(fn, str):
            mod, _, name = fn.rpartition(".")
            return FnRef({"np": "numpy"}.get(mod, mod), name)
        py = getattr(fn, "py_func", fn)   # register_jitable keeps the Python function
        return FnRef(py.__module__, py.__qualname__)

    def __str__(self):
        mod = {"numpy": "np"}.get(self.module, self.module)
        return f"{mod}.{self.name}"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    fn: FnRef
    args: tuple
    dtype: np.dtype
    origin: str = field(default="", compare=False)

    def _key(self):
        return (self.fn, self.args, dtype_key(self.dtype))


@dataclass(frozen=True, eq=False)
class AccRef(Expr):
    slot: int
    dtype: np.dtype

    def _key(self):
        return (self.slot, dtype_key(self.dtype))


@dataclass(frozen=True, eq=False)
class PartRef(Expr):
    """A partial accumulator of another chunk, in a reduction's ``merge``."""
    slot: int
    dtype: np.dtype

    def _key(self):
        return (self.slot, dtype_key(self.dtype))


def index_op(op: str, a: Expr, b: Expr) -> Expr:
    """An int64 index op with the trivial identities folded (i + 0, i * 1, ...)."""
    if isinstance(a, Const) and isinstance(b, Const):
        x, y = int(a.value), int(b.value)
        val = {"add": x + y, "sub": x - y, "mul": x * y,
               "floordiv": x // y if y else 0, "mod": x % y if y else 0,
               "max": max(x, y), "min": min(x, y)}[op]
        return Const(val, INDEX)
    if op in ("add", "sub") and isinstance(b, Const) and b.value == 0:
        return a
    if op == "add" and isinstance(a, Const) and a.value == 0:
        return b
    if op == "mul":
        if isinstance(b, Const) and b.value == 1:
            return a
        if isinstance(a, Const) and a.value == 1:
            return b
        if (isinstance(b, Const) and b.value == 0) or (isinstance(a, Const) and a.value == 0):
            return Const(0, INDEX)
    if op == "floordiv" and isinstance(b, Const) and b.value == 1:
        return a
    if op == "mod" and isinstance(b, Const) and b.value == 1:
        return Const(0, INDEX)
    return Op(op, (a, b), INDEX)


def walk(expr: Expr):
    """All nodes of an expression DAG, each once, children before parents."""
    seen = set()
    order = []
    stack = [(expr, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for c in reversed(children(node)):
            if c not in seen:
                stack.append((c, False))
    return order


def map_expr(expr: Expr, fn, memo=None) -> Expr:
    """Rebuild ``expr`` bottom-up: each node's children are mapped first, then ``fn(node)``
    (with the new children) returns the replacement node."""
    memo = {} if memo is None else memo
    hit = memo.get(expr)
    if hit is not None:
        return hit
    if isinstance(expr, Load):
        node = Load(expr.arg, tuple(map_expr(i, fn, memo) for i in expr.index), expr.dtype,
                    expr.origin)
    elif isinstance(expr, Op):
        node = Op(expr.op, tuple(map_expr(a, fn, memo) for a in expr.args), expr.dtype,
                  expr.origin)
    elif isinstance(expr, Call):
        node = Call(expr.fn, tuple(map_expr(a, fn, memo) for a in expr.args), expr.dtype,
                    expr.origin)
    else:
        node = expr
    out = fn(node)
    memo[expr] = out
    return out


def children(node: Expr) -> tuple:
    if isinstance(node, Load):
        return node.index
    if isinstance(node, (Op, Call)):
        return node.args
    return ()


# -------------------------------------- kernels ------------------------------------------

@dataclass(frozen=True)
class KernelArg:
    """An array argument of a kernel: its dtype and rank (shapes are runtime)."""
    dtype: np.dtype
    ndim: int


@dataclass(frozen=True)
class Store:
    """``outputs[out][i_0, ..., i_{n-1}] = value`` over the whole iteration space."""
    out: int
    value: Expr


@dataclass(frozen=True)
class Reduction:
    """Reduce over the kernel's ``reduce_dims``. Accumulators ``acc[k]`` (dtypes
    ``acc_dtypes``) start at ``init[k]``; each iteration sets ``acc[k] = combine[k]``
    (expressions of ``AccRef(k)`` and the loop's values, evaluated all at once); at the end
    ``outputs[outs[j]][kept index] = finals[j]`` (an expression of the ``AccRef``s, often
    just one of them) cast to the output dtype. ``merge`` (optional): the accumulators
    combined with partial ones (``PartRef``): another chunk's, when a reduction over
    everything runs in parallel chunks (a fixed number of them: deterministic), or a
    run's pairwise sum.

    ``summands`` (float and complex sums): the element's value to be added, one per
    accumulator. Such a sum is added up in NumPy's order (by the backend's code generator):
    along the innermost run of reduced dims by NumPy's pairwise summation, each run's sum
    then ``merge``d into the accumulator, else one element at a time with ``combine``.
    ``round_dtype`` (float16 sums and products): the accumulators are rounded to it where
    NumPy's float16 loops round theirs -- after each run, or each element when the
    innermost dim is kept."""
    outs: tuple
    init: tuple
    combine: tuple
    acc_dtypes: tuple
    finals: tuple
    origin: str = field(default="", compare=False)
    merge: tuple = ()
    summands: tuple = ()
    round_dtype: Any = None


@dataclass(frozen=True)
class Kernel:
    """One fused loop nest, shape-generic (see the module docstring).

    ``inputs``/``outputs``: array arguments. ``ndim``: the rank of the iteration space,
    whose extents are ``IParam(0..ndim-1)``. ``reduce_dims``: iteration dims summed away by
    the ``reductions`` (empty for element-wise kernels); reduction outputs have the kept
    dims, in order. ``n_iparams``/``fparam_dtypes``: the runtime scalars the kernel reads.
    ``parallel_dim``: the loop ``prange`` may split (None: always serial). ``unit_dims``:
    dims of extent 1 (known when lowering): NumPy's iterator drops them, so they decide
    which reduced dims form one contiguous run (``run_dims``). ``run_elements``: the
    elements of one such run when lowering (0: no pairwise sum); a backend may emit
    simpler code where it is small (kernels of longer runs then differ in it).
    """
    inputs: tuple
    outputs: tuple
    ndim: int
    reduce_dims: tuple
    stores: tuple
    reductions: tuple
    n_iparams: int
    fparam_dtypes: tuple
    parallel_dim: int | None = None
    param_labels: tuple = ()
    chunked: bool = False      # a full reduction whose parallel variant runs in chunks
    unit_dims: tuple = ()
    run_elements: int = 0

    @property
    def kept_dims(self):
        return tuple(d for d in range(self.ndim) if d not in self.reduce_dims)

    @property
    def run_dims(self) -> tuple:
        """The dims whose elements a pairwise sum adds up as one run (see ``reduce_run``);
        () when the kernel has no pairwise sum or its innermost dim is kept."""
        if not any(r.summands for r in self.reductions):
            return ()
        return reduce_run(self.ndim, self.reduce_dims, self.unit_dims)

    @property
    def strategy(self) -> str:
        """How reductions loop: "inner" when the reduced dims are the trailing ones (kept
        dims outer, scalar accumulators, one per output element), else "outer" (the
        operand's own loop order, accumulator arrays of the kept shape updated in the
        innermost loop: contiguous reads, and a vectorizable loop without reassociation).
        With a pairwise run, "inner" when every other reduced dim has extent 1."""
        rd = tuple(self.reduce_dims)
        run = self.run_dims
        if run:
            return "inner" if all(d in run or d in self.unit_dims for d in rd) else "outer"
        if not rd or rd == tuple(range(self.ndim - len(rd), self.ndim)):
            return "inner"
        return "outer"

    def loop_order(self):
        """With a pairwise run: unit dims, the other dims in order, the run's dims. Else
        inner strategy: kept dims outer, reduced dims inner; outer: natural order."""
        run = self.run_dims
        if run:
            units = tuple(d for d in range(self.ndim) if d in self.unit_dims)
            rest = tuple(d for d in range(self.ndim) if d not in units and d not in run)
            return units + rest + run
        if self.strategy == "outer":
            return tuple(range(self.ndim))
        return self.kept_dims + tuple(self.reduce_dims)


def reduce_run(ndim: int, reduce_dims, unit_dims) -> tuple:
    """NumPy's inner loop for a reduction of a C-contiguous operand: its iterator drops
    the dims of extent 1 and coalesces adjacent dims that are all reduced or all kept, so
    when the innermost remaining dim is reduced, each inner loop call adds up the
    trailing run of reduced dims (pairwise, for float sums); this returns those dims (in
    order), or () when the innermost remaining dim is kept (then each output element
    accumulates one element at a time, in C order)."""
    dims = [d for d in range(ndim) if d not in unit_dims]
    run: list = []
    for d in reversed(dims):
        if d not in reduce_dims:
            break
        run.insert(0, d)
    return tuple(run)


# --------------------------------------- steps -------------------------------------------

@dataclass(frozen=True)
class KernelStep:
    kernel: Kernel
    ins: tuple          # buffer names
    outs: tuple
    iparams: tuple      # runtime ints (extents first)
    fparams: tuple      # runtime floats
    text: str = ""      # the jaxpr equations it computes (for as_text)
    flat: bool = False  # arrays are passed raveled (lowering.schedule.flatten)


@dataclass(frozen=True)
class LibraryCall:
    """A whole-array operation the backend implements: ``kind`` names it, ``params`` are
    its static parameters (sorted (name, value) pairs), ``in_avals``/``out_avals`` the
    avals of ``ins``/``outs`` (buffer names). The backend maps ``kind`` to code that
    computes ``outs`` from the arrays of ``ins`` (results are cast to ``out_avals``).

    Kinds made by the rules of this package (params in each rule's module): "reshape_view"
    (``shape``), "dot_general", "conv_general_dilated", "sort", "top_k", "scatter",
    "reduce_window", "select_and_scatter_add", "select_and_gather_add", "cumulative",
    "threefry2x32", "rng_bit_generator", and "scan"/"while"/"cond" (``spec``, a
    ``ControlFlowSpec``). ``name`` is what ``as_text`` shows."""
    name: str
    kind: str
    ins: tuple
    outs: tuple
    params: tuple = ()
    in_avals: tuple = ()
    out_avals: tuple = ()
    text: str = ""


class ControlFlowSpec:
    """The static data of a control-flow library call: ``kind`` ("scan", "while", "cond"),
    the lowered sub-programs (scan: the body; while: cond, body; cond: the branches),
    the primitive's params (without its jaxprs) and the operand/result avals. Compared
    by identity (a backend may cache what it builds for a spec)."""

    def __init__(self, kind, programs, params, in_avals, out_avals):
        self.kind = kind
        self.programs = tuple(programs)
        self.params = dict(params)
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(out_avals)

    def describe(self) -> str:
        p = self.params
        if self.kind == "scan":
            return (f"scan[length={p['length']} num_consts={p['num_consts']} "
                    f"num_carry={p['num_carry']} reverse={p['reverse']}]")
        if self.kind == "while":
            return f"while[cond_nconsts={p['cond_nconsts']} body_nconsts={p['body_nconsts']}]"
        return f"cond[{len(self.programs)} branches]"


@dataclass(frozen=True)
class HostStep:
    """A primitive without a lowering: its NumPy impl runs on whole arrays."""
    primitive: Any
    params: tuple       # sorted (name, value) pairs
    ins: tuple          # buffer names or ('lit', value) for literals
    outs: tuple
    text: str = ""


@dataclass
class Program:
    """A lowered jaxpr: ``buffers`` maps names to avals; ``invars`` are the argument
    buffers, ``consts`` (name, value) pairs are bound at build time; ``outvars`` are
    buffer names or ('lit', numpy value) pairs; ``steps`` run in order."""
    invars: tuple
    consts: tuple
    outvars: tuple
    out_avals: tuple
    buffers: dict
    steps: list
    jaxpr: Any = None             # the optimized jaxpr (for text and the NumPy tier)
    # buffer name -> the variable of ``jaxpr`` it holds (buffers a structured rule makes
    # for its own use hold none): a backend can compute any step's outputs from its
    # inputs by the slice of ``jaxpr`` between them (its NumPy tier, step by step)
    buffer_vars: dict = field(default_factory=dict)

    def kernels(self):
        return [s.kernel for s in self.steps if isinstance(s, KernelStep)]

    def pretty(self) -> str:
        return pp_program(self)


# -------------------------------------- printing -----------------------------------------

def pp_expr(e: Expr, names=None) -> str:
    names = {} if names is None else names
    if e in names:
        return names[e]
    if isinstance(e, Const):
        return f"{e.value!r}:{e.dtype.name}"
    if isinstance(e, IParam):
        return f"p{e.slot}"
    if isinstance(e, FParam):
        return f"f{e.slot}:{e.dtype.name}"
    if isinstance(e, LoopIndex):
        return f"i{e.dim}"
    if isinstance(e, AccRef):
        return f"acc{e.slot}"
    if isinstance(e, Load):
        return f"in{e.arg}[{', '.join(pp_expr(i, names) for i in e.index)}]"
    if isinstance(e, Op):
        return f"{e.op}:{e.dtype.name}({', '.join(pp_expr(a, names) for a in e.args)})"
    if isinstance(e, Call):
        return f"{e.fn}:{e.dtype.name}({', '.join(pp_expr(a, names) for a in e.args)})"
    return repr(e)


def pp_kernel(k: Kernel, indent: str = "  ") -> str:
    """A compact listing: every shared node once, as ``t<n> = ...``."""
    roots = [s.value for s in k.stores]
    for r in k.reductions:
        roots += list(r.init) + list(r.combine)
    counts: dict = {}
    for root in roots:
        for node in walk(root):
            for c in children(node):
                counts[c] = counts.get(c, 0) + 1
    names: dict = {}
    lines = []
    seen = set()
    for root in roots:
        for node in walk(root):
            if node in seen:
                continue
            seen.add(node)
            if isinstance(node, (Op, Call, Load)) and counts.get(node, 0) > 1:
                txt = pp_expr(node, names)
                names[node] = f"t{len(names)}"
                lines.append(f"{indent}{names[node]} = {txt}")
    ins = ", ".join(f"in{i}:{a.dtype.name}[{a.ndim}d]" for i, a in enumerate(k.inputs))
    outs = ", ".join(f"out{i}:{a.dtype.name}[{a.ndim}d]" for i, a in enumerate(k.outputs))
    head = [f"kernel({ins}) -> ({outs})",
            f"{indent}space: {k.ndim} dims (extents p0..p{k.ndim - 1})"
            + (f", reduce dims {tuple(k.reduce_dims)}" if k.reduce_dims else "")
            + (f", parallel over dim {k.parallel_dim}" if k.parallel_dim is not None
               and not k.chunked else "")
            + (", parallel in chunks" if k.chunked else "")
            + (f", pairwise sums over dims {k.run_dims} (NumPy's order)" if k.run_dims else "")]
    for s in k.stores:
        lines.append(f"{indent}out{s.out}[i] = {pp_expr(s.value, names)}")
    base = 0
    for r in k.reductions:
        for j in range(len(r.init)):
            lines.append(f"{indent}acc{base + j}:{np.dtype(r.acc_dtypes[j]).name} = "
                         f"{pp_expr(r.init[j], names)}; "
                         f"acc{base + j} <- {pp_expr(r.combine[j], names)}")
        for o, fin in zip(r.outs, r.finals):
            lines.append(f"{indent}out{o}[kept] = {pp_expr(fin, names)}")
        base += len(r.init)
    return "\n".join(head + lines)


def pp_program(p: Program) -> str:
    def aval_str(name):
        a = p.buffers[name]
        return f"{name}:{a.str_short()}"

    lines = [f"program({', '.join(aval_str(v) for v in p.invars)})"]
    if p.consts:
        lines.append("  consts: " + ", ".join(aval_str(n) for n, _ in p.consts))
    for i, s in enumerate(p.steps):
        outs = ", ".join(aval_str(o) for o in s.outs)
        if isinstance(s, KernelStep):
            lines.append(f"  [{i}] {outs} = kernel({', '.join(s.ins)}) "
                         f"iparams={list(s.iparams)}"
                         + (f" fparams={list(s.fparams)}" if s.fparams else ""))
            for t in s.text.splitlines():
                lines.append(f"        # {t}")
            lines.append("      " + pp_kernel(s.kernel, "        ").replace("\n", "\n      "))
        elif isinstance(s, LibraryCall):
            # a control-flow spec is summarized by the call's name
            shown = {k: v for k, v in s.params if not isinstance(v, ControlFlowSpec)}
            lines.append(f"  [{i}] {outs} = library_call {s.name}({', '.join(s.ins)})"
                         + (f" {shown}" if shown else ""))
        elif isinstance(s, HostStep):
            ins = ", ".join(x if isinstance(x, str) else repr(x[1]) for x in s.ins)
            lines.append(f"  [{i}] {outs} = host_step {s.primitive.name}({ins})  "
                         f"# no Numba lowering: runs the NumPy impl")
    outs = ", ".join(o if isinstance(o, str) else repr(o[1]) for o in p.outvars)
    lines.append(f"  return ({outs})")
    return "\n".join(lines)
