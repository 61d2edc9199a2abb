"""The random-number cases recorded from JAX into tests/data/random_jax_{x64,x32}.json.

One table for both sides: ``tools/gen_random_jax.py`` runs each case with JAX (``m`` holds
``jax.random``, ``jax.numpy`` and ``jax.lax``) and writes the results; tests/test_random.py
runs the same case with ``tracer.random``, ``tracer.numpy`` and ``lax`` and compares bit for
bit. A case is ``f(m, key)`` with ``key = m.random.PRNGKey(seed)``; its record is named
``f"{case}({seed})"`` (``fold_in`` cases: ``fold_in(seed,7)``). This module imports neither
JAX nor tracer.
"""
from __future__ import annotations

import numpy as np

SEEDS = [0, 42, 2 ** 31 - 1, 123456789]

_GRID = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def _arr(m, x, dtype=None):
    return m.np.asarray(np.asarray(x, dtype))


# Cases recorded in both modes (x64 and x32): their dtypes exist without x64.
CASES = {
    "PRNGKey": lambda m, k: k,
    "split": lambda m, k: m.random.split(k),
    "split3": lambda m, k: m.random.split(k, 3),
    "split_shape": lambda m, k: m.random.split(k, (2, 3)),
    "fold_in": lambda m, k: m.random.fold_in(k, 7),
    "fold_in_big": lambda m, k: m.random.fold_in(k, 2 ** 31 + 5),
    "bits32": lambda m, k: m.random.bits(k, (7,), "uint32"),
    "bits8": lambda m, k: m.random.bits(k, (2, 5), "uint8"),
    "bits16": lambda m, k: m.random.bits(k, (5,), "uint16"),
    "uniform32": lambda m, k: m.random.uniform(k, (2, 3), "float32"),
    "uniform_minmax32": lambda m, k: m.random.uniform(k, (4,), "float32", -2.0, 3.0),
    "uniform_minmax32_64": lambda m, k: m.random.uniform(k, (64,), "float32", -2.0, 3.0),
    "uniform_minmax32_wide": lambda m, k: m.random.uniform(k, (64,), "float32", -1e3, 1e-3),
    "uniform_minmax16": lambda m, k: m.random.uniform(k, (16,), "float16", -2.0, 3.0),
    "uniform_arr32": lambda m, k: m.random.uniform(
        k, (3, 4), "float32", _arr(m, [[-1.0], [0.0], [2.0]], "float32"),
        _arr(m, [1.0, 2.0, 3.0, 4.0], "float32")),
    "randint32": lambda m, k: m.random.randint(k, (8,), -5, 10, "int32"),
    "randint8": lambda m, k: m.random.randint(k, (8,), 0, 256, "uint8"),
    "randint_arr": lambda m, k: m.random.randint(k, (2, 3), _arr(m, [[0], [-5]], "int32"),
                                                 _arr(m, [3, 10, 100], "int32"), "int32"),
    "bernoulli": lambda m, k: m.random.bernoulli(k, 0.3, (10,)),
    "bernoulli_arr": lambda m, k: m.random.bernoulli(k, _arr(m, [0.1, 0.5, 0.9], "float32")),
    "permutation": lambda m, k: m.random.permutation(k, 10),
    "permutation_axis1": lambda m, k: m.random.permutation(
        k, _arr(m, np.arange(12.0).reshape(3, 4), "float32"), axis=1),
    "permutation_indep": lambda m, k: m.random.permutation(
        k, _arr(m, np.arange(12.0).reshape(3, 4), "float32"), axis=1, independent=True),
    "choice_int": lambda m, k: m.random.choice(k, 10, (6,)),
    "choice_arr": lambda m, k: m.random.choice(k, _arr(m, [1.5, 2.5, 3.5, 4.5], "float32"),
                                               (2, 3)),
    "choice_p": lambda m, k: m.random.choice(
        k, 5, (8,), p=_arr(m, [0.1, 0.2, 0.3, 0.2, 0.2], "float32")),
    "choice_noreplace": lambda m, k: m.random.choice(k, 10, (4,), replace=False),
    "choice_noreplace_p": lambda m, k: m.random.choice(
        k, 6, (3,), replace=False, p=_arr(m, [0.1, 0.2, 0.3, 0.2, 0.1, 0.1], "float32")),
    "choice_axis1": lambda m, k: m.random.choice(
        k, _arr(m, np.arange(12.0).reshape(3, 4), "float32"), (2,), axis=1),
    "categorical": lambda m, k: m.random.categorical(
        k, _arr(m, [0.1, 1.0, -2.0, 0.5], "float32")),
    "categorical_batch": lambda m, k: m.random.categorical(k, _arr(m, _GRID, "float32")),
    "categorical_axis0": lambda m, k: m.random.categorical(k, _arr(m, _GRID, "float32"),
                                                           axis=0),
    "categorical_shape": lambda m, k: m.random.categorical(k, _arr(m, _GRID, "float32"),
                                                           shape=(2, 3)),
    "categorical_noreplace": lambda m, k: m.random.categorical(
        k, _arr(m, _GRID, "float32"), shape=(2, 3), replace=False),
    "normal32": lambda m, k: m.random.normal(k, (6,), "float32"),
    "normal_c64": lambda m, k: m.random.normal(k, (4,), "complex64"),
    "permutation_arr": lambda m, k: m.random.permutation(
        k, m.np.arange(12.0).reshape(4, 3)),
}

