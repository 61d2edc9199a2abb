"""tracer.random and the random-bit primitives: bit-exact agreement with JAX (values
recorded from JAX 0.10 on CPU into tests/data by tools/gen_random_jax.py, cases in
tests/random_cases.py), reproducibility under jit and vmap, statistics, bad input."""
import json
import os
import types
from fractions import Fraction

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer import random

import random_cases as rc

DATA = os.path.join(os.path.dirname(__file__), "data")
SEEDS = rc.SEEDS
M = types.SimpleNamespace(random=random, np=tnp, lax=lax)   # what the case table runs on


def _load(mode):
    with open(os.path.join(DATA, f"random_jax_{mode}.json")) as f:
        return json.load(f)


def _check(expected, got):
    got = np.asarray(got)
    want = rc.decode(expected)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(rc.CASES) + sorted(rc.CASES_X64))
def test_bits_match_jax_x64(case, seed):
    data = _load("x64")
    fn = {**rc.CASES, **rc.CASES_X64}[case]
    _check(data[rc.record_name(case, seed)], fn(M, random.PRNGKey(seed)))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(rc.CASES))
def test_bits_match_jax_x32(case, seed, x32):
    data = _load("x32")
    _check(data[rc.record_name(case, seed)], rc.CASES[case](M, random.PRNGKey(seed)))


@pytest.mark.parametrize("mode", ["x64", "x32"])
def test_default_dtypes_match_jax(mode):
    tracer.config.update("enable_x64", mode == "x64")
    try:
        data = _load(mode)
        for name, f in rc.DEFAULTS.items():
            _check(data[name], f(M, random.PRNGKey(0)))
    finally:
        tracer.config.update("enable_x64", True)


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_normals_within_3_ulps_of_jax(seed):
    # XLA's float32 log (inside its log1p) is not NumPy's: a few ulps, most values exact.
    want = rc.decode(_load("x64")[rc.record_name("normal_many32", seed)])
    got = np.asarray(rc.CASES_ULPS["normal_many32"](M, random.PRNGKey(seed)))
    assert got.dtype == np.float32 and got.shape == want.shape
    ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert ulps.max() <= 3 and np.mean(ulps == 0) > 0.97


@pytest.mark.parametrize("case", ["uniform_minmax64", "uniform_minmax32_64",
                                  "uniform_minmax16", "normal64", "randint_big64",
                                  "choice_p", "categorical_batch", "bits64_2d"])
def test_recorded_bits_under_jit_of_vmap(case):
    # Compiled code, over a batch of keys, gives the recorded bits too.
    data = _load("x64")
    fn = {**rc.CASES, **rc.CASES_X64}[case]
    keys = tnp.stack([random.PRNGKey(s) for s in SEEDS])
    got = tracer.jit(tracer.vmap(lambda k: fn(M, k)))(keys)
    for i, seed in enumerate(SEEDS):
        _check(data[rc.record_name(case, seed)], got[i])


# --- uniform's fused multiply-add ---

