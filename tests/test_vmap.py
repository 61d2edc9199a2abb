"""vmap: batching of primitives over random in_axes/out_axes (against a Python loop), the
shape of batched jaxprs (no loops, no needless broadcasts or copies), the vmap API
(pytree axes, keywords, axis_size, out_axes=None, errors), named axes and collectives,
and composition with grad, jit, jacfwd/jacrev/hessian and nested vmaps."""
from __future__ import annotations

import collections
import functools

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer.test_util import check_close, check_vmap

B = 3  # the mapped size used throughout (small: the oracle is a Python loop)


# ===================================== helpers ==========================================

def _values(rng, shape, dtype, kind="any"):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.unsignedinteger):
        return rng.integers(0, 9, shape).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        lo = 1 if kind == "pos" else -8
        return rng.integers(lo, 9, shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    v = rng.standard_normal(shape)
    if kind == "pos":
        v = np.abs(v) + 0.5
    elif kind == "unit":
        v = np.tanh(v) * 0.9
    return v.astype(dtype)


def _batched(rng, spec, axis):
    """An argument for ``spec = (shape, dtype[, kind])`` with a batch axis of size B
    inserted at ``axis`` (None: unbatched)."""
    shape, dtype, *kind = spec
    shape = list(shape)
    if axis is not None:
        shape.insert(axis % (len(shape) + 1), B)
    return _values(rng, tuple(shape), dtype, *kind)


def _random_axes(rng, specs, allow_none=True):
    """One in_axis per argument: None, or a position (negative ones included) in the
    batched rank; at least one argument mapped."""
    while True:
        axes = []
        for spec in specs:
            nd = len(spec[0]) + 1
            choices = list(range(-nd, nd)) + ([None, None] if allow_none else [])
            axes.append(choices[rng.integers(len(choices))])
        if any(a is not None for a in axes):
            return tuple(axes)


def _run_random(f, specs, seed, trials=3, out_rank=None):
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        in_axes = _random_axes(rng, specs)
        args = [_batched(rng, s, a) for s, a in zip(specs, in_axes)]
        unbatched = [np.take(a, 0, axis=ax) if ax is not None else a
                     for a, ax in zip(args, in_axes)]
        out = f(*[tracer.numpy.asarray(u) for u in unbatched])
        leaves = tracer.tree_util.tree_leaves(out)
        out_axes = tuple(int(rng.integers(-(np.ndim(o) + 1), np.ndim(o) + 1)) for o in leaves)
        if not isinstance(out, (tuple, list)):
            out_axes = out_axes[0]
        try:
            check_vmap(f, args, in_axes=in_axes, out_axes=out_axes)
        except AssertionError as e:
            raise AssertionError(f"in_axes={in_axes} out_axes={out_axes}: {e}") from None


def _eqns(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


f64, f32, i32, i64, u8, u32, c128 = "float64", "float32", "int32", "int64", "uint8", \
    "uint32", "complex128"
bool_ = "bool"

# ============================ primitives over random axes ===============================

UNARY = {
    "neg": (lax.neg, f64), "sign": (lax.sign, f64), "floor": (lax.floor, f64),
    "ceil": (lax.ceil, f32), "round": (lax.round, f64), "is_finite": (lax.is_finite, f64),
    "exp": (lax.exp, f64), "log": (lax.log, f64, "pos"), "log1p": (lax.log1p, f64, "pos"),
    "expm1": (lax.expm1, f64), "sin": (lax.sin, f64), "cos": (lax.cos, f32),
    "tan": (lax.tan, f64, "unit"), "tanh": (lax.tanh, f64), "logistic": (lax.logistic, f64),
    "sqrt": (lax.sqrt, f64, "pos"), "rsqrt": (lax.rsqrt, f64, "pos"), "cbrt": (lax.cbrt, f64),
    "abs": (lax.abs, f64), "erf": (lax.erf, f64), "exp2": (lax.exp2, f64),
    "square": (lax.square, f64), "reciprocal": (lax.reciprocal, f64, "pos"),
    "abs_complex": (lax.abs, c128), "real": (lax.real, c128), "imag": (lax.imag, c128),
    "conj": (lax.conj, c128), "exp_complex": (lax.exp, c128),
    "neg_int": (lax.neg, i32), "abs_int": (lax.abs, i64), "sign_int": (lax.sign, i32),
    "not_bool": (lax.bitwise_not, bool_), "not_int": (lax.bitwise_not, u8),
    "population_count": (lax.population_count, u32), "clz": (lax.clz, i32),
    "integer_pow3": (lambda x: lax.integer_pow(x, 3), f64),
    "integer_pow_neg": (lambda x: lax.integer_pow(x, -2), f64, "pos"),
    "convert_f2i": (lambda x: lax.convert_element_type(x, np.int32), f64),
    "convert_i2f": (lambda x: lax.convert_element_type(x, np.float32), i64),
    "convert_f2bool": (lambda x: lax.convert_element_type(x, np.bool_), f64),
    "reduce_precision": (lambda x: lax.reduce_precision(x, 5, 10), f64),
    "bitcast_same_width": (lambda x: lax.bitcast_convert_type(x, np.int32), f32),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    f, dtype, *kind = UNARY[name]
    for i, shape in enumerate([(4,), (2, 3), ()]):
        _run_random(f, [(shape, dtype, *kind)], seed=hash(name) % 1000 + i, trials=2)


BINARY = {
    "add": (lax.add, f64), "sub": (lax.sub, f64), "mul": (lax.mul, f32),
    "div": (lax.div, f64), "div_int": (lax.div, i32, "pos"), "rem": (lax.rem, f64),
    "rem_int": (lax.rem, i64, "pos"), "pow": (lax.pow, f64, "pos"), "max": (lax.max, f64),
    "min": (lax.min, i32), "atan2": (lax.atan2, f64), "eq": (lax.eq, i32),
    "ne": (lax.ne, f64), "lt": (lax.lt, f64), "le": (lax.le, i32), "gt": (lax.gt, f64),
    "ge": (lax.ge, f64), "and": (lax.bitwise_and, bool_), "or": (lax.bitwise_or, i32),
    "xor": (lax.bitwise_xor, u8), "shift_left": (lax.shift_left, i32, "pos"),
    "shift_right_arithmetic": (lax.shift_right_arithmetic, i32, "pos"),
    "shift_right_logical": (lax.shift_right_logical, u32),
    "complex": (lax.complex, f64), "add_complex": (lax.add, c128),
    "lt_total_order": (lax.lt_total_order, f64), "eq_total_order": (lax.eq_total_order, f64),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    f, dtype, *kind = BINARY[name]
    seed = sum(map(ord, name))
    # equal shapes; rank-0 operands (mapped ones are per-member scalars) beside arrays
    for j, shapes in enumerate([((2, 3), (2, 3)), ((), (4,)), ((3,), ()), ((), ())]):
        _run_random(f, [(s, dtype, *kind) for s in shapes], seed=seed + j, trials=2)


def test_binary_with_python_scalar_operand():
    _run_random(lambda x: lax.mul(x, 2.0), [((2, 3), f32)], seed=1)
    _run_random(lambda x: lax.sub(3, x), [((4,), i32)], seed=2)


SHAPES = {
    "broadcast_in_dim": (lambda x: lax.broadcast_in_dim(x, (2, 3), (1,)), [((3,), f64)]),
    "broadcast_in_dim_expand1": (lambda x: lax.broadcast_in_dim(x, (2, 4, 3), (1, 2)),
                                 [((1, 3), f64)]),
    "broadcast_in_dim_scalar": (lambda x: lax.broadcast_in_dim(x, (2, 2), ()), [((), i32)]),
    "reshape": (lambda x: lax.reshape(x, (3, 2)), [((2, 3), f64)]),
    "reshape_flatten": (lambda x: lax.reshape(x, (6,)), [((2, 3), f64)]),
    "reshape_dimensions": (lambda x: lax.reshape(x, (6,), dimensions=(1, 0)),
                           [((2, 3), f64)]),
    "reshape_to_scalar": (lambda x: lax.reshape(x, ()), [((1, 1), f64)]),
    "transpose": (lambda x: lax.transpose(x, (2, 0, 1)), [((2, 3, 4), f64)]),
    "rev": (lambda x: lax.rev(x, (0, 2)), [((2, 3, 4), f64)]),
    "slice": (lambda x: lax.slice(x, (1, 0), (4, 3), (2, 2)), [((5, 3), f64)]),
    "slice_in_dim": (lambda x: lax.slice_in_dim(x, 1, 3, 1, 1), [((2, 4), i32)]),
    "pad": (lambda x: lax.pad(x, -1.0, ((1, 2, 0), (0, -1, 1))), [((2, 3), f64)]),
    "pad_batched_value": (lambda x, v: lax.pad(x, v, ((1, -1, 1), (2, 0, 0))),
                          [((3, 2), f64), ((), f64)]),
    "concatenate": (lambda x, y, z: lax.concatenate([x, y, z], 1),
                    [((2, 1), f64), ((2, 3), f64), ((2, 2), f64)]),
    "concatenate_dim0": (lambda x, y: lax.concatenate([x, y], 0), [((1, 2), i32),
                                                                  ((3, 2), i32)]),
    "squeeze": (lambda x: lax.squeeze(x, (1,)), [((2, 1, 3), f64)]),
    "expand_dims": (lambda x: lax.expand_dims(x, (0, 2)), [((2, 3), f64)]),
    "iota_add": (lambda x: x + lax.iota(np.float64, 4), [((4,), f64)]),
    "broadcasted_iota": (lambda x: lax.mul(x, lax.broadcasted_iota(np.int32, (2, 3), 1)),
                         [((2, 3), i32)]),
    "select_n_scalar_pred": (lambda p, a, b: lax.select_n(p, a, b),
                             [((), bool_), ((2, 3), f64), ((2, 3), f64)]),
    "select_n_array_pred": (lambda p, a, b: lax.select_n(p, a, b),
                            [((2, 3), bool_), ((2, 3), f64), ((2, 3), f64)]),
    "select_n_int_pred": (lambda p, a, b, c: lax.select_n(lax.clamp(0, p, 2), a, b, c),
                          [((4,), i32), ((4,), f64), ((4,), f64), ((4,), f64)]),
    "select": (lambda p, a, b: lax.select(p, a, b), [((3,), bool_), ((3,), i32), ((3,), i32)]),
    "clamp_scalar_bounds": (lambda lo, x, hi: lax.clamp(lo, x, hi),
                            [((), f64), ((2, 3), f64), ((), f64)]),
    "clamp_array_bounds": (lambda lo, x, hi: lax.clamp(lo, x, hi),
                           [((4,), f64), ((4,), f64), ((4,), f64)]),
    "clamp_mixed": (lambda lo, x, hi: lax.clamp(lo, x, hi),
                    [((), i32), ((3,), i32), ((3,), i32)]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_ops(name):
    f, specs = SHAPES[name]
    _run_random(f, specs, seed=sum(map(ord, name)), trials=4)


REDUCTIONS = {
    "reduce_sum": (lambda x: lax.reduce_sum(x, (0, 2)), f64),
    "reduce_sum_all": (lambda x: lax.reduce_sum(x, (0, 1, 2)), f64),
    "reduce_max": (lambda x: lax.reduce_max(x, (1,)), f64),
    "reduce_min": (lambda x: lax.reduce_min(x, (2, 0)), i32),
    "reduce_prod": (lambda x: lax.reduce_prod(x, (1,)), f64),
    "reduce_and": (lambda x: lax.reduce_and(x, (1,)), bool_),
    "reduce_or": (lambda x: lax.reduce_or(x, (0,)), bool_),
    "reduce_xor": (lambda x: lax.reduce_xor(x, (2,)), i32),
    "argmax": (lambda x: lax.argmax(x, 1, np.int32), f64),
    "argmin": (lambda x: lax.argmin(x, 0, np.int64), i32),
    "argmax_last": (lambda x: lax.argmax(x, 2, np.int32), f32),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name):
    f, dtype = REDUCTIONS[name]
    _run_random(f, [((2, 3, 4), dtype)], seed=sum(map(ord, name)), trials=4)


# (lhs shape, rhs shape, dimension_numbers)
DOTS = {
    "matmul": ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    "vecvec": ((4,), (4,), (((0,), (0,)), ((), ()))),
    "matvec": ((3, 4), (4,), (((1,), (0,)), ((), ()))),
    "outer": ((3,), (2,), (((), ()), ((), ()))),
    "batch_dims": ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    "batch_dims_moved": ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    "two_contracting": ((2, 3, 4), (4, 2), (((0, 2), (1, 0)), ((), ()))),
    "contract_first": ((4, 3), (4, 5), (((0,), (0,)), ((), ()))),
}


@pytest.mark.parametrize("name", sorted(DOTS))
def test_dot_general_all_batching_combinations(name):
    ls, rs, dn = DOTS[name]
    f = lambda x, y: lax.dot_general(x, y, dn)
    rng = np.random.default_rng(sum(map(ord, name)))
    # lhs only, rhs only, both; each at several positions
    for lax_, rax in [(0, None), (None, 0), (0, 0), (-1, None), (None, -1), (1, -1),
                      (-1, 1), (len(ls), 0)]:
        args = [_batched(rng, (ls, f64), lax_), _batched(rng, (rs, f64), rax)]
        out_axes = int(rng.integers(-1, 1))
        check_vmap(f, args, in_axes=(lax_, rax), out_axes=out_axes)


def test_dot_general_integer_and_preferred_type():
    f = lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                     preferred_element_type=np.int64)
    _run_random(f, [((2, 3), i32), ((3, 2), i32)], seed=5)


def test_numpy_functions():
    cases = [
        (lambda x: tnp.mean(x, axis=0), [((3, 4), f64)]),
        (lambda x, y: tnp.matmul(x, y), [((2, 3), f64), ((3, 4), f64)]),
        (lambda x: tnp.exp(x - tnp.max(x)) / tnp.sum(tnp.exp(x - tnp.max(x))), [((5,), f64)]),
        (lambda c, x, y: tnp.where(c, x, y), [((3,), bool_), ((3,), f64), ((), f64)]),
        (lambda x: x[1:, ::2], [((3, 5), f64)]),
        (lambda x: x[..., 0] * x[:, -1], [((3, 2), f64)]),
        (lambda x: tnp.concatenate([x, 2 * x]), [((2,), i32)]),
        (lambda x: tnp.argmax(x), [((2, 3), f64)]),
        (lambda x: tnp.cumsum(x) if hasattr(tnp, "cumsum") else tnp.sum(x), [((4,), f64)]),
        (lambda x, y: tnp.outer(x, y), [((2,), f64), ((3,), f64)]),
        (lambda x: tnp.stack([x, x ** 2], axis=-1), [((3,), f64)]),
        (lambda x: x.T @ x, [((3, 2), f64)]),
    ]
    for i, (f, specs) in enumerate(cases):
        _run_random(f, specs, seed=100 + i, trials=2)


def test_multiple_outputs_with_random_out_axes():
    f = lambda x, y: (x * y, tnp.sum(x), {"d": y - 1.0})
    _run_random(f, [((3,), f64), ((3,), f64)], seed=7, trials=4)


def test_edge_values_and_empty_dims():
    x = np.array([[0.0, -0.0, np.inf], [-np.inf, np.nan, 1.0]])
    check_vmap(lambda a: lax.sign(a) * lax.exp(-a), [x], in_axes=(1,))
    check_vmap(lambda a: lax.max(a, 0.0), [x], in_axes=(0,), out_axes=-1)
    # an empty mapped axis and empty core dims
    out = tracer.vmap(lambda a: tnp.sum(a * 2.0))(np.zeros((0, 3)))
    assert out.shape == (0,)
    out = tracer.vmap(lambda a: a + 1.0, in_axes=1)(np.zeros((2, 3, 0)))
    assert out.shape == (3, 2, 0)
    # a size-1 mapped axis
    check_vmap(lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ()))),
               [np.ones((1, 3)), np.arange(3.0)], in_axes=(0, None))


# ================================== jaxpr structure =====================================

def test_vmapped_matmul_is_one_dot_general_without_loop():
    w = np.random.default_rng(0).standard_normal((4, 5))
    for n in (2, 7):
        xs = np.ones((n, 3, 4))
        closed = tracer.make_jaxpr(tracer.vmap(lambda x: lax.dot(x, w)))(xs)
        assert _eqns(closed) == ["dot_general"], closed
        assert closed.jaxpr.outvars[0].aval.shape == (n, 3, 5)
    # both operands batched: one dot_general with a batch dimension
    closed = tracer.make_jaxpr(tracer.vmap(lax.dot))(np.ones((6, 3, 4)), np.ones((6, 4, 5)))
    assert _eqns(closed) == ["dot_general"], closed
    dn = closed.jaxpr.eqns[0].params["dimension_numbers"]
    assert dn[1] == ((0,), (0,))
    # per-example matvec through tracer.numpy: no equation count growing with the batch
    counts = {len(tracer.make_jaxpr(tracer.vmap(lambda x: tnp.tanh(x @ w)))(np.ones((n, 4)))
                  .jaxpr.eqns) for n in (2, 9)}
    assert len(counts) == 1
    prims = _eqns(tracer.make_jaxpr(tracer.vmap(lambda x: x @ w))(np.ones((9, 4))))
    assert prims.count("dot_general") == 1
    assert {"while", "scan", "concatenate"}.isdisjoint(prims)


def test_reductions_keep_batch_dim_in_place():
    x = np.ones((3, 4, 5))
    # reducing axis 0 of the member leaves the batch axis where it was (less the axes
    # reduced before it): asking for it there costs nothing
    for in_axis, out_axis in ((0, 0), (1, 0), (2, 1), (-1, 1)):
        closed = tracer.make_jaxpr(tracer.vmap(lambda a: lax.reduce_sum(a, (0,)),
                                               in_axes=in_axis, out_axes=out_axis))(x)
        assert _eqns(closed) == ["reduce_sum"], closed
    closed = tracer.make_jaxpr(tracer.vmap(lambda a: lax.argmax(a, 1, np.int32), in_axes=2,
                                           out_axes=1))(x)
    assert _eqns(closed) == ["argmax"], closed
    # reshape of a value batched in front: no transpose
    closed = tracer.make_jaxpr(tracer.vmap(lambda a: lax.reshape(a, (20,))))(x)
    assert _eqns(closed) == ["reshape"], closed
    # transpose/rev/slice of a batched value: the one equation, whatever the batch axis
    for name, f in (("transpose", lambda a: lax.transpose(a, (1, 0))),
                    ("rev", lambda a: lax.rev(a, (0,))),
                    ("slice", lambda a: lax.slice(a, (1, 0), (3, 4)))):
        for in_axis in (0, 1, 2):
            closed = tracer.make_jaxpr(tracer.vmap(f, in_axes=in_axis, out_axes=in_axis))(x)
            assert _eqns(closed)[0] == name, closed
            # at most one more equation: a transpose back to the requested out_axes
            assert _eqns(closed)[1:] in ([], ["transpose"]), closed


def test_unmapped_operands_are_not_broadcast_without_need():
    x = np.ones((3, 4))
    # an unmapped scalar stays a scalar operand
    closed = tracer.make_jaxpr(tracer.vmap(lambda a, s: a * s, in_axes=(0, None)))(
        x, np.ones(()))
    assert _eqns(closed) == ["mul"], closed
    assert closed.jaxpr.eqns[0].invars[1].aval.shape == ()
    # a Python scalar too
    closed = tracer.make_jaxpr(tracer.vmap(lambda a: a * 2.0 + 1.0))(x)
    assert _eqns(closed) == ["mul", "add"], closed
    # an unmapped array is broadcast once (a broadcast_in_dim: a view), the mapped
    # operand is untouched
    w = np.arange(4.0)
    closed = tracer.make_jaxpr(tracer.vmap(lambda a: a * w))(x)
    assert _eqns(closed) == ["broadcast_in_dim", "mul"], closed
    assert closed.jaxpr.eqns[0].invars[0].aval.shape == (4,)
    # operands batched alike: passed through, whatever the batch axis
    closed = tracer.make_jaxpr(tracer.vmap(lambda a, b: a + b, in_axes=(1, 1), out_axes=1))(
        x, x)
    assert _eqns(closed) == ["add"], closed
    # two operands batched at different axes: one transpose, of one operand
    closed = tracer.make_jaxpr(tracer.vmap(lambda a, b, c: a + b + c, in_axes=(0, 1, 0)))(
        x, x.T, x)
    assert _eqns(closed).count("transpose") == 1, closed
    # a function of unmapped values only stays unbatched
    closed = tracer.make_jaxpr(tracer.vmap(lambda a, c: (a + 1.0, tnp.sin(c)),
                                           in_axes=(0, None), out_axes=(0, None)))(x, w)
    sin_eqn = [e for e in closed.jaxpr.eqns if e.primitive.name == "sin"][0]
    assert sin_eqn.invars[0].aval.shape == (4,)


def test_mapped_scalar_beside_array_broadcasts_only_the_scalar():
    closed = tracer.make_jaxpr(tracer.vmap(lambda s, a: s * a, in_axes=(0, 0)))(
        np.ones(3), np.ones((3, 4)))
    assert _eqns(closed) == ["broadcast_in_dim", "mul"], closed
    assert closed.jaxpr.eqns[0].invars[0].aval.shape == (3,)


def test_jit_inside_vmap_stays_one_equation():
    f = tracer.jit(lambda a, w: tnp.sin(a) * w)
    closed = tracer.make_jaxpr(tracer.vmap(f, in_axes=(0, None)))(np.ones((3, 4)), np.ones(4))
    assert _eqns(closed) == ["jit"], closed
    inner = closed.jaxpr.eqns[0].params["jaxpr"]
    assert inner.in_avals[0].shape == (3, 4) and inner.in_avals[1].shape == (4,)


# ======================================== API ===========================================

def test_in_axes_pytrees_dicts_and_nested_tuples():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 2)), "b": rng.standard_normal((3, 2))}
    pair = (rng.standard_normal((3, 5)), (rng.standard_normal((5, 3)), 2.0))

    def f(p, q):
        x, (y, s) = q
        return {"out": x @ y * s + p["b"], "w": p["w"].sum()}

    in_axes = ({"w": None, "b": 0}, (0, (1, None)))
    got = tracer.vmap(f, in_axes=in_axes, out_axes={"out": 1, "w": None})(params, pair)
    loop = [f({"w": params["w"], "b": params["b"][i]},
              (pair[0][i], (pair[1][0][:, i], 2.0))) for i in range(3)]
    check_close(got["out"], np.stack([np.asarray(l["out"]) for l in loop], axis=1))
    check_close(got["w"], loop[0]["w"])
    # a list in_axes is a tuple; a prefix entry covers a whole subtree
    got = tracer.vmap(lambda p: p["w"] + p["b"], in_axes=[{"w": 1, "b": 0}])(
        {"w": np.ones((2, 3)), "b": np.arange(6.0).reshape(3, 2)})
    check_close(got, np.ones((3, 2)) + np.arange(6.0).reshape(3, 2))


