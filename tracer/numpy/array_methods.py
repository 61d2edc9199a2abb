"""Operators and methods shared by ``Array`` and ``Tracer``, attached once to both classes
(JAX's ``_set_shaped_array_attributes``): ``x + y``, ``x @ y``, ``x[i]``, ``x.sum()``,
``x.reshape(...)``, ``x.T``, ``x.at[...]``..."""
from __future__ import annotations

import numpy as np

import lax
from lax.utils import eager_binary_op
from tracer.core import Array, Tracer, get_aval
from tracer.numpy import creation, indexing, manipulation, reductions, ufuncs


def _defer_to_unrecognized(binary):
    # Let other types (e.g. objects implementing __radd__) take over, as NumPy does.
    def op(self, other):
        if not isinstance(other, (Array, Tracer, np.ndarray, np.generic, bool, int, float,
                                  complex, list, tuple)):
            return NotImplemented
        return binary(self, other)
    return op


def _swap(f):
    return lambda x, y: f(y, x)


def _operator(fn, reflected=False):
    """The Array operator of the binary function ``fn`` (``__add__``, or ``__radd__``
    with ``reflected``): other types may take over, and where ``fn`` carries an eager
    fast path (``ufuncs._with_eager_path``) the operator carries its own."""
    op = _defer_to_unrecognized(_swap(fn) if reflected else fn)
    prim = getattr(fn, "eager_primitive", None)
    if prim is None:
        return op
    return eager_binary_op(prim, fn.__name__, op, fn.eager_kinds, swap=reflected)


_binary_ops = {
    "add": ufuncs.add, "sub": ufuncs.subtract, "mul": ufuncs.multiply,
    "truediv": ufuncs.true_divide, "floordiv": ufuncs.floor_divide, "mod": ufuncs.remainder,
    "pow": ufuncs.power, "matmul": manipulation.matmul, "and": ufuncs.bitwise_and,
    "or": ufuncs.bitwise_or, "xor": ufuncs.bitwise_xor, "lshift": ufuncs.left_shift,
    "rshift": ufuncs.right_shift, "divmod": ufuncs.divmod,
}


_comparisons = {
    "__eq__": ufuncs.equal, "__ne__": ufuncs.not_equal, "__lt__": ufuncs.less,
    "__le__": ufuncs.less_equal, "__gt__": ufuncs.greater, "__ge__": ufuncs.greater_equal,
}


def _getitem(self, idx):
    return indexing.getitem(self, idx)


def _astype(self, dtype, copy=False):
    return lax.convert_element_type(self, dtype)


def _reshape(self, *args, order="C"):
    shape = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
    return manipulation.reshape(self, shape, order)


def _transpose(self, *args):
    axes = None
    if len(args) == 1 and args[0] is not None and not isinstance(args[0], int):
        axes = args[0]
    elif args:
        axes = args
    return manipulation.transpose(self, axes)


def _T(self):
    return manipulation.transpose(self)


def _mT(self):
    return manipulation.matrix_transpose(self)


def _real(self):
    return ufuncs.real(self)


def _imag(self):
    return ufuncs.imag(self)


def _flatten(self, order="C"):
    return manipulation.reshape(self, (-1,), manipulation._index_order("flatten", order))


def _ravel(self, order="C"):
    return manipulation.ravel(self, order)


def _bool_checked_item(self, *args):
    if isinstance(self, Tracer):
        v = self._known_value()
        if v is None:
            from tracer.errors import ConcretizationTypeError
            raise ConcretizationTypeError(self, "was converted to a Python scalar by .item()")
        return np.asarray(v).item(*args)
    return self._value.item(*args)


