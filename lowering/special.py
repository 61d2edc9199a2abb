"""Lowering rules of the special-function family (lax/special.py): scalar expressions.

The special functions call the scalar kernels of ``lax/special_kernels.py`` -- the code the
eager impls run through their Numba ufuncs -- with the same widening and rounding, so jit
and eager agree bit for bit (float16: the float32 kernel, rounded to float32 and then to
float16, as eagerly). The real elementary functions call NumPy's scalar functions (libm
under Numba: a few ulp from NumPy's vectorized loops, as for sin/exp); complex operands
and float16 ``next_after`` run as host steps (Numba's cmath departs from C99 at infinite
components; float16 values are carried as float32 here).
"""
from __future__ import annotations

import numpy as np

from lax import special as sp
from lowering.rules import limit, scalar_exprs

_KERNELS = "lax.special_kernels"


def _dt(x):
    return np.dtype(x.dtype)


def _kernel_rule(name, module=_KERNELS):
    """Scalar rule calling ``<module>.<name>_f64`` / ``_f32`` (float16: the float32 kernel,
    rounded on the way out)."""
    def rule(ctx, *args, **params):
        out = np.dtype(ctx.out_avals[0].dtype)
        if out == np.float64:
            return ctx.call(f"{module}.{name}_f64", *args, dtype=np.float64)
        args = [ctx.cast(a, np.float32) for a in args]
        res = ctx.call(f"{module}.{name}_f32", *args, dtype=np.float32)
        return res if out == np.float32 else ctx.cast(res, out)
    rule.__name__ = f"_{name}_lower"
    return rule


def _float_result(name):
    """The limits of a ``_kernel_rule``: floating outputs (the kernels are float32/64)."""
    def check(in_avals, out_avals, **params):
        out = _dt(out_avals[0])
        return None if out.kind == "f" else f"{name} of {out.name}"
    return check


for _p, _name in [(sp.lgamma_p, "lgamma"), (sp.digamma_p, "digamma"),
                  (sp.polygamma_p, "polygamma"), (sp.zeta_p, "zeta"), (sp.erfc_p, "erfc"),
                  (sp.erfcx_p, "erfcx"), (sp.erf_inv_p, "erf_inv"),
                  (sp.erfc_inv_p, "erfc_inv"), (sp.bessel_i0e_p, "bessel_i0e"),
                  (sp.bessel_i1e_p, "bessel_i1e"), (sp.igamma_p, "igamma"),
                  (sp.igammac_p, "igammac"), (sp.igamma_grad_a_p, "igamma_grad_a"),
                  (sp.regularized_incomplete_beta_p, "betainc")]:
    scalar_exprs[_p] = _kernel_rule(_name)
    limit("scalar", _p, _float_result(_name))


def _real_call(fn):
    def rule(ctx, x):
        return ctx.call(fn, x, dtype=ctx.out_avals[0].dtype)
    return rule


def _real_operand(why):
    def check(in_avals, out_avals, **params):
        return None if _dt(in_avals[0]).kind == "f" else why
    return check


for _p, _fn in [(sp.acos_p, "np.arccos"), (sp.asin_p, "np.arcsin"), (sp.atan_p, "np.arctan"),
                (sp.acosh_p, "np.arccosh"), (sp.asinh_p, "np.arcsinh"),
                (sp.atanh_p, "np.arctanh"), (sp.sinh_p, "np.sinh"), (sp.cosh_p, "np.cosh")]:
    scalar_exprs[_p] = _real_call(_fn)
    limit("scalar", _p, _real_operand(f"{_fn} of complex (host step: NumPy's C99 semantics)"))


def _next_after(ctx, x, y):
    return ctx.call("np.nextafter", x, y, dtype=_dt(x))


scalar_exprs[sp.next_after_p] = _next_after
limit("scalar", sp.next_after_p, lambda in_avals, out_avals: None if _dt(
    in_avals[0]) != np.float16 else "float16 next_after (values are carried as float32)")


def _is_inf(ctx, x):
    return ctx.call("np.isinf", x, dtype=np.bool_)


def _is_signed_inf(value):
    def rule(ctx, x):
        return ctx.op("eq", x, ctx.const(value, _dt(x)))
    return rule


scalar_exprs[sp.is_inf_p] = _is_inf
scalar_exprs[sp.is_pos_inf_p] = _is_signed_inf(np.inf)
scalar_exprs[sp.is_neg_inf_p] = _is_signed_inf(-np.inf)