def test_namedtuple_in_axes():
    Point = collections.namedtuple("Point", ["x", "y"])
    p = Point(np.arange(3.0), np.arange(6.0).reshape(2, 3))
    got = tracer.vmap(lambda q: q.x * q.y, in_axes=(Point(0, 1),))(p)
    check_close(got, (np.arange(3.0)[:, None] * np.arange(6.0).reshape(2, 3).T))


def test_negative_axes():
    x = np.arange(24.0).reshape(2, 3, 4)
    check_vmap(lambda a: a * 2.0, [x], in_axes=(-1,), out_axes=-1)
    got = tracer.vmap(lambda a: a.sum(0), in_axes=-2, out_axes=-1)(x)
    check_close(got, x.sum(0).T)


def test_keyword_arguments_are_mapped_along_axis_0():
    def f(x, *, scale, shift=0.0):
        return x * scale + shift

    x = np.arange(6.0).reshape(3, 2)
    got = tracer.vmap(f, in_axes=(1,))(x.T, scale=np.arange(3.0), shift=np.ones(3))
    check_close(got, x * np.arange(3.0)[:, None] + 1.0)
    with pytest.raises(ValueError, match="keyword argument scale"):
        tracer.vmap(f)(x, scale=np.ones(4))


def test_axis_size_without_mapped_inputs():
    out = tracer.vmap(lambda: tnp.ones(2), axis_size=4)()
    assert out.shape == (4, 2)
    out = tracer.vmap(lambda w: w * 2.0, in_axes=None, axis_size=3)(np.arange(2.0))
    check_close(out, np.tile(np.arange(2.0) * 2, (3, 1)))
    out = tracer.vmap(lambda w: w * 2.0, in_axes=None, axis_size=3, out_axes=1)(np.arange(2.0))
    assert out.shape == (2, 3)
    # axis_size agreeing with the mapped size is fine
    out = tracer.vmap(lambda a: a, axis_size=2)(np.ones((2, 5)))
    assert out.shape == (2, 5)