# Cases that need 64-bit dtypes (recorded with x64 only).
CASES_X64 = {
    "bits64": lambda m, k: m.random.bits(k, (3,), "uint64"),
    "bits64_2d": lambda m, k: m.random.bits(k, (2, 3), "uint64"),
    "uniform64": lambda m, k: m.random.uniform(k, (2, 3), "float64"),
    "uniform_minmax64": lambda m, k: m.random.uniform(k, (64,), "float64", -2.0, 3.0),
    "uniform_minmax64_wide": lambda m, k: m.random.uniform(k, (64,), "float64", -1e3, 1e-3),
    "uniform_arr64": lambda m, k: m.random.uniform(
        k, (3, 4), "float64", _arr(m, [[-1.0], [0.0], [2.0]]), _arr(m, [1.0, 2.0, 3.0, 4.0])),
    "uniform16": lambda m, k: m.random.uniform(k, (5,), "float16"),
    "randint64": lambda m, k: m.random.randint(k, (5,), -1000, 1000, "int64"),
    "randint_u32": lambda m, k: m.random.randint(k, (6,), 0, 2 ** 32 - 1, "uint32"),
    "randint_big64": lambda m, k: m.random.randint(k, (6,), -2 ** 62, 2 ** 62, "int64"),
    "normal64": lambda m, k: m.random.normal(k, (6,), "float64"),
    "normal_batch64": lambda m, k: m.random.normal(k, (2, 3, 4), "float64"),
    "normal_many64": lambda m, k: m.random.normal(k, (512,), "float64"),
    "normal_c128": lambda m, k: m.random.normal(k, (4,), "complex128"),
}

# Float32 normals: XLA's float32 log is not NumPy's, so these agree to a few ulps only.
CASES_ULPS = {
    "normal_many32": lambda m, k: m.random.normal(k, (512,), "float32"),
}

# Default dtypes (seed 0 only).
DEFAULTS = {
    "default_uniform": lambda m, k: m.random.uniform(k, (3,)),
    "default_normal": lambda m, k: m.random.normal(k, (3,)),
    "default_randint": lambda m, k: m.random.randint(k, (3,), 0, 100),
    "default_bits": lambda m, k: m.random.bits(k, (3,)),
}


def record_name(case, seed):
    return f"{case}({seed},7)" if case == "fold_in" else f"{case}({seed})"


# lax.rng_bit_generator (x64 only): each state form x algorithm x output dtype x shape.
# The states exercise a 64-bit counter that wraps (u32_4b), and Philox's 128-bit counter
# carrying into its high word, which for a u64[2] state is the key (u64_2a).
RBG_STATES = {
    "u32_4a": ([1, 2, 3, 4], "uint32"),
    "u32_4b": ([0xDEADBEEF, 0x12345678, 0xFFFFFFFE, 0xFFFFFFFF], "uint32"),
    "u64_2a": ([7, 2 ** 64 - 3], "uint64"),
    "u64_2b": ([0x0123456789ABCDEF, 5], "uint64"),
}
RBG_ALGORITHMS = ("RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX")
RBG_DTYPES = ("uint8", "uint16", "uint32", "uint64")
RBG_SHAPES = ((), (1,), (5,), (4, 3), (3, 5), (2, 3, 1), (0,))


def rbg_name(state, alg, dtype, shape):
    return f"rbg[{state}|{alg}|{dtype}|{'x'.join(map(str, shape)) or 'scalar'}]"


def rbg_cases():
    """{record name: f(m)} returning (new_state, bits)."""
    out = {}
    for sname, (words, sdt) in RBG_STATES.items():
        for alg in RBG_ALGORITHMS:
            for dt in RBG_DTYPES:
                for shape in RBG_SHAPES:
                    def f(m, words=words, sdt=sdt, alg=alg, dt=dt, shape=shape):
                        state = m.np.asarray(np.array(words, sdt))
                        return m.lax.rng_bit_generator(state, shape, np.dtype(dt),
                                                       getattr(m.lax.RandomAlgorithm, alg))
                    out[rbg_name(sname, alg, dt, shape)] = f
    return out


def encode(value):
    """A JSON record of an array: dtype, shape and the flat values (complex as [re, im])."""
    v = np.asarray(value)
    flat = v.ravel()
    values = [[float(z.real), float(z.imag)] for z in flat] if v.dtype.kind == "c" \
        else flat.tolist()
    return {"dtype": v.dtype.name, "shape": list(v.shape), "values": values}


def decode(record):
    """The NumPy array of a record."""
    dt = np.dtype(record["dtype"])
    if dt.kind == "c":
        vals = np.array(record["values"], np.float64).reshape(-1, 2)
        flat = (vals[:, 0] + 1j * vals[:, 1]).astype(dt)
    else:
        flat = np.array(record["values"], dtype=dt)
    return flat.reshape(record["shape"])
