"""Lowering of lax/tokens.py. Token primitives have no loop-IR rule: ``create_token`` and
``after_all`` run as host steps (their NumPy impls return ``Token()`` values), as does
``dce_sink`` (it computes nothing). What this module adds is the jit pipeline's side of
``dce_sink``: it is effectful, so the pipeline's DCE and CSE keep it, and with it the
computation of its operand."""
from __future__ import annotations

from lax.tokens import dce_sink_p
from lowering.passes import effectful_primitives

effectful_primitives.add(dce_sink_p)