def test_out_axes_none_for_unmapped_outputs():
    w = np.arange(3.0)
    a, b = tracer.vmap(lambda x, w: (x + w, w * 2), in_axes=(0, None), out_axes=(0, None))(
        np.ones((4, 3)), w)
    assert a.shape == (4, 3)
    check_close(b, w * 2)
    # a constant output with out_axes=0 is broadcast
    c = tracer.vmap(lambda x: (x, 1.0))(np.ones(2))[1]
    check_close(c, np.ones(2))


def test_nested_vmap_different_in_axes():
    x = np.random.default_rng(1).standard_normal((4, 3))
    y = np.random.default_rng(2).standard_normal((3, 5))
    dist = lambda a, b: tnp.sum((a - b) ** 2)
    # pairwise: rows of x against columns of y
    pairwise = tracer.vmap(tracer.vmap(dist, in_axes=(None, 1)), in_axes=(0, None))
    expected = ((x[:, :, None] - y[None, :, :]) ** 2).sum(1)
    check_close(pairwise(x, y), expected)
    # the same with out_axes swapping the result
    pw_t = tracer.vmap(tracer.vmap(dist, in_axes=(None, 1)), in_axes=(0, None), out_axes=1)
    check_close(pw_t(x, y), expected.T)
    # three levels, mixed axes
    z = np.random.default_rng(3).standard_normal((2, 3, 4))
    f = tracer.vmap(tracer.vmap(tracer.vmap(lambda a, b: a * b, in_axes=(0, None)),
                                in_axes=(1, 0)), in_axes=(0, None))
    got = f(z, np.arange(4.0))
    check_close(got, (z * np.arange(4.0)).transpose(0, 2, 1))
    z = z.transpose(0, 2, 1)
    check_vmap(tracer.vmap(lambda a, b: a @ b, in_axes=(0, None)), [z, np.ones((3, 2))],
               in_axes=(0, None))


