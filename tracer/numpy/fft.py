"""tracer.numpy.fft: NumPy's FFT API on the lax.fft primitive (XLA 'Fft').

``norm``: "backward" (default: no scaling forward, 1/n inverse), "ortho" (1/sqrt(n) both
ways) or "forward" (1/n forward, none inverse). ``n``/``s`` crop or zero-pad the input
along the transformed axes, as in NumPy. More than three axes are transformed in groups
of at most three (the primitive's limit).
"""
from __future__ import annotations

import math
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import get_aval
from tracer.numpy import manipulation as _m
from tracer.numpy.util import as_operand

_FFT, _IFFT, _RFFT, _IRFFT = 0, 1, 2, 3


def _aval(x):
    return get_aval(x)


def _check_norm(norm):
    if norm not in (None, "backward", "ortho", "forward"):
        raise ValueError(f"Invalid norm value {norm!r}; should be 'backward', 'ortho' or "
                         "'forward'")
    return norm or "backward"


def _resize(x, axis, n):
    """Crop or zero-pad ``x`` along ``axis`` to length ``n``."""
    size = _aval(x).shape[axis]
    if n == size:
        return x
    if n < size:
        return lax.slice_in_dim(x, 0, n, 1, axis)
    cfg = [(0, 0, 0)] * _aval(x).ndim
    cfg[axis] = (0, n - size, 0)
    return lax.pad(x, lax.full((), 0, _aval(x).dtype), cfg)


def _scale(x, n, norm, inverse):
    if norm == "backward":
        return x  # the primitive's IFFT already divides by n
    dt = _aval(x).dtype
    if norm == "ortho":
        f = np.sqrt(n) if inverse else 1 / np.sqrt(n)
    else:  # "forward"
        f = n if inverse else 1 / n
    return lax.mul(x, lax.full((), f, dt))


