"""Error classes a user sees when a traced value is used where a concrete one is needed.

Names and meaning follow ``jax.errors``.
"""
from __future__ import annotations


class TracerError(Exception):
    pass


class ConcretizationTypeError(TracerError, TypeError):
    """A concrete value was needed but a traced (abstract) value was found."""

    def __init__(self, tracer, context: str = ""):
        aval = getattr(tracer, "aval", None)
        what = aval.str_short() if aval is not None else type(tracer).__name__
        msg = (f"Abstract tracer value encountered where a concrete value is expected: "
               f"a traced array {what}{' ' + context if context else ''}.\n"
               "The value depends on a function argument being traced (by jit, vmap or "
               "make_jaxpr), so its value is not known while tracing.\n"
               "Ways out: use lax.cond / lax.switch / lax.while_loop / lax.fori_loop instead "
               "of Python control flow on traced values; mark the argument static with "
               "jit(f, static_argnums=...) / static_argnames=...; or compute the value with "
               "NumPy outside the traced function.")
        super().__init__(msg)


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool(x)`` / ``if x:`` on a traced value."""

    def __init__(self, tracer):
        super().__init__(tracer, "was converted to bool (e.g. by `if`, `while`, `and`, `or`, "
                                 "`not`)")


class TracerIntegerConversionError(ConcretizationTypeError, IndexError):
    """``int(x)`` / ``operator.index(x)`` on a traced value."""

    def __init__(self, tracer):
        super().__init__(tracer, "was converted to a Python int (e.g. by int(), range() or "
                                 "use as a static index or shape)")


class TracerArrayConversionError(TracerError, TypeError):
    """``np.asarray(x)`` on a traced value."""

    def __init__(self, tracer):
        aval = getattr(tracer, "aval", None)
        what = aval.str_short() if aval is not None else type(tracer).__name__
        super().__init__(
            f"The traced array {what} was passed to a NumPy function (np.asarray / __array__). "
            "NumPy cannot operate on traced values. Use tracer.numpy (import tracer.numpy as tnp) "
            "instead of numpy inside transformed functions, or move the NumPy call outside.")


class UnexpectedTracerError(TracerError):
    """A tracer was used after the transformation that created it had finished."""

    def __init__(self, tracer, detail: str = ""):
        aval = getattr(tracer, "aval", None)
        what = aval.str_short() if aval is not None else "?"
        super().__init__(
            f"Encountered an unexpected tracer {type(tracer).__name__}({what}). It was created "
            "inside a transformed function (jit, grad, vmap, ...) and escaped it, for example "
            "by being stored in a global, a closure or an object attribute, and is now used "
            "outside of it. Return values from the transformed function instead of storing "
            f"them as side effects.{' ' + detail if detail else ''}")
