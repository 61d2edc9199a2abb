"""tracer.random: bit-exact agreement with JAX's default PRNG (values recorded once from
JAX 0.10 into tests/data), reproducibility under jit and vmap, statistics, bad input."""
import json
import os

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer import random

DATA = os.path.join(os.path.dirname(__file__), "data")
SEEDS = [0, 42, 2 ** 31 - 1, 123456789]


def _load(mode):
    with open(os.path.join(DATA, f"random_jax_{mode}.json")) as f:
        return json.load(f)


def _check(expected, got):
    got = np.asarray(got)
    assert got.dtype.name == expected["dtype"]
    assert list(got.shape) == expected["shape"]
    np.testing.assert_array_equal(got.ravel(), np.array(expected["values"], expected["dtype"]))


CASES = {
    "PRNGKey": lambda k, s: random.PRNGKey(s),
    "split": lambda k, s: random.split(k),
    "split3": lambda k, s: random.split(k, 3),
    "fold_in": lambda k, s: random.fold_in(k, 7),
    "bits32": lambda k, s: random.bits(k, (7,), "uint32"),
    "bits8": lambda k, s: random.bits(k, (2, 5), "uint8"),
    "bits16": lambda k, s: random.bits(k, (5,), "uint16"),
    "uniform32": lambda k, s: random.uniform(k, (2, 3), "float32"),
    "uniform_minmax32": lambda k, s: random.uniform(k, (4,), "float32", -2.0, 3.0),
    "randint32": lambda k, s: random.randint(k, (8,), -5, 10, "int32"),
    "randint8": lambda k, s: random.randint(k, (8,), 0, 256, "uint8"),
    "bernoulli": lambda k, s: random.bernoulli(k, 0.3, (10,)),
    "permutation": lambda k, s: random.permutation(k, 10),
}
CASES_X64 = {
    "bits64": lambda k, s: random.bits(k, (3,), "uint64"),
    "uniform64": lambda k, s: random.uniform(k, (2, 3), "float64"),
    "randint64": lambda k, s: random.randint(k, (5,), -1000, 1000, "int64"),
    "uniform16": lambda k, s: random.uniform(k, (5,), "float16"),
}


def _name(case, seed):
    return f"fold_in({seed},7)" if case == "fold_in" else f"{case}({seed})"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(CASES) + sorted(CASES_X64))
def test_bits_match_jax_x64(case, seed):
    data = _load("x64")
    fn = {**CASES, **CASES_X64}[case]
    _check(data[_name(case, seed)], fn(random.PRNGKey(seed), seed))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bits_match_jax_x32(case, seed, x32):
    data = _load("x32")
    _check(data[_name(case, seed)], CASES[case](random.PRNGKey(seed), seed))


def test_default_dtypes_match_jax(x32):
    data = _load("x32")
    k = random.PRNGKey(0)
    _check(data["default_uniform"], random.uniform(k, (3,)))
    _check(data["default_randint"], random.randint(k, (3,), 0, 100))
    _check(data["default_bits"], random.bits(k, (3,)))


@pytest.mark.parametrize("seed", SEEDS)
def test_normal_bits_match_jax(seed):
    data = _load("x64")
    for name, dt in [(f"normal32({seed})", "float32"), (f"normal64({seed})", "float64")]:
        e = data[name]
        got = np.asarray(random.normal(random.PRNGKey(seed), tuple(e["shape"]), dt))
        assert got.dtype == np.dtype(dt)
        np.testing.assert_array_equal(got, np.array(e["values"], dt))


def test_permutation_of_array_matches_jax():
    data = _load("x64")
    for seed in SEEDS:
        got = random.permutation(random.PRNGKey(seed), tnp.arange(12.0).reshape(4, 3))
        _check(data[f"permutation_arr({seed})"], got)


def test_same_key_same_numbers_eager_jit_vmap():
    k = random.PRNGKey(3)
    eager = random.uniform(k, (5,))
    jitted = tracer.jit(lambda k: random.uniform(k, (5,)))(k)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    keys = random.split(k, 4)
    batched = tracer.vmap(lambda k: random.uniform(k, (5,)))(keys)
    looped = np.stack([np.asarray(random.uniform(keys[i], (5,))) for i in range(4)])
    np.testing.assert_array_equal(np.asarray(batched), looped)
    # Re-using a key gives the same numbers (the user's choice, never an error).
    np.testing.assert_array_equal(np.asarray(random.uniform(k, (5,))), np.asarray(eager))


def test_vmap_split_and_fold_in_match_loop():
    keys = random.split(random.PRNGKey(1), 3)
    got = tracer.vmap(random.split)(keys)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(got[i]), np.asarray(random.split(keys[i])))
    data = tnp.arange(3, dtype=tnp.uint32)
    got = tracer.vmap(random.fold_in)(keys, data)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(got[i]),
                                      np.asarray(random.fold_in(keys[i], i)))


def test_threefry_known_answer():
    # Known-answer vectors of Threefry-2x32-20 from the Random123 distribution.
    y = lax.threefry2x32(np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0))
    assert [int(np.asarray(v)) for v in y] == [0x6B200159, 0x99BA4EFE]
    m = np.uint32(0xFFFFFFFF)
    y = lax.threefry2x32(m, m, m, m)
    assert [int(np.asarray(v)) for v in y] == [0x1CB996FC, 0xBB002BE7]