class _IndexUpdateHelper:
    """``x.at[idx]``: functional updates (``.set``, ``.add``, ``.get``, ...)."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        from tracer.numpy import index_update
        return index_update.IndexUpdateRef(self.array, idx)


def _at(self):
    return _IndexUpdateHelper(self)


_methods = {
    "__getitem__": _getitem,
    "__neg__": ufuncs.negative, "__pos__": ufuncs.positive, "__abs__": ufuncs.absolute,
    "__invert__": ufuncs.invert,
    "astype": _astype, "reshape": _reshape, "transpose": _transpose, "ravel": _ravel,
    "flatten": _flatten, "squeeze": manipulation.squeeze, "swapaxes": manipulation.swapaxes,
    "clip": lambda self, min=None, max=None: manipulation.clip(self, min, max),
    "round": lambda self, decimals=0: ufuncs.round(self, decimals),
    "conj": ufuncs.conjugate, "conjugate": ufuncs.conjugate,
    "sum": reductions.sum, "prod": reductions.prod, "max": reductions.max,
    "min": reductions.min, "mean": reductions.mean, "var": reductions.var,
    "std": reductions.std, "any": reductions.any, "all": reductions.all,
    "argmax": reductions.argmax, "argmin": reductions.argmin, "ptp": reductions.ptp,
    "dot": manipulation.dot, "repeat": manipulation.repeat,
}


def _lazy(name):
    """A method forwarding to ``tracer.numpy.<name>`` (resolved at call time: those
    functions live in modules imported after this one)."""
    def method(self, *args, **kwargs):
        import tracer.numpy as tnp
        return getattr(tnp, name)(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"Same as ``tracer.numpy.{name}(self, ...)``."
    return method


for _name in ("argpartition", "argsort", "choose", "compress", "cumprod", "cumsum",
              "diagonal", "nonzero", "searchsorted", "sort", "take", "trace"):
    _methods[_name] = _lazy(_name)


def _view(self, dtype=None, type=None):
    """``x.view(dtype)``: reinterpret the bits (lax.bitcast_convert_type along the last
    axis for different widths, as NumPy's view does)."""
    if type is not None:
        raise NotImplementedError("view(type=...) is not supported")
    if dtype is None:
        return self
    from tracer.dtypes import as_np_dtype
    new = as_np_dtype(dtype)
    old = self.dtype
    if new.itemsize == old.itemsize:
        return lax.bitcast_convert_type(self, new)
    if self.ndim == 0:
        raise ValueError("view: changing the itemsize of a 0-d array is not supported")
    if new.itemsize < old.itemsize:
        out = lax.bitcast_convert_type(self, new)          # (..., n, ratio)
        return manipulation.reshape(out, self.shape[:-1] + (-1,))
    ratio = new.itemsize // old.itemsize
    if self.shape[-1] % ratio:
        raise ValueError(f"view: the last axis ({self.shape[-1]}) must be divisible by "
                         f"{ratio} to view {old} as {new}")
    x = manipulation.reshape(self, self.shape[:-1] + (self.shape[-1] // ratio, ratio))
    return lax.bitcast_convert_type(x, new)


_methods["view"] = _view


def _device(self):
    """The Array API's ``x.device``: 'cpu', the one device
    (``__array_namespace_info__().devices()``)."""
    return "cpu"


def _to_device(self, device, /, *, stream=None):
    """The Array API's ``x.to_device(device)``: ``x`` itself for 'cpu' (the one device);
    ValueError for any other device, or for a stream (the CPU has none)."""
    if device != "cpu":
        raise ValueError(f"to_device: unknown device {device!r}; the only device is 'cpu'")
    if stream is not None:
        raise ValueError(f"to_device: stream must be None on the CPU, got {stream!r}")
    return self


_methods["to_device"] = _to_device
_properties = {"T": _T, "mT": _mT, "real": _real, "imag": _imag, "at": _at,
               "device": _device}


def _install():
    for name, fn in _binary_ops.items():
        setattr(Array, f"__{name}__", _operator(fn))
        setattr(Array, f"__r{name}__", _operator(fn, reflected=True))
        setattr(Tracer, f"__{name}__", _defer_to_unrecognized(fn))
        setattr(Tracer, f"__r{name}__", _defer_to_unrecognized(_swap(fn)))
    for name, fn in _comparisons.items():
        setattr(Array, name, _operator(fn))
        setattr(Tracer, name, _defer_to_unrecognized(fn))
    for cls in (Array, Tracer):
        for name, fn in _methods.items():
            setattr(cls, name, fn)
        for name, fn in _properties.items():
            setattr(cls, name, property(fn))
        cls.__array_namespace__ = lambda self, api_version=None: __import__(
            "tracer.numpy", fromlist=["numpy"])
    Tracer.item = _bool_checked_item
    # Arrays stay unhashable despite defining __eq__.
    Array.__hash__ = None


_install()