def test_vmap_of_function_returning_tracer_of_outer_vmap():
    # the inner function closes over an outer batched value
    def outer(x):
        return tracer.vmap(lambda y: x * y)(np.arange(3.0))

    got = tracer.vmap(outer)(np.array([1.0, 2.0]))
    check_close(got, np.array([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]]))


# ===================================== errors ===========================================

def test_error_inconsistent_sizes_names_arguments_axes_and_sizes():
    def f(a, b):
        return a + b
    with pytest.raises(ValueError) as e:
        tracer.vmap(f, in_axes=(0, 1))(np.ones((3, 4)), np.ones((4, 5)))
    msg = str(e.value)
    assert "vmap(f)" in msg and "inconsistent sizes" in msg
    assert "axis 0 of argument a" in msg and "size 3" in msg
    assert "axis 1 of argument b" in msg and "size 5" in msg
    with pytest.raises(ValueError, match=r"argument a\['q'\]\[1\].*size 5|size 5.*a\['q'\]\[1\]"):
        tracer.vmap(lambda a: a)({"p": np.ones((3, 2)), "q": (np.ones(3), np.ones(5))})


def test_error_in_axes_not_matching_arguments():
    with pytest.raises(ValueError, match=r"tuple of length 2 for 1 positional argument"):
        tracer.vmap(lambda a: a, in_axes=(0, 0))(np.ones(3))
    with pytest.raises(ValueError, match=r"in_axes\[0\] is a dict with keys \['y'\].*"
                                         r"argument a is a dict with keys \['x'\]"):
        tracer.vmap(lambda a: a, in_axes=({"y": 0},))({"x": np.ones(3)})
    with pytest.raises(ValueError, match=r"in_axes\[1\]\[1\] is a tuple of length 2.*"
                                         r"argument b\[1\] is a tuple of length 3"):
        tracer.vmap(lambda a, b: a, in_axes=(0, (0, (0, 0))))(
            np.ones(3), (np.ones(3), (np.ones(3),) * 3))
    with pytest.raises(TypeError, match="in_axes must be an int, None"):
        tracer.vmap(lambda a: a, in_axes="0")
    with pytest.raises(TypeError, match="out_axes"):
        tracer.vmap(lambda a: a, out_axes=(0, 1.5))


