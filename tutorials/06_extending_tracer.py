# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 06 — Extending tracer: a new primitive
#
# A primitive is a name plus rules, each in a registry keyed by the primitive
# (DESIGN.md section 3): abstract evaluation (shapes/dtypes), a NumPy impl (the eager
# reference), a jvp rule, a transpose rule if it is linear, a batching rule, and a
# lowering rule for the Numba backend. We add `softsign(x) = x / (1 + |x|)`.

# %%
import numpy as np

import lax
import tracer
import tracer.numpy as tnp
from tracer.core import Primitive, ShapedArray
from tracer.interpreters import ad, batching
from tracer.test_util import check_grads, check_jit, check_vmap

softsign_p = Primitive("softsign")


def softsign(x):
    """Element-wise x / (1 + |x|); floating dtypes."""
    return softsign_p.bind(x)


# 1. abstract eval: same shape and dtype (and weak type) as the input
def _softsign_abstract_eval(x):
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"softsign needs a floating operand, got {x.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


# 2. impl: NumPy on concrete arrays — the reference for every other backend
def _softsign_impl(x):
    return (x / (1 + np.abs(x))).astype(x.dtype)


# 3. jvp: d/dx softsign = 1 / (1 + |x|)^2, written with traceable lax ops
def _softsign_jvp(g, x):
    return lax.div(g, lax.square(lax.add(lax.full_like(x, 1), lax.abs(x))))


softsign_p.def_abstract_eval(_softsign_abstract_eval)
softsign_p.def_impl(_softsign_impl)
ad.defjvp(softsign_p, _softsign_jvp)       # 4. (not linear: no transpose rule)
batching.defvectorized(softsign_p)         # 5. element-wise: the batch axis passes through

# %% [markdown]
# Eager, grad (reverse mode comes from jvp + transposing the linear ops it used) and vmap
# all work now:

# %%
x = tnp.array([-3.0, -0.5, 0.0, 2.0])
print(softsign(x), tracer.grad(lambda v: tnp.sum(softsign(v)))(x))
check_grads(softsign, (np.array([-3.0, -0.5, 0.25, 2.0]),), order=2)  # away from the kink
check_vmap(softsign, (np.ones((3, 4)),))
print(tracer.make_jaxpr(tracer.grad(lambda v: tnp.sum(softsign(v))))(x))

# %% [markdown]
# ## 6. The lowering rule
#
# Without one, `jit` runs the NumPy impl as a *host step*. An element-wise primitive
# registers a scalar expression in `lowering.rules.scalar_exprs`; it then fuses with
# its neighbours into one loop nest. `ctx.op` builds IR operations with dtype-exact
# semantics (see `lowering.rules` for the vocabulary).

# %%
from lowering.rules import scalar_exprs


def _softsign_lower(ctx, x):
    dtype = ctx.out_avals[0].dtype
    one = ctx.const(1, dtype)
    return ctx.op("div", x, ctx.op("add", one, ctx.op("abs", x)))


scalar_exprs[softsign_p] = _softsign_lower

f = tracer.jit(lambda v: softsign(v) * 2.0 + 1.0)
check_jit(lambda v: softsign(v) * 2.0 + 1.0, (np.linspace(-4, 4, 9),), atol=1e-15)
print(f.lower(np.linspace(-4, 4, 9)).as_text().split("# generated source")[1][:900])

# %% [markdown]
# ## 7. Without writing rules: your own Numba kernels
#
# `tracer.ffi` makes a primitive out of a `numba.njit` function, for code that is
# easiest to write as loops (XLA's custom calls; `jax.ffi` for C++ kernels).
#
# `numba_elementwise(scalar_fn, jvp=partials)` applies a scalar function element by
# element, with broadcasting; `jvp` lists one scalar partial derivative per argument.
# Under `jit` the call fuses into the neighbouring loop like a built-in op: the program
# below is ONE kernel, which calls `softsign_nb` from its loop.

# %%
import numba
from tracer import ffi


@numba.njit
def softsign_nb(x):
    return x / (1.0 + abs(x))


@numba.njit
def softsign_nb_dx(x):
    return 1.0 / (1.0 + abs(x)) ** 2


softsign2 = ffi.numba_elementwise(softsign_nb, jvp=softsign_nb_dx)
g = tracer.jit(lambda v: tnp.sin(softsign2(v) * 2) + 1)
xs = np.linspace(-4, 4, 9)
print(g(xs))
print(tracer.grad(lambda v: tnp.sum(softsign2(v)))(x))    # the same as softsign's above
print(g.lower(xs).as_text().count("# generated source of kernel"), "kernel")

# %% [markdown]
# `numba_call(kernel, result_shape_dtypes, *args, **static)` calls a kernel that writes its
# outputs: `kernel(*args, *outs, **static)`, `outs` allocated by tracer from
# `result_shape_dtypes`, static Python scalars passed by keyword. Inside a compiled loop
# (`scan`, `fori_loop`, `while_loop`) the loop's driver calls the kernel directly, with
# no Python per iteration. `vmap` needs a `vmap_method` (as `pure_callback`), and
# derivatives come from `tracer.custom_jvp`/`custom_vjp` around the call.


# %%
@numba.njit
def damped_step(x, out, damping):
    for i in range(x.shape[0]):
        left = x[i - 1] if i > 0 else x[i]
        right = x[i + 1] if i + 1 < x.shape[0] else x[i]
        out[i] = x[i] + damping * (left + right - 2.0 * x[i])


def diffuse(x, steps):
    return lax.fori_loop(0, steps, lambda i, c: ffi.numba_call(
        damped_step, tracer.ShapeDtypeStruct(c.shape, c.dtype), c, damping=0.25), x)


heat = np.zeros(16)
heat[8] = 1.0
out = tracer.jit(diffuse, static_argnums=1)(heat, 20)
print(np.round(np.asarray(out), 3), float(out.sum()))     # the heat spreads, its sum stays