def _fftn_core(a, fft_type, axes, s, norm, name):
    norm = _check_norm(norm)
    a = as_operand(a, name)
    nd = _aval(a).ndim
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(operator.index(ax) % nd if nd else 0 for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axes {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: s {s} and axes {axes} must have the same length")
    if not axes:
        return a
    dt = _aval(a).dtype
    if fft_type == _RFFT:
        if dtypes.is_complex(dt):
            raise TypeError(f"{name}: the input must be real, got {dt.name}")
        if not dtypes.is_floating(dt):
            a = lax.convert_element_type(a, dtypes.default_float_dtype())
    elif not dtypes.is_complex(dt):
        a = lax.convert_element_type(
            a, dtypes.complex_dtype_for(dt if dtypes.is_floating(dt) else
                                        dtypes.default_float_dtype()))
    lengths = list(s) if s is not None else None
    if fft_type == _IRFFT:
        if lengths is None:
            lengths = [_aval(a).shape[ax] for ax in axes]
            lengths[-1] = 2 * (lengths[-1] - 1)
        if lengths[-1] < 1:
            raise ValueError(f"{name}: invalid number of data points ({lengths[-1]}) along "
                             f"axis {axes[-1]}")
        for ax, n in zip(axes[:-1], lengths[:-1]):
            a = _resize(a, ax, n)
        a = _resize(a, axes[-1], lengths[-1] // 2 + 1)
    else:
        if lengths is None:
            lengths = [_aval(a).shape[ax] for ax in axes]
        for ax, n in zip(axes, lengths):
            if n < 1:
                raise ValueError(f"{name}: invalid number of data points ({n}) along axis {ax}")
            a = _resize(a, ax, n)
    total = math.prod(lengths)
    # Move the transformed axes innermost, transform in groups of <= 3, move back.
    rest = [i for i in range(nd) if i not in axes]
    perm = rest + list(axes)
    x = lax.transpose(a, tuple(perm))
    k = len(axes)
    if k <= 3:
        x = lax.fft(x, fft_type, tuple(lengths))
    elif fft_type == _RFFT:
        # rfftn = rfft over the last axis, then full FFTs over the others.
        x = lax.fft(x, _RFFT, (lengths[-1],))
        x = _groups(x, _FFT, nd, k, k - 1, lengths)
    elif fft_type == _IRFFT:
        x = _groups(x, _IFFT, nd, k, k - 1, lengths)
        x = lax.fft(x, _IRFFT, (lengths[-1],))
    else:
        x = _groups(x, fft_type, nd, k, k, lengths)
    inverse = fft_type in (_IFFT, _IRFFT)
    x = _scale(x, total, norm, inverse)
    inv_perm = tuple(int(i) for i in np.argsort(perm))
    return lax.transpose(x, inv_perm)


def _transform_group(x, fft_type, nd, k, lo, hi, lengths):
    """Transform transformed-axes [lo, hi) (positions counted among the last k axes)."""
    base = nd - k
    inner = list(range(base + lo, base + hi))
    others = [i for i in range(nd) if i not in inner]
    perm = others + inner
    y = lax.transpose(x, tuple(perm))
    y = lax.fft(y, fft_type, tuple(lengths[lo:hi]))
    return lax.transpose(y, tuple(int(i) for i in np.argsort(perm)))


def _groups(x, fft_type, nd, k, count, lengths):
    """Transform the first ``count`` of the last ``k`` axes in groups of at most three."""
    for hi in range(count, 0, -3):
        x = _transform_group(x, fft_type, nd, k, max(0, hi - 3), hi, lengths)
    return x


def fft(a, n=None, axis=-1, norm=None):
    """``numpy.fft.fft``: 1-D discrete Fourier transform along ``axis``."""
    return _fftn_core(a, _FFT, (axis,), None if n is None else (n,), norm, "fft")


def ifft(a, n=None, axis=-1, norm=None):
    """``numpy.fft.ifft``: inverse 1-D transform along ``axis``."""
    return _fftn_core(a, _IFFT, (axis,), None if n is None else (n,), norm, "ifft")


def rfft(a, n=None, axis=-1, norm=None):
    """``numpy.fft.rfft``: 1-D transform of real input (n//2 + 1 outputs)."""
    return _fftn_core(a, _RFFT, (axis,), None if n is None else (n,), norm, "rfft")


def irfft(a, n=None, axis=-1, norm=None):
    """``numpy.fft.irfft``: inverse of ``rfft`` (real output of length n)."""
    return _fftn_core(a, _IRFFT, (axis,), None if n is None else (n,), norm, "irfft")


def fftn(a, s=None, axes=None, norm=None):
    """``numpy.fft.fftn``: n-D transform over ``axes`` (default: all, or the last len(s))."""
    return _fftn_core(a, _FFT, axes, s, norm, "fftn")


def ifftn(a, s=None, axes=None, norm=None):
    """``numpy.fft.ifftn``: inverse n-D transform."""
    return _fftn_core(a, _IFFT, axes, s, norm, "ifftn")


def rfftn(a, s=None, axes=None, norm=None):
    """``numpy.fft.rfftn``: n-D transform of real input (last axis halved)."""
    return _fftn_core(a, _RFFT, axes, s, norm, "rfftn")


def irfftn(a, s=None, axes=None, norm=None):
    """``numpy.fft.irfftn``: inverse of ``rfftn``."""
    return _fftn_core(a, _IRFFT, axes, s, norm, "irfftn")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """``numpy.fft.fft2``: 2-D transform over the last two axes."""
    return fftn(a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """``numpy.fft.ifft2``: inverse 2-D transform."""
    return ifftn(a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """``numpy.fft.rfft2``: 2-D transform of real input."""
    return rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """``numpy.fft.irfft2``: inverse of ``rfft2``."""
    return irfftn(a, s, axes, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """``numpy.fft.hfft``: the FFT of a Hermitian-symmetric signal (real output)."""
    from tracer.numpy.ufuncs import conjugate
    norm = _check_norm(norm)
    a = as_operand(a)
    nn = 2 * (_aval(a).shape[axis] - 1) if n is None else n
    swapped = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]
    return irfft(conjugate(a), nn, axis, swapped)


def ihfft(a, n=None, axis=-1, norm=None):
    """``numpy.fft.ihfft``: inverse of ``hfft``."""
    from tracer.numpy.ufuncs import conjugate
    norm = _check_norm(norm)
    swapped = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]
    return conjugate(rfft(a, n, axis, swapped))


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of ``fft`` output (static ``n``). ``device`` (the Array
    API's keyword) is accepted and ignored: there is one device, the CPU."""
    n = operator.index(n)
    dt = dtypes.canonicalize_dtype(dtype) if dtype is not None else dtypes.default_float_dtype()
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    from tracer.core import Array
    return lax.div(Array(np.asarray(k, dt)), lax.full((), n * d, dt)) if not \
        hasattr(d, "aval") else lax.div(Array(np.asarray(k, dt)),
                                        lax.mul(lax.full((), n, dt), d))


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of ``rfft`` output (static ``n``). ``device`` (the Array
    API's keyword) is accepted and ignored: there is one device, the CPU."""
    n = operator.index(n)
    dt = dtypes.canonicalize_dtype(dtype) if dtype is not None else dtypes.default_float_dtype()
    from tracer.core import Array
    return lax.div(Array(np.arange(0, n // 2 + 1, dtype=dt)), lax.full((), n * d, dt))


def fftshift(x, axes=None):
    """Shift the zero frequency to the center (a roll by n//2)."""
    x = as_operand(x)
    nd = _aval(x).ndim
    axes = tuple(range(nd)) if axes is None else ((axes,) if isinstance(axes, int) else axes)
    for ax in axes:
        x = _roll(x, _aval(x).shape[ax] // 2, ax % nd)
    return x


def ifftshift(x, axes=None):
    """Inverse of ``fftshift`` (a roll by -(n//2))."""
    x = as_operand(x)
    nd = _aval(x).ndim
    axes = tuple(range(nd)) if axes is None else ((axes,) if isinstance(axes, int) else axes)
    for ax in axes:
        x = _roll(x, -(_aval(x).shape[ax] // 2), ax % nd)
    return x


def _roll(x, shift, axis):
    n = _aval(x).shape[axis]
    if n == 0:
        return x
    shift %= n
    if shift == 0:
        return x
    a = lax.slice_in_dim(x, n - shift, n, 1, axis)
    b = lax.slice_in_dim(x, 0, n - shift, 1, axis)
    return lax.concatenate([a, b], axis)