def test_error_axis_out_of_range():
    with pytest.raises(ValueError, match=r"map argument x along axis 2.*rank 2 \(f64\[3,4\]\)"):
        tracer.vmap(lambda x: x, in_axes=2)(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"axis -3.*rank 2"):
        tracer.vmap(lambda x: x, in_axes=-3)(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"argument x along axis 0.*rank 0.*in_axes=None"):
        tracer.vmap(lambda x: x)(2.0)
    with pytest.raises(ValueError, match=r"out_axes=2 is out of range for the output.*"
                                         r"rank 2.*-2\.\.1"):
        tracer.vmap(lambda x: x, out_axes=2)(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"out_axes\[1\]=-3 is out of range for output\[1\]"):
        tracer.vmap(lambda x: (x, x[0]), out_axes=(0, -3))(np.ones((3, 4)))


def test_error_out_axes_none_for_mapped_output():
    with pytest.raises(ValueError, match=r"out_axes\[1\] is None.*output\[1\] \(f64\[\] per "
                                         r"member\) depends on the mapped axis of size 3"):
        tracer.vmap(lambda x: (x, x.sum()), out_axes=(0, None))(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"out_axes\['b'\] is None"):
        tracer.vmap(lambda x: {"a": 1.0, "b": x}, out_axes={"a": None, "b": None})(np.ones(3))
    with pytest.raises(ValueError, match=r"out_axes must be a tree prefix of the outputs"):
        tracer.vmap(lambda x: (x, x), out_axes=(0, 0, 0))(np.ones(3))


