"""tracer.scipy: SciPy-style APIs (``jax.scipy``) on tracer: ``special`` (special
functions) and ``linalg``."""
from tracer.scipy import special  # noqa: F401
