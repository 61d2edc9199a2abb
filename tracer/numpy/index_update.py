"""``x.at[idx].set(y)`` and friends (JAX's functional index updates). Scatter-based
implementations are provided by the indexing family; this module holds the reference
object users see."""
from __future__ import annotations


class IndexUpdateRef:
    """The object returned by ``x.at[idx]``."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, **kwargs):
        from tracer.numpy.indexing import getitem
        return getitem(self.array, self.index)
