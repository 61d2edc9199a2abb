"""vmap of every lax primitive, driven by ``tests/op_records.py``: ``check_vmap`` (the
batched result equals stacking the op over a Python loop) over sampled combinations of
batch dims per argument (0, the last axis as -1 or positive, a middle axis, None), with
out_axes 0 or -1; plus the structural promises of issue 4 (one batched dot_general, no
needless broadcasts of unmapped operands)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tracer
import lax
from tracer.test_util import check_vmap

import op_records as opr
from op_records import RECORDS, rng_for

BATCH = 3


def _bdim_choices(rank):
    # Positions to insert the batch axis for an operand of this (unbatched) rank.
    choices = {0, -1, None, rank}
    if rank >= 1:
        choices.add(1)
    return sorted(choices, key=lambda d: (d is None, d if d is not None else 0))


def _vmap_cases():
    for rec in RECORDS:
        if not rec.vmap:
            continue
        for case, dt in opr.record_cases(rec, opr.NUM_CASES):
            combos = [c for c in itertools.product(*[_bdim_choices(len(s)) for s in case.shapes])
                      if any(d is not None for d in c)]
            for k, in_axes in enumerate(opr.sample(combos, 2, rec.name, case, dt)):
                out_axes = -1 if k % 2 else 0
                yield pytest.param(rec, case, dt, tuple(in_axes), out_axes,
                                   id=f"{rec.name}-{case}-{dt.name}-in{in_axes}-out{out_axes}"
                                      .replace(" ", ""))


def _batched(rec, r, case, dt, in_axes):
    """Arguments with a batch axis of size BATCH inserted at each mapped position."""
    shapes = []
    for s, d in zip(case.shapes, in_axes):
        if d is None:
            shapes.append(s)
        else:
            pos = d % (len(s) + 1)
            shapes.append(s[:pos] + (BATCH,) + s[pos:])
    return rec.make_args(r, opr.Case(tuple(shapes), case.params), dt)


@pytest.mark.parametrize("rec,case,dt,in_axes,out_axes", list(_vmap_cases()))
def test_vmap(rec, case, dt, in_axes, out_axes):
    args = _batched(rec, rng_for("vmap", rec.name, case, dt, in_axes), case, dt, in_axes)
    kw = case.kw
    f = lambda *xs: rec.op(*xs, **kw)
    low_precision = dt in (opr.f16, opr.f32, opr.c64)
    tol = dict(atol=1e-2, rtol=1e-2) if dt == opr.f16 else \
        dict(atol=1e-5, rtol=1e-5) if low_precision else {}
    check_vmap(f, args, in_axes=in_axes, out_axes=out_axes, **tol)


def test_nested_vmap_of_binary_op():
    x = np.arange(24.0).reshape(2, 3, 4)
    y = np.arange(3.0)
    inner = tracer.vmap(lax.mul, in_axes=(1, None))          # over x's last axis
    out = tracer.vmap(inner, in_axes=(0, None))(x, y)        # over x's first axis
    expected = np.stack([np.stack([x[i, :, j] * y for j in range(4)]) for i in range(2)])
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_vmap_with_axis_size_and_no_mapped_inputs():
    out = tracer.vmap(lambda: lax.iota(np.int32, 3), in_axes=(), axis_size=2)()
    np.testing.assert_array_equal(np.asarray(out), np.tile(np.arange(3, dtype=np.int32), (2, 1)))


def _prim_names(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def test_vmapped_matmul_is_one_dot_general():
    w = np.ones((3, 4))
    xs = np.ones((5, 2, 3))
    jaxpr = tracer.make_jaxpr(tracer.vmap(lambda x: lax.dot(x, w)))(xs)
    assert _prim_names(jaxpr).count("dot_general") == 1
    assert "broadcast_in_dim" not in _prim_names(jaxpr)
    jaxpr = tracer.make_jaxpr(tracer.vmap(lambda x, w: lax.dot(x, w)))(xs, np.ones((5, 3, 4)))
    assert _prim_names(jaxpr) == ["dot_general"]


def test_unmapped_operands_are_not_broadcast():
    jaxpr = tracer.make_jaxpr(tracer.vmap(lambda x: lax.add(x, 2.0)))(np.ones((4, 3)))
    assert _prim_names(jaxpr) == ["add"]
    jaxpr = tracer.make_jaxpr(tracer.vmap(lambda x: lax.reduce_sum(x, (1,))))(np.ones((4, 3, 2)))
    assert _prim_names(jaxpr) == ["reduce_sum"]
    jaxpr = tracer.make_jaxpr(tracer.vmap(lambda x: lax.reshape(x, (6,)), in_axes=1))(
        np.ones((2, 4, 3)))
    assert "broadcast_in_dim" not in _prim_names(jaxpr)