def test_error_nothing_mapped_and_axis_size_mismatch():
    with pytest.raises(ValueError, match="must map at least one argument.*axis_size"):
        tracer.vmap(lambda x: x, in_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match=r"axis_size=4 differs from the size 3"):
        tracer.vmap(lambda x: x, axis_size=4)(np.ones(3))


def test_error_non_array_output_and_missing_rule_message():
    with pytest.raises(TypeError, match="vmap.*has type str"):
        tracer.vmap(lambda x: "s")(np.ones(3))


# ============================== named axes, collectives =================================

def test_psum_pmean_pmax_pmin():
    x = np.random.default_rng(0).standard_normal((4, 3))
    check_close(tracer.vmap(lambda a: a / lax.psum(a, "i"), axis_name="i")(x), x / x.sum(0))
    check_close(tracer.vmap(lambda a: a - lax.pmean(a, "i"), axis_name="i", in_axes=1,
                            out_axes=1)(x), x - x.mean(1, keepdims=True))
    check_close(tracer.vmap(lambda a: lax.pmax(a, "i"), axis_name="i", out_axes=None)(x),
                x.max(0))
    check_close(tracer.vmap(lambda a: lax.pmin(a, "i"), axis_name="i", out_axes=None)(x),
                x.min(0))
    # pytrees, integer pmean gives floats, psum of a constant is the axis size
    s, m, n = tracer.vmap(lambda a: (lax.psum({"a": a}, "i"),
                                     lax.pmean(lax.convert_element_type(a, np.int32), "i"),
                                     lax.psum(1, "i")),
                          axis_name="i", out_axes=None)(x)
    check_close(s["a"], x.sum(0))
    assert np.asarray(m).dtype == np.float64
    assert int(n) == 4
    # the jaxpr has plain reductions: the collective is batched away
    closed = tracer.make_jaxpr(tracer.vmap(lambda a: a / lax.psum(a, "i"), axis_name="i"))(x)
    assert "psum" not in _eqns(closed) and "reduce_sum" in _eqns(closed)


def test_axis_index_and_all_gather():
    got = tracer.vmap(lambda a: lax.axis_index("i") * 10 + 0 * a.astype(np.int32).sum(),
                      axis_name="i")(np.ones((3, 2)))
    check_close(got, np.array([0, 10, 20]))
    got = tracer.vmap(lambda: lax.axis_index("k"), axis_name="k", axis_size=5)()
    check_close(got, np.arange(5))
    assert np.asarray(got).dtype == np.int32
    x = np.arange(6.0).reshape(3, 2)
    g = tracer.vmap(lambda a: lax.all_gather(a, "i"), axis_name="i")(x)
    check_close(g, np.stack([x] * 3))
    g = tracer.vmap(lambda a: lax.all_gather(a, "i", axis=1, tiled=True), axis_name="i",
                    in_axes=1)(np.ones((4, 3, 2)))
    assert g.shape == (3, 4, 6)


def test_collectives_over_nested_named_axes():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    inner = lambda a: (lax.psum(a, "i"), lax.psum(a, "j"), lax.psum(a, ("i", "j")),
                       lax.axis_index("i") + 0 * lax.axis_index("j"))
    f = tracer.vmap(tracer.vmap(inner, axis_name="j"), axis_name="i")
    si, sj, sij, idx = f(x)
    check_close(si, np.broadcast_to(x.sum(0), x.shape))
    check_close(sj, np.broadcast_to(x.sum(1, keepdims=True), x.shape))
    check_close(sij, np.broadcast_to(x.sum((0, 1)), x.shape))
    check_close(idx, np.broadcast_to(np.arange(2)[:, None], (2, 3)))


