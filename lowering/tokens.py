"""Lowering of lax/tokens.py. Token primitives have no loop-IR rule: ``create_token`` and
``after_all`` run as host steps (their NumPy impls return ``Token()`` values), as does
``dce_sink`` (it computes nothing). ``dce_sink`` is effectful, so the pipeline's DCE and
CSE keep it, and with it the computation of its operand: lax/tokens.py registers it in
``partial_eval.effectful_primitives``, the one registry the pipeline's passes read (the
line below repeats it for readers of this package)."""
from __future__ import annotations

from lax.tokens import dce_sink_p
from lowering.passes import effectful_primitives

effectful_primitives.add(dce_sink_p)
