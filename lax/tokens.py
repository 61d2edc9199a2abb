"""Ordering tokens and effect markers: ``create_token``, ``after_all`` (XLA 'AfterAll')
and ``dce_sink`` (jax.lax's).

A token (aval ``Tok``, value ``tracer.core.Token``) carries no data: XLA uses it to order
side effects (infeed/outfeed, send/recv). Here the primitives work eagerly (they return
``Token()`` values), appear in jaxprs (``b:Tok = create_token``), and run under jit as
host steps (no Numba lowering: there is nothing to compute). No transformation changes
a token: its tangent is a symbolic zero, and vmap leaves it unmapped.

``dce_sink(x)`` marks ``x`` as used so that dead-code elimination keeps the equations
computing it although nothing consumes them: ``dce_sink_p`` has no outputs and is
registered as effectful (``partial_eval.effectful_primitives``, which both the tracing
DCE and the jit pipeline's passes read).
"""
from __future__ import annotations

from tracer.core import AbstractToken, Primitive, Token, abstract_token, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.pytree import tree_flatten


# ====================================== create_token =======================================

def create_token(_=None):
    """A fresh token with no preconditions (jax.lax.create_token). The argument is ignored
    (JAX keeps it for backward compatibility)."""
    return create_token_p.bind()


create_token_p = Primitive("create_token")
create_token_p.def_abstract_eval(lambda: abstract_token)
create_token_p.def_impl(lambda: Token())
ad.defjvp_zero(create_token_p)


# ======================================== after_all ========================================

def after_all(*operands):
    """A token that comes after all the given tokens (jax.lax.after_all; XLA 'AfterAll').
    With no operands, a fresh token. TypeError if an operand is not a token."""
    return after_all_p.bind(*operands)


def _after_all_abstract_eval(*avals):
    for i, a in enumerate(avals):
        if not isinstance(a, AbstractToken):
            raise TypeError(f"after_all: arguments must be tokens (from lax.create_token or "
                            f"lax.after_all), got {a.str_short()} for argument {i}")
    return abstract_token


def _after_all_batch(axis_data, vals, dims):
    # Tokens are never mapped (vmap has no axis to give them), so nothing to batch.
    return [after_all_p.bind(*vals)], [None]


after_all_p = Primitive("after_all")
after_all_p.def_abstract_eval(_after_all_abstract_eval)
after_all_p.def_impl(lambda *tokens: Token())
ad.defjvp_zero(after_all_p)
batching.primitive_batchers[after_all_p] = _after_all_batch


# ======================================== dce_sink =========================================

def dce_sink(val, *, prevent_mlir_dce: bool = False):
    """Mark every array of the pytree ``val`` as used, so that the computations producing
    it survive dead-code elimination (jax.lax.dce_sink). Returns None. Eagerly nothing
    happens (the value exists already); in a jaxpr it is a ``dce_sink`` equation with no
    outputs. ``prevent_mlir_dce`` is recorded as a param (there is no MLIR here; the jit
    pipeline keeps the equation either way)."""
    leaves, _ = tree_flatten(val)
    for leaf in leaves:
        get_aval(leaf)  # TypeError for non-array leaves
        dce_sink_p.bind(leaf, prevent_mlir_dce=bool(prevent_mlir_dce))


def _dce_sink_jvp(primals, tangents, **params):
    # Keeping the primal alive is all it does; a tangent sink would keep nothing useful.
    dce_sink_p.bind(*primals, **params)
    return [], []


def _dce_sink_batch(axis_data, vals, dims, **params):
    dce_sink_p.bind(*vals, **params)
    return [], []


dce_sink_p = Primitive("dce_sink")
dce_sink_p.multiple_results = True
dce_sink_p.def_abstract_eval(lambda x, **_: [])
dce_sink_p.def_impl(lambda x, **_: [])
ad.primitive_jvps[dce_sink_p] = _dce_sink_jvp
batching.primitive_batchers[dce_sink_p] = _dce_sink_batch
pe.effectful_primitives.add(dce_sink_p)