def _fma_exact(a, b, c, dt):
    """Correctly rounded a * b + c (round half to even), by exact rationals."""
    out = []
    for x, y, z in zip(a, b, c):
        q = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        r = dt.type(float(q))          # a neighbour of the answer (double rounding)
        cands = [r, np.nextafter(r, dt.type(np.inf)), np.nextafter(r, dt.type(-np.inf))]
        bits = np.int64 if dt == np.float64 else np.int32
        out.append(min(cands, key=lambda t: (abs(Fraction(float(t)) - q),
                                             int(np.array(t).view(bits)) & 1)))
    return np.array(out, dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_uniform_fma_emulation_is_correctly_rounded(dt):
    rng = np.random.default_rng(0)
    dt = np.dtype(dt)
    nm = np.finfo(dt).nmant
    n = 400
    a = (rng.integers(0, 2 ** nm, n) * 2.0 ** -nm).astype(dt)        # uniform's floats
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(dt)
    c = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(dt)
    c[:50] = -(a[:50].astype(np.float64) * b[:50]).astype(dt)         # cancellation
    if dt == np.float32:
        # 3 * (2**23 + odd) is halfway between two float32s; +-2**-30 decides the side,
        # which rounding the float64 sum first would lose.
        a[50:100] = 3.0
        b[50:100] = 2 ** 23 + 2 * np.arange(50) + 1
        c[50:100] = np.where(np.arange(50) % 2, 2.0 ** -30, -2.0 ** -30)
    got = np.asarray(random._fma_emulated(tnp.asarray(a), tnp.asarray(b), tnp.asarray(c)))
    np.testing.assert_array_equal(got, _fma_exact(a, b, c, dt))


def test_uniform_gradient_in_its_bounds():
    # d/dminval = 1 - f and d/dmaxval = f, f the unit-interval sample: as JAX.
    k = random.PRNGKey(4)
    f = np.asarray(random.uniform(k, (6,)))
    g_lo, g_hi = tracer.grad(lambda lo, hi: tnp.sum(random.uniform(k, (6,), minval=lo,
                                                                    maxval=hi) * tnp.arange(6.)),
                             argnums=(0, 1))(-2.0, 3.0)
    np.testing.assert_allclose(float(g_lo), np.sum((1 - f) * np.arange(6)), rtol=1e-12)
    np.testing.assert_allclose(float(g_hi), np.sum(f * np.arange(6)), rtol=1e-12)


# --- lax.rng_bit_generator ---

RBG = rc.rbg_cases()


@pytest.mark.parametrize("state", sorted(rc.RBG_STATES))
@pytest.mark.parametrize("alg", rc.RBG_ALGORITHMS)
def test_rng_bit_generator_matches_jax(state, alg):
    data = _load("x64")
    for dt in rc.RBG_DTYPES:
        for shape in rc.RBG_SHAPES:
            name = rc.rbg_name(state, alg, dt, shape)
            new_state, bits = RBG[name](M)
            _check(data[name]["state"], new_state)
            _check(data[name]["bits"], bits)


@pytest.mark.parametrize("alg", rc.RBG_ALGORITHMS)
def test_rng_bit_generator_compiled_matches_jax(alg):
    data = _load("x64")
    for state in ("u32_4b", "u64_2a"):
        for dt in ("uint8", "uint32", "uint64"):
            shape = (4, 3)
            name = rc.rbg_name(state, alg, dt, shape)
            words, sdt = rc.RBG_STATES[state]
            f = tracer.jit(lambda s: lax.rng_bit_generator(
                s, shape, np.dtype(dt), getattr(lax.RandomAlgorithm, alg)))
            new_state, bits = f(tnp.asarray(np.array(words, sdt)))
            _check(data[name]["state"], new_state)
            _check(data[name]["bits"], bits)


def test_rng_bit_generator_philox_u64x3_state():
    # A u64[3] Philox state is (key, counter low, counter high); u64[2] uses the key as the
    # high word (XLA's expander reverses it), so [k, c, k] gives the bits of [k, c].
    data = _load("x64")
    for state in ("u64_2a", "u64_2b"):
        (k, c), _ = rc.RBG_STATES[state]
        s3 = tnp.asarray(np.array([k, c, k], np.uint64))
        for dt in rc.RBG_DTYPES:
            name = rc.rbg_name(state, "RNG_PHILOX", dt, (4, 3))
            new3, bits3 = lax.rng_bit_generator(s3, (4, 3), np.dtype(dt),
                                                lax.RandomAlgorithm.RNG_PHILOX)
            _check(data[name]["bits"], bits3)
            want2 = rc.decode(data[name]["state"])
            carry = int(want2[1]) < c       # the low word wrapped: the high word steps
            np.testing.assert_array_equal(np.asarray(new3),
                                          np.array([k, want2[1], k + carry], np.uint64))
    # The 128-bit counter carries within one call: blocks past 2**64 use high + 1.
    s = tnp.asarray(np.array([5, 2 ** 64 - 1, 9], np.uint64))
    new, bits = lax.rng_bit_generator(s, (8,), tnp.uint32, lax.RandomAlgorithm.RNG_PHILOX)
    np.testing.assert_array_equal(np.asarray(new), np.array([5, 1, 10], np.uint64))
    _, b0 = lax.rng_bit_generator(tnp.asarray(np.array([5, 0, 10], np.uint64)), (4,),
                                  tnp.uint32, lax.RandomAlgorithm.RNG_PHILOX)
    np.testing.assert_array_equal(np.asarray(bits)[4:], np.asarray(b0))


def test_rng_bit_generator_bad_states():
    alg = lax.RandomAlgorithm
    with pytest.raises(TypeError, match=r"RNG_THREE_FRY must be uint64\[2\] or uint32\[4\]"):
        lax.rng_bit_generator(tnp.zeros(3, tnp.uint64), (2,), algorithm=alg.RNG_THREE_FRY)
    with pytest.raises(TypeError, match=r"uint64\[2\], uint64\[3\] or uint32\[4\], got u32\[2\]"):
        lax.rng_bit_generator(tnp.zeros(2, tnp.uint32), (2,))
    with pytest.raises(TypeError, match="got f32"):
        lax.rng_bit_generator(tnp.zeros(4, tnp.float32), (2,))
    with pytest.raises(TypeError, match="unsigned integer type"):
        lax.rng_bit_generator(tnp.zeros(4, tnp.uint32), (2,), tnp.int32)
    with pytest.raises(ValueError, match="unknown algorithm 7"):
        lax.rng_bit_generator(tnp.zeros(4, tnp.uint32), (2,), algorithm=7)


def test_rng_bit_generator_vmap_is_a_loop_over_states():
    # Each state of a batch gives the bits it gives alone (JAX's rule instead draws one
    # batch from the first state; README "Differences").
    states = tnp.asarray(np.array([[1, 2], [3, 2 ** 63], [0, 0]], np.uint64))
    for alg in (lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX):
        f = lambda s: lax.rng_bit_generator(s, (2, 3), tnp.uint64, alg)
        new, bits = tracer.vmap(f, in_axes=1, out_axes=(1, 0))(states.T)
        for i in range(3):
            n_i, b_i = f(states[i])
            np.testing.assert_array_equal(np.asarray(new)[:, i], np.asarray(n_i))
            np.testing.assert_array_equal(np.asarray(bits)[i], np.asarray(b_i))


# --- lax.rng_uniform / lax.rng_normal under vmap ---

def test_vmap_of_rng_uniform_and_normal_uses_each_bound():
    lax.rng_seed(0)
    lo = tnp.array([0.0, 10.0, -5.0])
    hi = tnp.array([1.0, 11.0, 5.0])
    u = np.asarray(tracer.vmap(lambda a, b: lax.rng_uniform(a, b, (4000,)))(lo, hi))
    assert u.shape == (3, 4000)
    assert np.all(u >= np.asarray(lo)[:, None]) and np.all(u < np.asarray(hi)[:, None])
    np.testing.assert_allclose(u.mean(1), [0.5, 10.5, 0.0], atol=0.15)
    # An unbatched bound is shared; b <= a gives a (the documented choice).
    i = np.asarray(tracer.vmap(lambda a: lax.rng_uniform(a, 20, (50,)))(tnp.array([0, 19, 30])))
    assert i.dtype == np.int64 and i.shape == (3, 50)
    assert i[0].min() >= 0 and i[0].max() < 20 and np.all(i[1] == 19) and np.all(i[2] == 30)
    n = np.asarray(tracer.jit(tracer.vmap(lambda m, s: lax.rng_normal(m, s, (4000,)),
                                          in_axes=(0, None)))(lo, 2.0))
    np.testing.assert_allclose(n.mean(1), [0.0, 10.0, -5.0], atol=0.2)
    np.testing.assert_allclose(n.std(1), 2.0, rtol=0.05)
    # Nested vmap: batch dims of both levels.
    nested = tracer.vmap(tracer.vmap(lambda a, b: lax.rng_uniform(a, b, (2,))),
                         in_axes=(0, None))(tnp.zeros((2, 3)), tnp.ones(3))
    assert np.asarray(nested).shape == (2, 3, 2)
    with pytest.raises(TypeError, match="operands must be scalars"):
        lax.rng_uniform(tnp.zeros(2), 1.0, (3,))


# --- gamma / beta / dirichlet (own sampler: checked by their moments) ---

def test_gamma_beta_dirichlet_with_batch_shapes():
    k = random.PRNGKey(2)
    a = tnp.array([[0.5], [2.0], [5.0]])
    g = np.asarray(random.gamma(k, a, (3, 3000)))
    assert g.shape == (3, 3000) and g.min() > 0
    np.testing.assert_allclose(g.mean(1), [0.5, 2.0, 5.0], rtol=0.08)
    np.testing.assert_allclose(g.var(1), [0.5, 2.0, 5.0], rtol=0.2)
    b = np.asarray(random.beta(k, tnp.array([2.0, 1.0]), tnp.array([[5.0], [1.0]]),
                               (4000, 2, 2)))
    assert b.shape == (4000, 2, 2) and 0 <= b.min() and b.max() <= 1
    np.testing.assert_allclose(b.mean(0), [[2 / 7, 1 / 6], [2 / 3, 1 / 2]], atol=0.02)
    alpha = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0]])
    d = np.asarray(random.dirichlet(k, tnp.asarray(alpha), (2000, 2)))
    assert d.shape == (2000, 2, 3)
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-12)
    a0 = alpha.sum(-1, keepdims=True)
    np.testing.assert_allclose(d.mean(0), alpha / a0, atol=0.02)
    np.testing.assert_allclose(d.var(0), alpha * (a0 - alpha) / (a0 ** 2 * (a0 + 1)),
                               rtol=0.15)
    d1 = np.asarray(random.dirichlet(k, tnp.array([1.0, 1.0]), (5,)))   # a broadcast
    assert d1.shape == (5, 2)
    with pytest.raises(ValueError, match="does not broadcast to shape"):
        random.dirichlet(k, tnp.ones((2, 3)), (3,))
    # Under jit and vmap: the same numbers as eagerly.
    keys = random.split(k, 2)
    f = lambda k: random.dirichlet(k, tnp.asarray(alpha), (4, 2))
    np.testing.assert_allclose(np.asarray(tracer.jit(tracer.vmap(f))(keys)),
                               np.stack([np.asarray(f(keys[i])) for i in range(2)]),
                               rtol=1e-12)


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
