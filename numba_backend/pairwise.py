"""NumPy's pairwise summation for generated kernels: the order in which NumPy adds up
float sums, reproduced bit for bit.

NumPy adds up the inner run of a float reduction with ``pairwise_sum``
(numpy/_core/src/umath/loops_utils.h.src): a run of ``n <= 128`` elements is a *leaf*,
summed from -0.0 one element at a time when ``n < 8``, else with eight accumulators
``r[j] += a[i + j]`` (element ``i`` goes to accumulator ``i % 8``), combined as
``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the ``n % 8`` remaining
elements added one at a time; a longer run splits at ``h = n // 2 - (n // 2) % 8`` and
returns ``sum(a[:h]) + sum(a[h:])``. Complex sums (``c = 1``) count in complex elements:
leaves of up to 64 with four accumulators, split at ``(n - n % 8) // 2``. The result is
then added to the output element (0 for a fresh sum), which is why an all ``-0.0`` sum
gives ``+0.0``.

``pairwise(b, lo, n)`` sums the contiguous ``b[lo:lo + n]`` so: compiled, it calls a
recursive LLVM function written here (NumPy's recursion; a leaf's eight accumulators are
one vector register, so the leaf loop is SIMD without any reassociation) through an
entry inlined where it is called, which sums a run of fewer than eight reals in place; in
Python (the ``debug_kernels`` mode) it runs the same recursion. A kernel whose summand is computed
walks the top of the recursion in its own code (``numba_backend.codegen``; Numba compiles
no recursive closures): down to a node of at most ``BLOCK`` elements, pushing each right
half on a small stack (``STACK`` entries), it fills a buffer with the node's elements
(one vectorizable loop), sums it with ``pairwise_cached`` and adds the sum to the
finished left halves on the stack. The parallel variant of a whole-array sum cuts the
tree at depth ``TOP_DEPTH`` (``frontier``), walks the subtrees in parallel and combines
them with ``combine_top``: the same additions in the same order, so the result does not
depend on the thread count. ``split`` is the rule the generated walk and the LLVM
function also spell out.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba_backend.lazy_numba import register_jitable, when_numba

STACK = 64        # deeper than any recursion over 2**63 elements
BLOCK = 256       # the nodes a kernel buffers: two leaves (small enough that filling
                  # the next overlaps summing this one)
TOP_DEPTH = 6     # the parallel split: at most 2**6 subtrees
PREFETCH = 1024   # bytes the leaf loop prefetches ahead (NumPy: 512)


@register_jitable
def leaf_size(c):
    return 64 if c else 128


@register_jitable
def split(n, c):
    """Where NumPy's recursion splits a run of ``n`` elements (n > leaf_size(c))."""
    if c:
        return (n - n % 8) // 2
    h = n // 2
    return h - h % 8


def leaf(b, lo, m):
    """NumPy's sum of the leaf ``b[lo:lo + m]`` (reference; compiled: ``_llvm_pairwise``)."""
    c = np.iscomplexobj(b)
    res = b.dtype.type(complex(-0.0, -0.0) if c else -0.0)
    w = 4 if c else 8
    if m < w:
        for i in range(lo, lo + m):
            res += b[i]
        return res
    r = [b[lo + j] for j in range(w)]
    e = lo + m - m % w
    for i in range(lo + w, e, w):
        for j in range(w):
            r[j] += b[i + j]
    if w == 4:
        res = (r[0] + r[1]) + (r[2] + r[3])
    else:
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for i in range(e, lo + m):
        res += b[i]
    return res


def pairwise(b, lo, n):
    """NumPy's pairwise_sum of the contiguous ``b[lo:lo + n]`` (Python; compiled, the
    overload below)."""
    c = np.iscomplexobj(b)
    if n <= leaf_size(c):
        return leaf(b, lo, n)
    h = split(n, c)
    return pairwise(b, lo, h) + pairwise(b, lo + h, n - h)


