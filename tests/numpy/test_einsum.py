"""einsum / einsum_path against NumPy: explicit and implicit outputs, ellipses with
broadcasting, repeated labels (diagonals), the interleaved sublist form, several
operands with opt_einsum's order; dtypes; one dot_general per pair; grad / vmap / jit."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import assert_matches


def _r(rng, *shape):
    return rng.standard_normal(shape)


SPECS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("iij->j", [(2, 2, 3)]), ("iji->j", [(2, 3, 2)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("i,i->", [(4,), (4,)]), ("i,j->ij", [(2,), (3,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]), ("ij,ij->ij", [(2, 1), (2, 3)]),
    ("ba", [(2, 3)]), ("ij,kl->", [(2, 2), (3, 3)]), ("...", [(2, 3)]), ("i...->...", [(3, 2)]),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 2)]), ("a,a,a->a", [(3,), (3,), (3,)]),
    ("Ab,ba->", [(2, 3), (3, 2)]), ("...i,...i", [(2, 3), (3,)]), ("ij->ji", [(2, 3)]),
    ("ij,j->i", [(3, 4), (4,)]), ("abcd,dcba->", [(2, 3, 2, 2), (2, 2, 3, 2)]),
    ("i,i,i,i->i", [(2,), (2,), (2,), (2,)]), ("ij,jk,kl,lm->im", [(2, 3), (3, 4), (4, 2), (2, 3)]),
    ("iii->i", [(2, 2, 2)]), ("ij,ij->", [(0, 3), (0, 3)]),
]


@pytest.mark.parametrize("spec,shapes", SPECS, ids=[s for s, _ in SPECS])
def test_einsum_against_numpy(spec, shapes, rng):
    ops = [_r(rng, *s) for s in shapes]
    assert_matches(tnp.einsum(spec, *ops), np.einsum(spec, *ops))
    for opt in (False, "greedy", "optimal"):
        assert_matches(tnp.einsum(spec, *ops, optimize=opt), np.einsum(spec, *ops))


def test_dtypes_and_options(rng):
    a = rng.integers(-3, 4, (3, 3))
    assert_matches(tnp.einsum("ij,jk", a, a), np.einsum("ij,jk", a, a))
    z = _r(rng, 2, 3) + 1j * _r(rng, 2, 3)
    assert_matches(tnp.einsum("ij,kj->ik", z, z), np.einsum("ij,kj->ik", z, z))
    f32 = _r(rng, 2, 3).astype(np.float32)
    assert tnp.einsum("ij,kj->ik", f32, f32).dtype == np.float32
    assert tnp.einsum("ij,kj->ik", f32, np.ones((2, 3))).dtype == np.float64
    out = tnp.einsum("ij,kj->ik", f32, f32, preferred_element_type=np.float64)
    assert out.dtype == np.float64
    assert_matches(tnp.einsum(_r(rng, 2, 3), [0, 1], _r(rng, 3, 4), [1, 2], [0, 2]).shape,
                   np.zeros((2, 4)).shape, check_dtype=False)
    x, y = _r(rng, 2, 3), _r(rng, 3, 4)
    assert_matches(tnp.einsum(x, [0, Ellipsis], y, [Ellipsis, 2]),
                   np.einsum(x, [0, Ellipsis], y, [Ellipsis, 2]))


def test_lowering_is_dot_general():
    jaxpr = tracer.make_jaxpr(lambda a, b, c: tnp.einsum("ij,jk,kl->il", a, b, c))(
        np.ones((2, 30)), np.ones((30, 40)), np.ones((40, 3)))
    prims = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert prims.count("dot_general") == 2, prims
    # opt_einsum contracts the small outer pair first (cost 2*30*... vs 30*40*3).
    path, report = tnp.einsum_path("ij,jk,kl->il", np.ones((2, 30)), np.ones((30, 40)),
                                   np.ones((40, 3)))
    want, _ = np.einsum_path("ij,jk,kl->il", np.ones((2, 30)), np.ones((30, 40)),
                             np.ones((40, 3)), optimize="greedy")
    assert path == want
    assert "Optimized" in report or "scaling" in report.lower()


def test_errors():
    with pytest.raises(ValueError, match="einsum"):
        tnp.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="subscripts"):
        tnp.einsum("ijk", np.ones((2, 3)))
    with pytest.raises(ValueError, match="operands"):
        tnp.einsum("ij,jk", np.ones((2, 3)))
    with pytest.raises(ValueError, match="does not appear"):
        tnp.einsum("ij->k", np.ones((2, 3)))


@pytest.mark.parametrize("spec,shapes", [("ij,jk->ik", [(2, 3), (3, 2)]),
                                         ("ii->i", [(3, 3)]),
                                         ("bij,bjk,bk->bi", [(2, 2, 3), (2, 3, 2), (2, 2)]),
                                         ("...i,...i->...", [(2, 3), (3,)])])
def test_grads_vmap(spec, shapes, rng):
    ops = tuple(_r(rng, *s) for s in shapes)
    check_grads(lambda *o: tnp.einsum(spec, *o), ops, order=2, atol=1e-6, rtol=1e-6)
    batched = tuple(_r(rng, 2, *s) for s in shapes)
    check_vmap(lambda *o: tnp.einsum(spec, *o), batched)


def test_jit(rng):
    a, b = _r(rng, 2, 3), _r(rng, 3, 4)
    check_jit(lambda a, b: tnp.einsum("ij,jk->ki", a, b), (a, b), rtol=1e-14, atol=1e-14)
