"""``einsum`` and ``einsum_path``: Einstein summation lowered to lax.dot_general.

The contraction order comes from opt_einsum (``optimize``: 'auto' by default, 'greedy',
'optimal', ... or False for left to right). Each pairwise step is one dot_general (shared
labels kept in the output are batch dimensions, the others are contracted), preceded by
the operand-local work: diagonals for repeated labels (a strided slice of the flattened
pair of axes), sums over labels that no other operand and not the output need, and
squeezes of size-1 axes that broadcast. A final transpose (and broadcast) gives the
requested output order.
"""
from __future__ import annotations

import operator

import opt_einsum

import lax
from tracer import dtypes
from tracer.core import get_aval
from tracer.numpy.util import as_operand, promote_dtypes

_ELL = "..."


def _shape(x):
    return get_aval(x).shape


# ==================================== parsing ============================================

def _parse_term(term, fname):
    """'ab...c' -> list of labels (chars) with the ellipsis marker in place."""
    out = []
    i = 0
    while i < len(term):
        if term.startswith(_ELL, i):
            if _ELL in out:
                raise ValueError(f"{fname}: an ellipsis may appear only once per term, got "
                                 f"{term!r}")
            out.append(_ELL)
            i += 3
            continue
        c = term[i]
        if c == " ":
            i += 1
            continue
        if not c.isalpha():
            raise ValueError(f"{fname}: invalid subscript {c!r} in {term!r}; subscripts "
                             f"must be letters (or '...')")
        out.append(c)
        i += 1
    return out


def _parse_sublist(sub, fname):
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append(_ELL)
        else:
            try:
                out.append(int(operator.index(s)))
            except TypeError:
                raise TypeError(f"{fname}: sublist entries must be integers or Ellipsis, got "
                                f"{s!r}") from None
    return out


def _parse_args(subscripts, operands, fname):
    """-> (operands, input label lists, output label list or None)."""
    if isinstance(subscripts, str):
        spec = subscripts.replace(" ", "")
        if "->" in spec:
            lhs, rhs = spec.split("->")
            if "->" in rhs:
                raise ValueError(f"{fname}: subscripts contain more than one '->'")
            out = _parse_term(rhs, fname)
        else:
            lhs, out = spec, None
        terms = lhs.split(",")
        ins = [_parse_term(t, fname) for t in terms]
        ops = list(operands)
    else:
        # Interleaved form: op0, sub0, op1, sub1, ..., [out_sub]
        args = [subscripts] + list(operands)
        ops, ins = [], []
        out = None
        while len(args) >= 2:
            ops.append(args.pop(0))
            ins.append(_parse_sublist(args.pop(0), fname))
        if args:
            out = _parse_sublist(args.pop(0), fname)
    if len(ins) != len(ops):
        raise ValueError(f"{fname}: {len(ins)} subscript terms for {len(ops)} operands")
    return ops, ins, out


def _canonical(ops, ins, out, fname):
    """Expand ellipses into fresh integer labels, number all labels 0..L-1, compute the
    implicit output, check the sizes. Returns (ops, in_labels, out_labels, sizes)."""
    shapes = [_shape(o) for o in ops]
    ell_nd = 0
    for t, s in zip(ins, shapes):
        explicit = sum(1 for c in t if c != _ELL)
        if _ELL in t:
            if len(s) < explicit:
                raise ValueError(f"{fname}: operand of shape {s} has fewer dimensions than "
                                 f"its subscripts {t}")
            ell_nd = max(ell_nd, len(s) - explicit)
        elif len(s) != explicit:
            raise ValueError(f"{fname}: operand has {len(s)} dimensions (shape {s}) but "
                             f"{explicit} subscripts")
    ell_labels = [("ell", i) for i in range(ell_nd)]
    expanded = []
    for t, s in zip(ins, shapes):
        e = []
        for c in t:
            if c == _ELL:
                k = len(s) - (len(t) - 1)
                e.extend(ell_labels[ell_nd - k:])
            else:
                e.append(c)
        expanded.append(e)
    if out is None:
        counts = {}
        for e in expanded:
            for c in e:
                counts[c] = counts.get(c, 0) + 1
        # NumPy's implicit output: the labels used once, in (character code) order.
        named = sorted(c for c, n in counts.items() if n == 1 and c not in ell_labels)
        out_l = ell_labels + named
    else:
        out_l = []
        for c in out:
            if c == _ELL:
                out_l.extend(ell_labels)
            else:
                if c in out_l:
                    raise ValueError(f"{fname}: output subscript {c!r} appears more than "
                                     f"once")
                out_l.append(c)
        all_in = {c for e in expanded for c in e}
        for c in out_l:
            if c not in all_in and c not in ell_labels:
                raise ValueError(f"{fname}: output subscript {c!r} does not appear in the "
                                 f"inputs")
    # Number the labels.
    ids = {}
    for e in expanded + [out_l]:
        for c in e:
            if c not in ids:
                ids[c] = len(ids)
    in_ids = [[ids[c] for c in e] for e in expanded]
    out_ids = [ids[c] for c in out_l]
    sizes = {}
    for e, s in zip(in_ids, shapes):
        for c, n in zip(e, s):
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = n
            elif n != 1 and n != prev:
                raise ValueError(f"{fname}: size of label {_label_name(c, ids)} is {n} in an "
                                 f"operand of shape {s} but {prev} elsewhere; operands "
                                 f"could not be broadcast together")
    for c in out_ids:
        sizes.setdefault(c, 1)
    return in_ids, out_ids, sizes