def _llvm_pairwise(module, elt, cplx, cached):
    """The recursive LLVM function ``sum(elt* a, i64 n)`` of NumPy's pairwise_sum over
    ``n`` elements (complex: real and imaginary parts interleaved; returns {re, im}).
    A leaf's eight accumulators are one vector (Numba runs no SLP vectorizer: eight
    scalar accumulators would stay scalar) adding the leaf's blocks of eight reals in
    turn, prefetching ahead as NumPy's loop does; then NumPy's combination of the lanes,
    by shuffles: ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` for reals, for
    complex ``(r0 + r2) + (r4 + r6)`` (real parts) and ``(r1 + r3) + (r5 + r7)``
    (imaginary); then the elements after the last whole block, one at a time. With
    ``cached`` (data in L1: a kernel's buffer), a node whose halves are both leaves runs
    their loops interleaved (two independent chains of additions: twice the throughput
    of one); reading memory, one leaf after the other streams faster."""
    from numba.core import cgutils
    i64 = ir.IntType(64)
    i32 = ir.IntType(32)
    ptr = elt.as_pointer()
    ret = ir.LiteralStructType([elt, elt]) if cplx else elt
    name = f"tracer_pairwise_{'c' if cplx else 'r'}{elt.intrinsic_name}{'_l1' if cached else ''}"
    fn = cgutils.get_or_insert_function(module, ir.FunctionType(ret, [ptr, i64]), name)
    if not fn.is_declaration:
        return fn
    fn.linkage = "linkonce_odr"
    a, n = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    parts = 2 if cplx else 1
    lim = 64 if cplx else 128
    vty = ir.VectorType(elt, 8)
    align = 4 if elt == ir.FloatType() else 8
    i8p = ir.IntType(8).as_pointer()
    prefetch = cgutils.get_or_insert_function(
        module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8")

    def c64(v):
        return ir.Constant(i64, v)

    def result(vals):
        if not cplx:
            return vals[0]
        out = ir.Constant(ret, ir.Undefined)
        for j, v in enumerate(vals):
            out = bld.insert_value(out, v, j)
        return out

    def add_elements(base, accs, start, stop):
        """accs[j] += base[i + j] for i from start to stop by len(accs) (in reals)."""
        with cgutils.for_range_slice(bld, start, stop, c64(len(accs)), inc=True) as (i, _):
            for j, acc in enumerate(accs):
                x = bld.load(bld.gep(base, [bld.add(i, c64(j))]))
                bld.store(bld.fadd(bld.load(acc), x), acc)

    def fold(v, lanes):
        mask = ir.Constant(ir.VectorType(i32, 8), [ir.Constant(i32, j) for j in lanes])
        return bld.fadd(v, bld.shuffle_vector(v, ir.Constant(vty, ir.Undefined), mask))

    def vector_leaves(leaves):
        """The sums (lists of parts) of leaves given as (start pointer, reals >= 8)."""
        accs, ptrs, blocks = [], [], []
        for base, reals in leaves:
            p = bld.bitcast(base, vty.as_pointer())
            ptrs.append(p)
            blocks.append(bld.udiv(reals, c64(8)))
            accs.append(cgutils.alloca_once_value(bld, bld.load(p, align=align)))
        common = blocks[0]
        for nb in blocks[1:]:
            common = bld.select(bld.icmp_unsigned("<", nb, common), nb, common)
        ahead = c64(max(1, PREFETCH // (8 * align)))

        def step(p, acc, k):
            q = bld.gep(p, [k])
            bld.call(prefetch, [bld.bitcast(bld.gep(q, [ahead]), i8p), ir.Constant(i32, 0),
                                ir.Constant(i32, 3), ir.Constant(i32, 1)])
            bld.store(bld.fadd(bld.load(acc), bld.load(q, align=align)), acc)
        with cgutils.for_range_slice(bld, c64(1), common, c64(1), inc=True) as (k, _):
            for p, acc in zip(ptrs, accs):
                step(p, acc, k)
        for p, acc, nb in zip(ptrs, accs, blocks):     # the longer leaf's last blocks
            with cgutils.for_range_slice(bld, common, nb, c64(1), inc=True) as (k, _):
                step(p, acc, k)
        sums = []
        for (base, reals), acc, nb in zip(leaves, accs, blocks):
            v = bld.load(acc)
            if not cplx:
                v = fold(v, [1, 0, 3, 2, 5, 4, 7, 6])
            v = fold(fold(v, [2, 3, 0, 1, 6, 7, 4, 5]), [4, 5, 6, 7, 0, 1, 2, 3])
            out = [cgutils.alloca_once_value(bld, bld.extract_element(v, ir.Constant(i32, j)))
                   for j in range(parts)]
            add_elements(base, out, bld.mul(nb, c64(8)), reals)
            sums.append([bld.load(x) for x in out])
        return sums

    def halves(size):
        if cplx:
            return bld.udiv(bld.sub(size, bld.and_(size, c64(7))), c64(2))
        half = bld.udiv(size, c64(2))
        return bld.sub(half, bld.and_(half, c64(7)))

    leaf_bb = fn.append_basic_block("leaf")
    node_bb = fn.append_basic_block("node")
    pair_bb = fn.append_basic_block("pair")
    split_bb = fn.append_basic_block("split")
    bld.cbranch(bld.icmp_signed("<=", n, c64(lim)), leaf_bb, node_bb)

    bld.position_at_end(node_bb)
    h = halves(n)
    bld.cbranch(bld.icmp_signed("<=", bld.sub(n, h), c64(lim)), pair_bb, split_bb)

    # split: NumPy's halves, summed recursively, added
    bld.position_at_end(split_bb)
    left = bld.call(fn, [a, h])
    right = bld.call(fn, [bld.gep(a, [bld.mul(h, c64(parts))]), bld.sub(n, h)])
    if cplx:
        left = [bld.extract_value(left, j) for j in range(2)]
        right = [bld.extract_value(right, j) for j in range(2)]
    else:
        left, right = [left], [right]
    bld.ret(result([bld.fadd(x, y) for x, y in zip(left, right)]))

    # both halves are leaves (of at least 64 elements)
    bld.position_at_end(pair_bb)
    hr = bld.mul(h, c64(parts))
    pair = [(a, hr), (bld.gep(a, [hr]), bld.sub(bld.mul(n, c64(parts)), hr))]
    s1, s2 = vector_leaves(pair) if cached else [vector_leaves([x])[0] for x in pair]
    bld.ret(result([bld.fadd(x, y) for x, y in zip(s1, s2)]))

    # a leaf
    bld.position_at_end(leaf_bb)
    reals = bld.mul(n, c64(parts))
    small_bb = fn.append_basic_block("small")
    vec_bb = fn.append_basic_block("vector")
    bld.cbranch(bld.icmp_signed("<", reals, c64(8)), small_bb, vec_bb)
    bld.position_at_end(small_bb)
    accs = [cgutils.alloca_once_value(bld, ir.Constant(elt, -0.0)) for _ in range(parts)]
    add_elements(a, accs, c64(0), reals)
    bld.ret(result([bld.load(acc) for acc in accs]))
    bld.position_at_end(vec_bb)
    (sums,) = vector_leaves([(a, reals)])
    bld.ret(result(sums))
    return fn


def _llvm_pairwise_entry(module, elt, cplx, cached):
    """``_llvm_pairwise``'s entry, always inlined where it is called: a run of fewer than
    eight reals (NumPy's small leaf) is summed there, from -0.0 one element at a time as
    the leaf does, and a longer one calls the recursive function. A kernel summing short
    runs (the three coordinates of each pair in an n-body step) paid a call per run."""
    from numba.core import cgutils
    rec = _llvm_pairwise(module, elt, cplx, cached)
    fn = cgutils.get_or_insert_function(module, rec.function_type, rec.name + "_entry")
    if not fn.is_declaration:
        return fn
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    a, n = fn.args
    i64 = ir.IntType(64)
    parts = 2 if cplx else 1
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    reals = bld.mul(n, ir.Constant(i64, parts))
    small_bb = fn.append_basic_block("small")
    call_bb = fn.append_basic_block("call")
    bld.cbranch(bld.icmp_signed("<", reals, ir.Constant(i64, 8)), small_bb, call_bb)
    bld.position_at_end(call_bb)
    bld.ret(bld.call(rec, [a, n]))
    bld.position_at_end(small_bb)
    accs = [cgutils.alloca_once_value(bld, ir.Constant(elt, -0.0)) for _ in range(parts)]
    with cgutils.for_range_slice(bld, ir.Constant(i64, 0), reals, ir.Constant(i64, parts),
                                 inc=True) as (i, _):
        for j, acc in enumerate(accs):
            x = bld.load(bld.gep(a, [bld.add(i, ir.Constant(i64, j))]))
            bld.store(bld.fadd(bld.load(acc), x), acc)
    vals = [bld.load(acc) for acc in accs]
    if cplx:
        out = ir.Constant(fn.function_type.return_type, ir.Undefined)
        for j, v in enumerate(vals):
            out = bld.insert_value(out, v, j)
        bld.ret(out)
    else:
        bld.ret(vals[0])
    return fn


def _pairwise_intrinsic(cached):
    from numba import types
    from numba.extending import intrinsic

    def typer(typingctx, b, lo, n):
        cplx = isinstance(b.dtype, types.Complex)
        ft = b.dtype.underlying_float if cplx else b.dtype
        sig = b.dtype(b, types.intp, types.intp)

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            elt = context.get_value_type(ft)
            lo = builder.mul(args[1], ir.Constant(args[1].type, 2 if cplx else 1))
            start = builder.gep(builder.bitcast(ary.data, elt.as_pointer()), [lo])
            r = builder.call(_llvm_pairwise_entry(builder.module, elt, cplx, cached),
                             [start, args[2]])
            if not cplx:
                return r
            z = context.make_complex(builder, sig.return_type)
            z.real = builder.extract_value(r, 0)
            z.imag = builder.extract_value(r, 1)
            return z._getvalue()
        return sig, codegen
    return intrinsic(typer)


def _pairwise_overload(cached):
    from numba import types
    intr = _pairwise_intrinsic(cached)

    def ol(b, lo, n):
        if not (isinstance(b, types.Array) and b.ndim == 1 and
                isinstance(b.dtype, (types.Float, types.Complex))):
            return None
        if b.layout != "C":     # a strided view (not made by our kernels): a copy
            def copy_impl(b, lo, n):
                return intr(np.ascontiguousarray(b[lo:lo + n]), 0, n)
            return copy_impl

        def impl(b, lo, n):
            return intr(b, lo, n)
        return impl
    return ol


def pairwise_cached(b, lo, n):
    """``pairwise`` of data in L1 (a kernel's buffer): the same result, compiled with the
    leaf loops of sibling leaves interleaved."""
    return pairwise(b, lo, n)


def _register_pairwise():
    """``pairwise`` and ``pairwise_cached`` compiled (when Numba is imported:
    ``lazy_numba``)."""
    from numba.extending import overload
    overload(pairwise)(_pairwise_overload(False))
    overload(pairwise_cached)(_pairwise_overload(True))


when_numba(_register_pairwise)


@register_jitable
def frontier(n, c, flo, fsz):
    """The nodes of the recursion over ``n`` elements at depth TOP_DEPTH (or leaves
    above it), left to right, into (flo, fsz); returns their count (<= 2**TOP_DEPTH)."""
    lim = leaf_size(c)
    slo = np.empty(STACK, np.int64)
    ssz = np.empty(STACK, np.int64)
    sdp = np.empty(STACK, np.int64)
    sp = 0
    lo = 0
    size = n
    depth = 0
    k = 0
    while True:
        while size > lim and depth < TOP_DEPTH:
            h = split(size, c)
            slo[sp] = lo + h
            ssz[sp] = size - h
            depth += 1
            sdp[sp] = depth
            sp += 1
            size = h
        flo[k] = lo
        fsz[k] = size
        k += 1
        if sp == 0:
            return k
        sp -= 1
        lo = slo[sp]
        size = ssz[sp]
        depth = sdp[sp]


@register_jitable
def combine_top(parts, n, c, st):
    """The sums of the ``frontier`` nodes (``parts``, in order) combined as NumPy's
    recursion combines them; ``st``: a scratch stack of the parts' dtype."""
    lim = leaf_size(c)
    ssz = np.empty(STACK, np.int64)
    sdp = np.empty(STACK, np.int64)
    sp = 0
    size = n
    depth = 0
    q = 0
    while True:
        while size > lim and depth < TOP_DEPTH:
            h = split(size, c)
            ssz[sp] = size - h
            depth += 1
            sdp[sp] = depth
            sp += 1
            size = h
        v = parts[q]
        q += 1
        while sp > 0 and ssz[sp - 1] < 0:
            sp -= 1
            v = st[sp] + v
        if sp == 0:
            return v
        st[sp - 1] = v
        size = ssz[sp - 1]
        depth = sdp[sp - 1]
        ssz[sp - 1] = -1
