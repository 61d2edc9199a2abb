"""Debugging callbacks (``jax.debug``): ``print`` and ``callback`` show run-time values
from inside jitted, vmapped and differentiated code, once per evaluation. Both bind
``lax.callbacks.debug_callback_p`` (an effectful primitive: never removed by DCE)."""
from lax.callbacks import debug_callback as callback, debug_print as print  # noqa: A001

__all__ = ["callback", "print"]
