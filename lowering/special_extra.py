"""Lowering rules of lax/special_extra.py: the kernel-backed functions call the scalar
kernels of ``lax/special_extra_kernels.py`` inside the fused loops -- the code their eager
impls run through Numba ufuncs -- so jit and eager agree bit for bit. hyp1f1, hyp2f1,
owens_t, wofz and the parameter derivatives of 1F1 and 2F1 have no rule: they evaluate
SciPy (or NumPy series) and run as host steps.
"""
from __future__ import annotations

from lax import special_extra as sx
from lowering.rules import limit, scalar_exprs
from lowering.special import _float_result, _kernel_rule

_KERNELS = "lax.special_extra_kernels"

for _p in (sx.expn_p, sx.expi_p, sx.dawsn_p, sx.si_p, sx.ci_p, sx.fresnel_s_p,
           sx.fresnel_c_p, sx.spence_p):
    scalar_exprs[_p] = _kernel_rule(_p.name, _KERNELS)
    limit("scalar", _p, _float_result(_p.name))
