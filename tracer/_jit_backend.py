"""The bridge from ``jit`` to the compiler: ``run`` executes a traced program, ``lower``
returns the object behind ``jitted.lower(...)``.

Until the Numba backend (``lowering`` + ``numba_backend``) takes over, a jitted program is
interpreted: its jaxpr runs equation by equation through the NumPy impls.
"""
from __future__ import annotations

from tracer.core import new_base_main
from tracer.jaxpr import ClosedJaxpr, eval_jaxpr


def run(closed: ClosedJaxpr, args, name: str):
    with new_base_main():
        return eval_jaxpr(closed.jaxpr, closed.consts, *args)


class Lowered:
    def __init__(self, traced, wrapped):
        self.traced = traced
        self.wrapped = wrapped

    def as_text(self) -> str:
        return f"# jaxpr of {self.traced.name}\n{self.traced.jaxpr}"

    def compile(self):
        return self.wrapped


def lower(traced, wrapped):
    return Lowered(traced, wrapped)
