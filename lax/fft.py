"""Fast Fourier transforms (XLA Operation semantics, 'Fft').

``fft(x, fft_type, fft_lengths)`` transforms the ``len(fft_lengths)`` (1 to 3) innermost
dimensions: FFT / IFFT complex -> complex (IFFT scaled by 1/n), RFFT real -> complex with
the last dimension n//2 + 1, IRFFT complex -> real of length ``fft_lengths[-1]`` (the
input's last dimension must be fft_lengths[-1]//2 + 1). jvp: the transform is linear.
Transposes follow JAX's convention for complex cotangents. Evaluated with numpy.fft (under
jit as a host step: Numba cannot run numpy.fft inside compiled code).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax import elementwise as ew
from lax import shapes


class FftType:
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


_NAMES = {"FFT": 0, "IFFT": 1, "RFFT": 2, "IRFFT": 3, "fft": 0, "ifft": 1, "rfft": 2,
          "irfft": 3}


def fft(x, fft_type, fft_lengths):
    """XLA 'Fft' over the innermost ``len(fft_lengths)`` dimensions (see module doc)."""
    if isinstance(fft_type, str):
        fft_type = _NAMES[fft_type]
    fft_type = int(fft_type)
    fft_lengths = tuple(operator.index(n) for n in fft_lengths)
    aval = get_aval(x)
    if fft_type == FftType.RFFT and dtypes.is_complex(aval.dtype):
        raise TypeError(f"fft: RFFT needs a real operand, got {aval.str_short()}")
    if fft_type in (FftType.FFT, FftType.IFFT, FftType.IRFFT) and \
            not dtypes.is_complex(aval.dtype):
        x = ew.convert_element_type(x, dtypes.complex_dtype_for(
            aval.dtype if dtypes.is_inexact(aval.dtype) else dtypes.default_float_dtype()))
    elif fft_type == FftType.RFFT and not dtypes.is_floating(aval.dtype):
        x = ew.convert_element_type(x, dtypes.default_float_dtype())
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths)


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise ValueError(f"fft: 1 to 3 fft_lengths are supported, got {fft_lengths}")
    if x.ndim < k:
        raise ValueError(f"fft: operand {x.str_short()} has fewer than {k} dimensions")
    inner = x.shape[-k:]
    if fft_type == FftType.RFFT:
        if not dtypes.is_floating(x.dtype):
            raise TypeError(f"fft: RFFT needs a floating operand, got {x.str_short()}")
        if inner != fft_lengths:
            raise ValueError(f"fft: RFFT fft_lengths {fft_lengths} must equal the innermost "
                             f"dimensions of {x.str_short()}")
        return ShapedArray(x.shape[:-1] + (fft_lengths[-1] // 2 + 1,),
                           dtypes.complex_dtype_for(x.dtype))
    if not dtypes.is_complex(x.dtype):
        raise TypeError(f"fft: FFT/IFFT/IRFFT need a complex operand, got {x.str_short()}")
    if fft_type == FftType.IRFFT:
        want = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        if inner != want:
            raise ValueError(f"fft: IRFFT with fft_lengths {fft_lengths} needs innermost "
                             f"dimensions {want}, got {x.str_short()}")
        return ShapedArray(x.shape[:-1] + (fft_lengths[-1],), dtypes.real_dtype(x.dtype))
    if inner != fft_lengths:
        raise ValueError(f"fft: fft_lengths {fft_lengths} must equal the innermost dimensions "
                         f"of {x.str_short()}")
    return ShapedArray(x.shape, x.dtype)


def _fft_impl(x, *, fft_type, fft_lengths):
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == FftType.FFT:
        out = np.fft.fftn(x, s=fft_lengths, axes=axes)
        dt = x.dtype
    elif fft_type == FftType.IFFT:
        out = np.fft.ifftn(x, s=fft_lengths, axes=axes)
        dt = x.dtype
    elif fft_type == FftType.RFFT:
        out = np.fft.rfftn(x, s=fft_lengths, axes=axes)
        dt = dtypes.complex_dtype_for(x.dtype)
    else:
        out = np.fft.irfftn(x, s=fft_lengths, axes=axes)
        dt = dtypes.real_dtype(x.dtype)
    return np.asarray(out).astype(dt, copy=False)


def _fft_transpose(cts, x, *, fft_type, fft_lengths):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    k = len(fft_lengths)
    if fft_type in (FftType.FFT, FftType.IFFT):
        # The DFT matrix is symmetric: the transpose of FFT is FFT (IFFT likewise).
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    if fft_type == FftType.RFFT:
        # rfft = truncate(fft(complex(x))): transpose = real(fft(zero-pad(ct))).
        n = fft_lengths[-1]
        cta = get_aval(ct)
        pad_cfg = [(0, 0, 0)] * (cta.ndim - 1) + [(0, n - cta.shape[-1], 0)]
        padded = shapes.pad(ct, ew._const(ct, 0), pad_cfg)
        return [ew.real(fft_p.bind(padded, fft_type=FftType.FFT, fft_lengths=fft_lengths))]
    # IRFFT: the Hermitian extension counts the interior frequencies twice.
    y = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    ya = get_aval(y)
    n = ya.shape[-1]
    odd = fft_lengths[-1] % 2
    weights = np.concatenate([[1.0], np.full(n - 2 + odd, 2.0), np.ones(1 - odd)])[:n]
    w = np.asarray(weights / math.prod(fft_lengths), dtype=ya.dtype)
    from tracer.core import Array
    wb = shapes.broadcast_in_dim(Array(w), ya.shape, (ya.ndim - 1,))
    del k
    return [ew.conj(ew.mul(y, wb))]


def _fft_batch(axis_data, vals, dims, **params):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return [fft_p.bind(x, **params)], [0]


fft_p = Primitive("fft")
fft_p.def_abstract_eval(_fft_abstract_eval)
fft_p.def_impl(_fft_impl)
ad.deflinear(fft_p, _fft_transpose)
batching.primitive_batchers[fft_p] = _fft_batch