def _label_name(i, ids):
    for k, v in ids.items():
        if v == i:
            return repr(k) if isinstance(k, str) else "'...'"
    return str(i)


# =============================== operand-local steps =====================================

def _diagonal_last_two(x):
    """The main diagonal of the last two (equal) axes: a strided slice of their
    flattening."""
    s = _shape(x)
    n = s[-1]
    lead = s[:-2]
    flat = lax.reshape(x, lead + (n * n,))
    if n == 0:
        return lax.reshape(flat, lead + (0,))
    nd = len(lead)
    return lax.slice(flat, (0,) * nd + (0,), lead + (n * n,), (1,) * nd + (n + 1,))


def _dedup(x, labels):
    """Collapse repeated labels by taking diagonals."""
    labels = list(labels)
    while True:
        seen = {}
        dup = None
        for i, c in enumerate(labels):
            if c in seen:
                dup = (seen[c], i)
                break
            seen[c] = i
        if dup is None:
            return x, labels
        i, j = dup
        nd = len(labels)
        perm = [k for k in range(nd) if k not in (i, j)] + [i, j]
        x = lax.transpose(x, tuple(perm))
        x = _diagonal_last_two(x)
        c = labels[i]
        labels = [labels[k] for k in perm[:-2]] + [c]


def _sum_out(x, labels, keep):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if axes:
        x = lax.reduce_sum(x, axes)
        labels = [c for c in labels if c in keep]
    return x, labels


def _squeeze_broadcast(x, labels, sizes):
    axes = tuple(i for i, c in enumerate(labels) if _shape(x)[i] == 1 and sizes[c] != 1)
    if axes:
        x = lax.squeeze(x, axes)
        labels = [c for i, c in enumerate(labels) if i not in axes]
    return x, labels


def _contract_pair(x, xl, y, yl, keep, precision, preferred_element_type):
    """One dot_general for two operands with unique labels; ``keep`` is the set of labels
    needed after this step. Returns (result, labels)."""
    x, xl = _sum_out(x, xl, keep | set(yl))
    y, yl = _sum_out(y, yl, keep | set(xl))
    shared = [c for c in xl if c in yl]
    batch = [c for c in shared if c in keep]
    contract = [c for c in shared if c not in keep]
    dims = (((tuple(xl.index(c) for c in contract)), tuple(yl.index(c) for c in contract)),
            (tuple(xl.index(c) for c in batch), tuple(yl.index(c) for c in batch)))
    out = lax.dot_general(x, y, dims, precision=precision,
                          preferred_element_type=preferred_element_type)
    labels = batch + [c for c in xl if c not in shared] + [c for c in yl if c not in shared]
    return out, labels


def _to_output(x, labels, out_ids, sizes):
    x, labels = _sum_out(x, labels, set(out_ids))
    present = [c for c in out_ids if c in labels]
    perm = tuple(labels.index(c) for c in present)
    if perm != tuple(range(len(perm))):
        x = lax.transpose(x, perm)
    if len(present) != len(out_ids):
        shape = tuple(sizes[c] for c in out_ids)
        x = lax.broadcast_in_dim(x, shape, tuple(out_ids.index(c) for c in present))
    return x


# ====================================== public ===========================================

def _symbols(ids):
    return "".join(opt_einsum.get_symbol(i) for i in ids)


