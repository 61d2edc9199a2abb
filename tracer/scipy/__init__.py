"""tracer.scipy: SciPy-style APIs (``jax.scipy``) on tracer: ``special`` (special
functions) and ``linalg``. Both are attributes after ``import tracer``."""
from tracer.scipy import linalg, special  # noqa: F401