def test_statistics():
    k = random.PRNGKey(0)
    u = np.asarray(random.uniform(k, (20000,)))
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    r = np.asarray(random.randint(k, (20000,), 3, 9))
    assert r.min() == 3 and r.max() == 8
    assert np.all(np.abs(np.bincount(r)[3:] / 20000 - 1 / 6) < 0.015)
    b = np.asarray(random.bernoulli(k, 0.25, (20000,)))
    assert abs(b.mean() - 0.25) < 0.01
    e = np.asarray(random.exponential(k, (20000,)))
    assert abs(e.mean() - 1) < 0.03 and e.min() >= 0
    g = np.asarray(random.gumbel(k, (20000,)))
    assert abs(g.mean() - np.euler_gamma) < 0.03
    lg = np.asarray(random.logistic(k, (20000,)))
    assert abs(lg.mean()) < 0.05 and abs(lg.var() - np.pi ** 2 / 3) < 0.2
    la = np.asarray(random.laplace(k, (20000,)))
    assert abs(la.mean()) < 0.05 and abs(la.var() - 2) < 0.15


def test_categorical_frequencies():
    logits = tnp.log(tnp.array([0.1, 0.2, 0.7]))
    s = np.asarray(random.categorical(random.PRNGKey(5), logits, shape=(20000,)))
    freq = np.bincount(s, minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.015)


def test_gamma_and_beta_moments():
    k = random.PRNGKey(2)
    for a in (0.5, 1.0, 3.0):
        g = np.asarray(random.gamma(k, a, (4000,)))
        assert g.min() > 0
        assert abs(g.mean() - a) < 0.1 * max(a, 1) and abs(g.var() - a) < 0.25 * max(a, 1)
    b = np.asarray(random.beta(k, 2.0, 5.0, (4000,)))
    assert abs(b.mean() - 2 / 7) < 0.02


def test_permutation_is_a_permutation():
    p = np.asarray(random.permutation(random.PRNGKey(9), 100))
    assert sorted(p.tolist()) == list(range(100))


def test_bad_keys_and_params():
    with pytest.raises(TypeError, match="PRNG key"):
        random.uniform(tnp.zeros(2), (3,))
    with pytest.raises(TypeError, match="PRNG key"):
        random.uniform(tnp.zeros(3, dtype=tnp.uint32), (3,))
    with pytest.raises(TypeError, match="seed"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match="scalar"):
        random.PRNGKey(np.arange(2))
    with pytest.raises(TypeError, match="floating"):
        random.uniform(random.PRNGKey(0), (2,), tnp.int32)
    with pytest.raises(ValueError, match="incompatible"):
        random.uniform(random.PRNGKey(0), (2,), minval=tnp.zeros(3))
    with pytest.raises(ValueError, match="random.normal: shape"):
        random.normal(random.PRNGKey(0), (-1,))
    # maxval <= minval gives minval (JAX's documented behaviour).
    r = random.randint(random.PRNGKey(0), (4,), 5, 5)
    np.testing.assert_array_equal(np.asarray(r), 5)


def test_rng_bit_generator_deterministic_and_advances():
    state = tnp.array([1, 2, 0, 0], dtype=tnp.uint32)
    s1, b1 = lax.rng_bit_generator(state, (4, 3), tnp.uint32)
    s1b, b1b = lax.rng_bit_generator(state, (4, 3), tnp.uint32)
    np.testing.assert_array_equal(np.asarray(b1), np.asarray(b1b))
    s2, b2 = lax.rng_bit_generator(s1, (4, 3), tnp.uint32)
    assert not np.array_equal(np.asarray(b1), np.asarray(b2))
    assert np.asarray(b1).dtype == np.uint32 and np.asarray(b1).shape == (4, 3)
    _, b8 = lax.rng_bit_generator(state, (5,), tnp.uint8, lax.RandomAlgorithm.RNG_PHILOX)
    assert np.asarray(b8).dtype == np.uint8
    states = tnp.stack([state, s1])
    sb, bb = tracer.vmap(lambda s: lax.rng_bit_generator(s, (3,), tnp.uint32))(states)
    np.testing.assert_array_equal(np.asarray(bb[0]),
                                  np.asarray(lax.rng_bit_generator(state, (3,), tnp.uint32)[1]))


def test_sampling_without_replacement():
    k = random.PRNGKey(0)
    s = np.asarray(random.categorical(k, tnp.zeros((2, 5)), axis=-1, shape=(3, 2),
                                      replace=False))
    assert s.shape == (3, 2)
    assert all(len(set(s[:, j])) == 3 for j in range(2))
    c = np.asarray(random.choice(k, 6, (6,), replace=False, p=tnp.ones(6) / 6))
    assert sorted(c.tolist()) == list(range(6))
    w = np.asarray(random.choice(k, 3, (20000,), p=tnp.array([0.2, 0.3, 0.5])))
    np.testing.assert_allclose(np.bincount(w, minlength=3) / 20000, [0.2, 0.3, 0.5], atol=0.015)
    with pytest.raises(ValueError, match="without"):
        random.categorical(k, tnp.zeros(3), shape=(4,), replace=False)