def test_collectives_inside_jit_inside_vmap():
    x = np.random.default_rng(0).standard_normal((3, 4))
    f = tracer.jit(lambda a: a - lax.pmean(a, "i"))
    check_close(tracer.vmap(f, axis_name="i")(x), x - x.mean(0))
    # no operand of the jitted function is mapped: the axis index still is
    got = tracer.vmap(lambda a: tracer.jit(lambda: lax.axis_index("i"))(), axis_name="i")(x)
    check_close(got, np.arange(3))
    # jit of a vmap with a named axis
    g = tracer.jit(tracer.vmap(lambda a: a / lax.psum(a, "i"), axis_name="i"))
    check_close(g(x), x / x.sum(0))


def test_collectives_differentiate():
    x = np.random.default_rng(0).standard_normal((3, 4))
    # per-member grads of sum(a * psum(a)): d/da_b = S + sum_b' a_b' = 2 S
    g = tracer.vmap(tracer.grad(lambda a: tnp.sum(a * lax.psum(a, "i"))), axis_name="i")(x)
    check_close(g, np.broadcast_to(2 * x.sum(0), x.shape))
    # grad through a vmap with a collective
    g = tracer.grad(lambda xs: tnp.sum(tracer.vmap(lambda a: a * lax.psum(a, "i"),
                                                   axis_name="i")(xs)))(x)
    check_close(g, np.broadcast_to(2 * x.sum(0), x.shape))
    g = tracer.grad(lambda xs: tnp.sum(tracer.vmap(lambda a: (a - lax.pmean(a, "i")) ** 2,
                                                   axis_name="i")(xs)))(x)
    check_close(g, 2 * (x - x.mean(0)), atol=1e-12)
    # forward mode
    t = np.ones_like(x)
    _, dt = tracer.jvp(tracer.vmap(lambda a: lax.psum(a, "i") * a, axis_name="i"), (x,), (t,))
    check_close(dt, 3 * x + x.sum(0))
    # all_gather transposes to a psum and a member's slice
    w = np.arange(3.0)[:, None]
    g = tracer.vmap(tracer.grad(lambda a: tnp.sum(lax.all_gather(a, "i") ** 2 * w)),
                    axis_name="i")(x)
    check_close(g, 2 * x * w * 3)


def test_unbound_axis_name_errors():
    x = np.ones(3)
    with pytest.raises(NameError, match=r"unbound axis name: 'i' \(used by psum\)"):
        lax.psum(x, "i")
    with pytest.raises(NameError, match="unbound axis name: 'j'.*bound here are \\['i'\\]"):
        tracer.vmap(lambda a: lax.pmax(a, "j"), axis_name="i")(x)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.axis_index("i")
    with pytest.raises(NameError, match="unbound axis name"):
        tracer.make_jaxpr(lambda a: lax.pmean(a, "i"))(x)
    with pytest.raises(NameError, match="unbound axis name"):
        tracer.jit(lambda a: lax.psum(a, "i"))(x)


# ===================================== composition ======================================

def _mlp_params(rng):
    return [(rng.standard_normal((3, 5)) * 0.5, rng.standard_normal(5) * 0.1),
            (rng.standard_normal((5, 2)) * 0.5, rng.standard_normal(2) * 0.1)]


def _mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = tnp.tanh(h)
    return tnp.sum((h - y) ** 2)


def test_per_example_gradients_of_mlp_match_loop_of_grad():
    rng = np.random.default_rng(0)
    params = _mlp_params(rng)
    xs, ys = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    per_ex = tracer.vmap(tracer.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    for i in range(6):
        gi = tracer.grad(_mlp_loss)(params, xs[i], ys[i])
        for (gw, gb), (lw, lb) in zip(gi, per_ex):
            check_close(np.asarray(lw)[i], gw, atol=1e-12, rtol=1e-10)
            check_close(np.asarray(lb)[i], gb, atol=1e-12, rtol=1e-10)
    # the same through check_vmap, batching along other axes
    check_vmap(lambda x, y: tracer.grad(_mlp_loss)(params, x, y), [xs.T, ys], in_axes=(1, 0),
               out_axes=-1)
    # value_and_grad, jitted
    vg = tracer.jit(tracer.vmap(tracer.value_and_grad(_mlp_loss), in_axes=(None, 0, 0)))
    v, g = vg(params, xs, ys)
    check_close(v, np.array([float(_mlp_loss(params, xs[i], ys[i])) for i in range(6)]))
    check_close(g[0][0], per_ex[0][0], atol=1e-12)


def test_grad_of_vmapped_function():
    rng = np.random.default_rng(1)
    params = _mlp_params(rng)
    xs, ys = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))

    def batch_loss(p):
        return tnp.sum(tracer.vmap(_mlp_loss, in_axes=(None, 0, 0))(p, xs, ys))

    g = tracer.grad(batch_loss)(params)
    loop = [tracer.grad(_mlp_loss)(params, xs[i], ys[i]) for i in range(5)]
    for layer in range(2):
        for k in range(2):
            check_close(g[layer][k], sum(np.asarray(l[layer][k]) for l in loop), atol=1e-12)
    # grad with respect to the mapped argument, mapped along axis 1
    gx = tracer.grad(lambda x: tnp.sum(tracer.vmap(lambda a: tnp.sin(a) * a, in_axes=1)(x)))(
        xs)
    check_close(gx, np.cos(xs) * xs + np.sin(xs), atol=1e-12)
    tracer.test_util.check_grads(
        lambda x: tracer.vmap(lambda a: tnp.tanh(a @ params[0][0]), in_axes=1)(x), (xs.T,),
        order=2)


def _f_jac(x):
    return tnp.stack([tnp.sin(x[0]) * x[1], x[1] ** 3, tnp.exp(x[0] - x[2])])


