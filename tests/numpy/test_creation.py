"""Array creation, grids, windows and I/O of tracer.numpy against NumPy."""
from __future__ import annotations

import io

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.core import Array
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import assert_matches

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


CASES = [
    ("tri", (3,)), ("tri", (3, 5, 1)), ("tri", (4, 2, -1)), ("vander", (np.arange(1, 5),)),
    ("vander", (np.array([1.5, -2.0, 3.0]), 5, True)), ("vander", (np.arange(3), 0)),
    ("meshgrid", (np.arange(3), np.arange(4.0))),
    ("indices", ((2, 3),)), ("ix_", (np.arange(2), np.array([True, False, True]))),
    ("tril_indices", (4,)), ("tril_indices", (3, 1, 5)), ("triu_indices", (4, -1)),
    ("triu_indices", (3, 0, 2)), ("diag_indices", (3, 3)),
    ("logspace", (0.0, 2.0, 5)), ("logspace", (1.0, 3.0, 4, False, 2.0)),
    ("logspace", (np.array([0.0, 1.0]), np.array([2.0, 3.0]), 3)),
    ("geomspace", (1.0, 1000.0, 4)), ("geomspace", (-2.0, -32.0, 5)),
    ("geomspace", (2.0, 32.0, 5, False)), ("geomspace", (1j, 16j, 5)),
    ("geomspace", (np.array([1.0, 10.0]), 100.0, 3, True, None, 1)),
    ("bartlett", (6,)), ("blackman", (7,)), ("hamming", (5,)), ("hanning", (1,)),
    ("hanning", (0,)), ("kaiser", (8, 5.0)), ("kaiser", (5, 0.0)),
    ("eye", (3, 4, 1)), ("identity", (2,)), ("linspace", (0.0, 1.0, 5)),
    ("arange", (2, 9, 3)), ("full", ((2, 2), 3.5)), ("zeros_like", (np.ones((2, 3)),)),
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_against_numpy(name, args):
    want = getattr(np, name)(*args)
    got = getattr(tnp, name)(*args)
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_matches(g, w, rtol=1e-12, atol=1e-14)
    else:
        assert_matches(got, want, rtol=1e-12, atol=1e-14)


def test_meshgrid_options():
    x, y, z = np.arange(2), np.arange(3.0), np.arange(4)
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            want = np.meshgrid(x, y, z, indexing=indexing, sparse=sparse)
            got = tnp.meshgrid(x, y, z, indexing=indexing, sparse=sparse)
            for g, w in zip(got, want):
                assert_matches(g, w)
    for g, w in zip(tnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        assert_matches(g, w)


def test_index_helpers():
    a = np.ones((3, 4))
    for g, w in zip(tnp.tril_indices_from(a, 1), np.tril_indices_from(a, 1)):
        assert_matches(g, w)
    for g, w in zip(tnp.triu_indices_from(a), np.triu_indices_from(a)):
        assert_matches(g, w)
    for g, w in zip(tnp.diag_indices_from(np.ones((2, 2, 2))),
                    np.diag_indices_from(np.ones((2, 2, 2)))):
        assert_matches(g, w)
    for g, w in zip(tnp.mask_indices(3, tnp.triu, 1), np.mask_indices(3, np.triu, 1)):
        assert_matches(g, w)
    r, c = tnp.mask_indices(3, tnp.triu, 1, size=5)
    np.testing.assert_array_equal(r, [0, 0, 1, 0, 0])


def test_fromfunction_and_readers(tmp_path):
    assert_matches(tnp.fromfunction(lambda i, j: i * 10 + j, (2, 3)),
                   np.fromfunction(lambda i, j: i * 10 + j, (2, 3)))
    buf = np.arange(5, dtype=np.int32).tobytes()
    assert_matches(tnp.frombuffer(buf, dtype=np.int32), np.frombuffer(buf, np.int32))
    assert_matches(tnp.fromstring("1 2 3", dtype=float, sep=" "), np.array([1.0, 2.0, 3.0]))
    assert_matches(tnp.fromiter(range(4), dtype=np.int64), np.arange(4))
    p = tmp_path / "a.bin"
    np.arange(6.0).tofile(p)
    assert_matches(tnp.fromfile(p, dtype=np.float64), np.arange(6.0))
    x = tnp.arange(6.0).reshape(2, 3)
    tnp.save(tmp_path / "x.npy", x)
    y = tnp.load(tmp_path / "x.npy")
    assert isinstance(y, Array)
    assert_matches(y, np.arange(6.0).reshape(2, 3))
    tnp.savez(tmp_path / "z.npz", x, b=x + 1)
    with tnp.load(tmp_path / "z.npz") as z:
        assert_matches(tnp.asarray(z["b"]), np.arange(6.0).reshape(2, 3) + 1)
    assert_matches(tnp.from_dlpack(np.arange(3.0)), np.arange(3.0))


def test_kaiser_and_i0_grads():
    check_grads(lambda b: tnp.kaiser(6, b), (np.array(2.5),), order=1)
    check_grads(lambda s: tnp.geomspace(s, 10.0 * s, 4), (np.array(2.0),), order=1)
    check_grads(lambda v: tnp.vander(v, 4), (np.array([0.5, -1.5, 2.0]),), order=2)


def test_creation_vmap_and_jit(rng):
    v = rng.standard_normal((3, 4))
    check_vmap(lambda r: tnp.vander(r, 3), (v,))
    check_vmap(lambda s, e: tnp.logspace(s, e, 4), (v[:, 0], v[:, 1]))
    check_jit(lambda s: (tnp.geomspace(s, 8.0, 4), tnp.tri(3, 4, 1), tnp.kaiser(5, s)),
              (np.array(1.5),), rtol=1e-14, atol=1e-15)


def test_32_bit_mode_results(x32):
    x = np.linspace(-1, 1, 12).astype(np.float32).reshape(3, 4)
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    outs = [tnp.tri(3), tnp.diag(x), tnp.cumsum(xi), tnp.argsort(x), tnp.median(x),
            tnp.unique(xi, return_counts=True)[1], tnp.bincount(xi.ravel()),
            tnp.histogram(x)[0], tnp.frexp(x)[1], tnp.unravel_index(xi, (3, 4))[0],
            tnp.geomspace(1.0, 8.0, 4), tnp.kaiser(5, 2.0), tnp.indices((2, 3)),
            tnp.searchsorted(x[0], x[1]), tnp.einsum("ij,kj", x, x)]
    for o in outs:
        assert not np.asarray(o).dtype.name.endswith("64"), np.asarray(o).dtype
    assert_matches(tnp.cumsum(xi, axis=1), np.cumsum(xi, axis=1).astype(np.int32))
    assert_matches(tnp.median(x, axis=0), np.median(x, axis=0).astype(np.float32))


def test_empty_and_full_like():
    assert_matches(tnp.empty((2, 3)), np.zeros((2, 3)))
    assert_matches(tnp.empty_like(np.ones(3, np.int8)), np.zeros(3, np.int8))
    assert_matches(tnp.full_like(np.ones((2, 2)), 7, dtype=np.int32), np.full((2, 2), 7, np.int32))
    assert_matches(tnp.full_like(np.ones(3), np.arange(3.0)), np.arange(3.0))
    old = tnp.get_printoptions()["precision"]
    try:
        tnp.set_printoptions(precision=3)
        assert str(tnp.array([1.23456])) == "[1.235]"
    finally:
        tnp.set_printoptions(precision=old)


def test_array_of_strings_names_the_supported_dtypes():
    with pytest.raises(TypeError, match=r"array: cannot convert str with dtype <U3.*float32"
                                        r".*bfloat16"):
        tnp.array("abc")
    with pytest.raises(TypeError, match="numeric array"):
        tnp.array(np.array(["a", "b"]))
