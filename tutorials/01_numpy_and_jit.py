# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 01 — NumPy-style code, tracing and jit
#
# tracer runs NumPy-style code eagerly, one primitive at a time, and can also *trace* a
# function: call it with abstract values (shapes and dtypes, no data) and record every
# primitive it applies. The record is a **jaxpr**, printed in JAX's text format.
# `tracer.jit` compiles that jaxpr into fused loops with Numba.

# %%
import numpy as np

import tracer
import tracer.numpy as tnp
import lax

x = tnp.linspace(0.0, 1.0, 5, dtype=tnp.float32)
print(x)                           # an immutable Array backed by NumPy
print(tnp.sin(x) * 2.0)            # weak typing: a Python float keeps float32

# %% [markdown]
# ## What tracing sees
#
# Every operation becomes one equation `outputs = primitive[params] inputs`. Python
# scalars appear as literals such as `2.0:f32[]`.

# %%
def f(x, y):
    z = tnp.sin(x) * 2.0 + y
    return tnp.sum(z ** 2, axis=-1)


print(tracer.make_jaxpr(f)(tnp.ones((3, 4)), tnp.ones(4)))

# %% [markdown]
# Python control flow runs at trace time on static values (shapes, Python numbers). A
# Python `if` on a traced *value* cannot be decided while tracing: it raises
# `ConcretizationTypeError` and points to `lax.cond` or `static_argnums`.

# %%
@tracer.jit
def relu_if(x):
    if x > 0:            # x is traced under jit
        return x
    return 0.0 * x


try:
    relu_if(1.0)
except tracer.ConcretizationTypeError as e:
    print(type(e).__name__, "-", str(e).splitlines()[0])

# %% [markdown]
# ## jit: one compiled loop nest
#
# `jit` traces once per input signature (shapes, dtypes, weak types, pytree structure,
# static arguments) and lowers the jaxpr: passes (DCE, CSE, constant folding), fusion of
# element-wise chains into one kernel, then readable Python source compiled by Numba.
# `lower(...).as_text()` shows every stage.

# %%
def g(x):
    return tnp.sin(x) * tnp.cos(x) + tnp.exp(-x * x) / (1 + x * x)


g_jit = tracer.jit(g)
xs = np.linspace(-2, 2, 1000).astype(np.float32)
# Transcendental functions come from different math libraries (NumPy's SIMD kernels
# eagerly, libm in compiled code): results agree to an ulp or so.
np.testing.assert_allclose(np.asarray(g_jit(xs)), np.asarray(g(xs)), rtol=1e-5, atol=1e-6)
text = g_jit.lower(xs).as_text()
print(text[:2500])

# %% [markdown]
# Kernels are shape-generic: a new length of the same rank and dtype retraces (cheap) and
# reuses the compiled kernel.

# %%
print(g_jit(np.ones(7, np.float32)))
print("traces so far:", g_jit.trace_count)