def _jac_ref(x):
    return np.array([[np.cos(x[0]) * x[1], np.sin(x[0]), 0.0],
                     [0.0, 3 * x[1] ** 2, 0.0],
                     [np.exp(x[0] - x[2]), 0.0, -np.exp(x[0] - x[2])]])


def test_jacfwd_jacrev_hessian():
    x = np.array([0.3, -1.2, 0.7])
    check_close(tracer.jacfwd(_f_jac)(x), _jac_ref(x), atol=1e-12)
    check_close(tracer.jacrev(_f_jac)(x), _jac_ref(x), atol=1e-12)
    f = lambda x: tnp.sum(tnp.sin(x) * x[::-1])
    # d2/dxi dxj of sum sin(x_k) x_{n-1-k}
    n = len(x)
    h_ref = np.zeros((n, n))
    for k in range(n):
        h_ref[k, k] += -np.sin(x[k]) * x[n - 1 - k]
        h_ref[k, n - 1 - k] += np.cos(x[k])
        h_ref[n - 1 - k, k] += np.cos(x[k])
    check_close(tracer.hessian(f)(x), h_ref, atol=1e-12)
    # matrices in, matrices out, pytrees
    A = np.random.default_rng(0).standard_normal((2, 3))
    jf = tracer.jacfwd(lambda a: tnp.tanh(a) @ a.T)(A)
    jr = tracer.jacrev(lambda a: tnp.tanh(a) @ a.T)(A)
    assert jf.shape == (2, 2, 2, 3)
    check_close(jf, jr, atol=1e-12)
    jd = tracer.jacrev(lambda p: {"s": tnp.sum(p["a"] * p["b"]), "v": p["a"] * 2},)(
        {"a": np.ones(2), "b": np.arange(2.0)})
    check_close(jd["s"]["a"], np.arange(2.0))
    check_close(jd["v"]["a"], 2 * np.eye(2))
    # per-example jacobians: vmap of jacrev
    xs = np.random.default_rng(1).standard_normal((4, 3))
    js = tracer.vmap(tracer.jacrev(_f_jac))(xs)
    check_close(js, np.stack([_jac_ref(v) for v in xs]), atol=1e-12)
    jfs = tracer.vmap(tracer.jacfwd(_f_jac), in_axes=1)(xs.T)
    check_close(jfs, np.stack([_jac_ref(v) for v in xs]), atol=1e-12)


def test_vmap_of_jit_and_jit_of_vmap():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    f = tracer.jit(lambda a, w: tnp.tanh(a @ w))
    check_vmap(f, [x, w], in_axes=(0, None))
    check_vmap(f, [x.T, w], in_axes=(1, None), out_axes=1)
    check_vmap(f, [x[0], np.stack([w, 2 * w])], in_axes=(None, 0))
    g = tracer.jit(tracer.vmap(lambda a, w: tnp.tanh(a @ w), in_axes=(0, None)))
    check_close(g(x, w), np.tanh(x @ w))
    # vmap of jit with an output that does not depend on the mapped inputs
    h = tracer.jit(lambda a, w: (a * w[0], w * 2))
    a, b = tracer.vmap(h, in_axes=(0, None), out_axes=(0, None))(np.ones((4, 2)), w)
    check_close(b, w * 2)
    # vmap(jit(grad)), grad(vmap(jit)), jit(vmap(grad))
    loss = tracer.jit(lambda w, a: tnp.sum(tnp.tanh(a @ w) ** 2))
    g1 = tracer.vmap(tracer.grad(loss), in_axes=(None, 0))(w, x)
    g2 = tracer.jit(tracer.vmap(tracer.grad(loss), in_axes=(None, 0)))(w, x)
    loop = np.stack([np.asarray(tracer.grad(loss)(w, x[i])) for i in range(4)])
    check_close(g1, loop, atol=1e-12)
    check_close(g2, loop, atol=1e-12)
    g3 = tracer.grad(lambda w: tnp.sum(tracer.vmap(loss, in_axes=(None, 0))(w, x)))(w)
    check_close(g3, loop.sum(0), atol=1e-12)
    # nested: vmap(jit(vmap(jit)))
    inner = tracer.jit(tracer.vmap(tracer.jit(lambda a, b: a * b), in_axes=(0, None)))
    got = tracer.vmap(inner, in_axes=(None, 0))(np.arange(3.0), np.arange(2.0))
    check_close(got, np.arange(2.0)[:, None] * np.arange(3.0)[None, :])


def test_jvp_and_vjp_of_vmap_and_vmap_of_jvp():
    x = np.random.default_rng(0).standard_normal((3, 2))
    t = np.ones_like(x)
    f = tracer.vmap(lambda a: tnp.sin(a) * a[::-1])
    y, dy = tracer.jvp(f, (x,), (t,))
    check_close(dy, np.cos(x) * x[:, ::-1] + np.sin(x))
    vj = tracer.vmap(lambda a, ta: tracer.jvp(lambda b: tnp.sin(b) * b[::-1], (a,), (ta,))[1])
    check_close(vj(x, t), np.cos(x) * x[:, ::-1] + np.sin(x))
    _, pull = tracer.vjp(f, x)
    (ct,) = pull(np.ones_like(x))
    check_close(ct, np.cos(x) * x[:, ::-1] + np.sin(x[:, ::-1]))


def test_psum_of_bools_counts_them_as_jax():
    # jax.lax.psum converts bool operands to int32 counts (vmap, pmap and MPI alike)
    x = np.array([[True, False], [True, True], [False, False]])
    out = tracer.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.tile(x.sum(0, dtype=np.int32), (3, 1)))
    out = tracer.jit(tracer.vmap(lambda v: lax.psum(v, "i"), axis_name="i"))(x)
    np.testing.assert_array_equal(np.asarray(out), np.tile(x.sum(0, dtype=np.int32), (3, 1)))