def _path(in_ids, out_ids, sizes, optimize, fname):
    n = len(in_ids)
    if n <= 1:
        return []
    if optimize is False or optimize is None or optimize == "no":
        return [(0, 1)] * (n - 1)
    if optimize is True:
        optimize = "auto"
    if isinstance(optimize, (list, tuple)) and optimize and optimize[0] == "einsum_path":
        return [tuple(p) for p in optimize[1:]]
    spec = ",".join(_symbols(t) for t in in_ids) + "->" + _symbols(out_ids)
    shapes = [tuple(sizes[c] for c in t) for t in in_ids]
    path, _ = opt_einsum.contract_path(spec, *shapes, shapes=True, optimize=optimize)
    return [tuple(p) for p in path]


def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, _dot_general=None):
    """``numpy.einsum``: Einstein summation over the operands (string subscripts with
    '...', or the interleaved ``op, sublist, ...`` form), contracted pairwise in the order
    opt_einsum chooses (``optimize``), each pair as one dot_general. Operands are promoted
    to their common dtype; ``preferred_element_type`` sets the accumulation dtype.

    Raises ValueError naming the subscripts and shapes when they disagree.
    """
    if out is not None:
        raise NotImplementedError("einsum: the out argument is not supported")
    ops, ins, outs = _parse_args(subscripts, operands, "einsum")
    ops = [as_operand(o, "einsum") for o in ops]
    if not ops:
        raise ValueError("einsum: at least one operand is required")
    ops = promote_dtypes(*ops)
    in_ids, out_ids, sizes = _canonical(ops, ins, outs, "einsum")
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize_dtype(preferred_element_type)
    # Operand-local work first: broadcast singletons, diagonals, labels used nowhere else.
    prepared = []
    for k, (x, labels) in enumerate(zip(ops, in_ids)):
        x, labels = _squeeze_broadcast(x, labels, sizes)
        x, labels = _dedup(x, labels)
        others = set(out_ids)
        for j, t in enumerate(in_ids):
            if j != k:
                others |= set(t)
        x, labels = _sum_out(x, labels, others)
        prepared.append((x, labels))
    path = _path([lab for _, lab in prepared], out_ids, sizes, optimize, "einsum")
    work = list(prepared)
    for step in path:
        step = tuple(sorted(step, reverse=True))
        picked = [work.pop(i) for i in step]
        keep = set(out_ids)
        for _, lab in work:
            keep |= set(lab)
        if len(picked) == 1:
            x, lab = _sum_out(*picked[0], keep)
        else:
            (x, xl) = picked[0]
            for (y, yl) in picked[1:]:
                x, xl = _contract_pair(x, xl, y, yl, keep, precision, preferred_element_type)
            lab = xl
        work.append((x, lab))
    x, lab = work[0] if len(work) == 1 else _reduce_rest(work, out_ids, precision,
                                                         preferred_element_type)
    res = _to_output(x, lab, out_ids, sizes)
    if preferred_element_type is not None and get_aval(res).dtype != preferred_element_type:
        res = lax.convert_element_type(res, preferred_element_type)
    return res


def _reduce_rest(work, out_ids, precision, pet):
    x, xl = work[0]
    for i, (y, yl) in enumerate(work[1:], 1):
        keep = set(out_ids)
        for _, lab in work[i + 1:]:
            keep |= set(lab)
        x, xl = _contract_pair(x, xl, y, yl, keep, precision, pet)
    return x, xl


def einsum_path(subscripts, /, *operands, optimize="greedy"):
    """``numpy.einsum_path``: (path, report) for the contraction order opt_einsum finds
    (``['einsum_path', (i, j), ...]`` and its printed summary)."""
    ops, ins, outs = _parse_args(subscripts, operands, "einsum_path")
    ops = [as_operand(o, "einsum_path") for o in ops]
    in_ids, out_ids, sizes = _canonical(ops, ins, outs, "einsum_path")
    if optimize is True:
        optimize = "greedy"
    if optimize is False:
        optimize = "no"
    spec = ",".join(_symbols(t) for t in in_ids) + "->" + _symbols(out_ids)
    shapes = [tuple(sizes[c] if i < len(_shape(o)) and _shape(o)[i] != 1 else
                    _shape(o)[i] for i, c in enumerate(t)) for t, o in zip(in_ids, ops)]
    if optimize == "no":
        path = [(0, 1)] * (len(ops) - 1) if len(ops) > 1 else [(0,)]
        _, info = opt_einsum.contract_path(spec, *shapes, shapes=True, optimize=path)
    else:
        path, info = opt_einsum.contract_path(spec, *shapes, shapes=True, optimize=optimize)
    return ["einsum_path"] + [tuple(p) for p in path], str(info)
