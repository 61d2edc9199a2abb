"""Decompositions, solves, FFT and sorting: against NumPy/SciPy, reconstruction
identities, check_grads with well-separated spectra, check_vmap, and edge cases."""
import re

import numpy as np
import pytest
import scipy.linalg as sla

import lax
import tracer
import tracer.numpy as tnp
import tracer.numpy.linalg as tla
import tracer.scipy.linalg as tsl
from tracer.test_util import check_grads, check_jit, check_vmap

rng = np.random.default_rng(0)


def _spd(n, dtype=np.float64, batch=()):
    a = rng.standard_normal(batch + (n, n))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(batch + (n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _mat(*shape, dtype=np.float64):
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


# ------------------------------------------- primitives --------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_cholesky_reconstructs(dtype):
    s = _spd(4, dtype, (2,))
    L = np.asarray(lax.linalg.cholesky(s))
    assert L.dtype == dtype
    np.testing.assert_allclose(L @ np.conj(np.swapaxes(L, -1, -2)), s, rtol=_tol(dtype),
                               atol=_tol(dtype) * 10)
    np.testing.assert_allclose(np.triu(L[0], 1), 0)


def test_cholesky_not_positive_definite_gives_nan():
    out = np.asarray(lax.linalg.cholesky(-np.eye(3)))
    assert np.isnan(out).all()


def test_cholesky_grads_and_vmap():
    s = _spd(3)
    check_grads(lax.linalg.cholesky, (s,), order=2)
    check_vmap(lax.linalg.cholesky, (_spd(3, batch=(3,)),))


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
def test_triangular_solve_against_scipy_and_grads(left_side, lower, transpose_a):
    a = _mat(4, 4)
    a = (np.tril(a) if lower else np.triu(a)) + 4 * np.eye(4)
    b = _mat(4, 3) if left_side else _mat(3, 4)
    x = np.asarray(lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower,
                                               transpose_a=transpose_a))
    op = a.T if transpose_a else a
    np.testing.assert_allclose(op @ x if left_side else x @ op, b, atol=1e-12)
    f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower,
                                                 transpose_a=transpose_a)
    check_grads(f, (a, b), order=1)
    check_vmap(f, (np.stack([a, 2 * a]), np.stack([b, b + 1])))
    check_vmap(f, (a, np.stack([b, b + 1])), in_axes=(None, 0))


def test_triangular_solve_singular_gives_inf_nan():
    x = np.asarray(lax.linalg.triangular_solve(np.zeros((2, 2)), np.ones((2, 1)),
                                               left_side=True, lower=True))
    assert np.isinf(x[0, 0]) and np.isnan(x[1, 0])


def test_triangular_solve_bad_shapes():
    with pytest.raises(ValueError, match="triangular_solve"):
        lax.linalg.triangular_solve(np.eye(3), np.ones((2, 2)), left_side=True)


def test_lu_reconstructs_and_grads():
    a = _mat(4, 4)
    lu_, piv, perm = (np.asarray(v) for v in lax.linalg.lu(a))
    L = np.tril(lu_, -1) + np.eye(4)
    U = np.triu(lu_)
    np.testing.assert_allclose(a[perm], L @ U, atol=1e-12)
    lu_s, piv_s = sla.lu_factor(a)
    np.testing.assert_allclose(lu_, lu_s, atol=1e-12)
    np.testing.assert_array_equal(piv, piv_s)
    check_grads(lambda a: lax.linalg.lu(a)[0], (a,), order=1)
    r = _mat(5, 3)
    lu_r, _, perm_r = (np.asarray(v) for v in lax.linalg.lu(r))
    Lr = np.tril(lu_r, -1)[:, :3] + np.eye(5, 3)
    np.testing.assert_allclose(r[perm_r], Lr @ np.triu(lu_r[:3]), atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_qr(shape, dtype):
    a = _mat(*shape, dtype=dtype)
    q, r = (np.asarray(v) for v in lax.linalg.qr(a, full_matrices=False))
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(q.shape[1]), atol=1e-12)
    check_grads(lambda a: lax.linalg.qr(a, full_matrices=False), (a,), order=1)
    qf, rf = lax.linalg.qr(a, full_matrices=True)
    assert np.asarray(qf).shape == (shape[0], shape[0])


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eigh(dtype):
    s = _spd(4, dtype)
    v, w = (np.asarray(t) for t in lax.linalg.eigh(s))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(s), atol=1e-10)
    np.testing.assert_allclose(s @ v, v * w, atol=1e-10)
    check_grads(lambda s: lax.linalg.eigh(s)[1], (s,), order=2)


def test_eigh_eigenvector_grads_real():
    s = np.diag([1.0, 2.0, 4.0]) + 0.1 * _spd(3)
    # Eigenvectors are defined up to sign: differentiate a sign-invariant function.
    check_grads(lambda s: tnp.abs(lax.linalg.eigh(s)[0]), (s,), order=1)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_svd(shape):
    a = _mat(*shape)
    u, s, vh = (np.asarray(t) for t in lax.linalg.svd(a, full_matrices=False))
    np.testing.assert_allclose((u * s) @ vh, a, atol=1e-12)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=1e-12)
    check_grads(lambda a: lax.linalg.svd(a, compute_uv=False), (a,), order=2)
    # u, vh are defined up to a sign per singular vector: check u diag(s) vh's derivative
    # and the sign-invariant |u|.
    check_grads(lambda a: tnp.abs(lax.linalg.svd(a, full_matrices=False)[0]), (a,), order=1)


def test_eig_host_and_eigenvalue_grads():
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    w, v = (np.asarray(t) for t in lax.linalg.eig(a))
    np.testing.assert_allclose(a @ v, v * w, atol=1e-12)
    g = tracer.grad(lambda a: tnp.real(lax.linalg.eig(
        a, compute_right_eigenvectors=False)[0]).sum())(a)
    np.testing.assert_allclose(np.asarray(g), np.eye(2), atol=1e-10)  # d trace / dA


def test_decompositions_vmap():
    for f, x in [(lambda a: lax.linalg.qr(a, full_matrices=False), _mat(3, 4, 3)),
                 (lambda a: lax.linalg.lu(a), _mat(3, 3, 3)),
                 (lambda a: lax.linalg.eigh(a)[1], _spd(3, batch=(2,))),
                 (lambda a: lax.linalg.svd(a, compute_uv=False), _mat(2, 3, 4))]:
        check_vmap(f, (x,))
        check_vmap(f, (np.moveaxis(x, 0, 2),), in_axes=2)


# ------------------------------------------ numpy.linalg --------------------------------------

def test_numpy_linalg_against_numpy():
    a = _mat(4, 4)
    b = _mat(4, 2)
    s = _spd(4)
    close = lambda x, y: np.testing.assert_allclose(np.asarray(x), y, rtol=1e-9, atol=1e-10)
    close(tla.solve(a, b), np.linalg.solve(a, b))
    close(tla.solve(a, b[:, 0]), np.linalg.solve(a, b[:, 0]))
    close(tla.inv(a), np.linalg.inv(a))
    close(tla.det(a), np.linalg.det(a))
    for x, y in zip(tla.slogdet(a), np.linalg.slogdet(a)):
        close(x, y)
    close(tla.pinv(b), np.linalg.pinv(b))
    close(tla.cholesky(s), np.linalg.cholesky(s))
    close(tla.eigvalsh(s), np.linalg.eigvalsh(s))
    close(tla.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False))
    close(tla.matrix_power(a, 3), np.linalg.matrix_power(a, 3))
    close(tla.matrix_power(a, -2), np.linalg.matrix_power(a, -2))
    close(tla.matrix_power(a, 0), np.eye(4))
    assert int(tla.matrix_rank(b @ b.T)) == 2
    close(tla.cond(a), np.linalg.cond(a))
    close(tla.lstsq(b, a[:, 0])[0], np.linalg.lstsq(b, a[:, 0], rcond=None)[0])
    close(tla.multi_dot([a, b, b.T, a]), a @ b @ b.T @ a)
    close(tla.cross(np.arange(3.0), np.ones(3)), np.cross(np.arange(3.0), np.ones(3)))
    for ord in [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]:
        close(tla.norm(a, ord), np.linalg.norm(a, ord))
    for ord in [None, 1, 2, 3, np.inf, -np.inf, 0]:
        close(tla.norm(a[0], ord), np.linalg.norm(a[0], ord))
    close(tla.norm(a, axis=1, keepdims=True), np.linalg.norm(a, axis=1, keepdims=True))


def test_numpy_linalg_singular_and_batched():
    assert float(tla.det(np.zeros((3, 3)))) == 0.0
    sign, logdet = tla.slogdet(np.zeros((2, 2)))
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert not np.isfinite(np.asarray(tla.inv(np.zeros((2, 2))))).all()
    a = _mat(3, 4, 4)
    np.testing.assert_allclose(np.asarray(tla.det(a)), np.linalg.det(a), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(tla.inv(a)), np.linalg.inv(a), rtol=1e-8, atol=1e-9)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tla.inv(np.ones((2, 3)))


def test_numpy_linalg_grads():
    a = _mat(3, 3) + 3 * np.eye(3)
    check_grads(tla.det, (a,), order=2)
    check_grads(tla.inv, (a,), order=1)
    check_grads(lambda a, b: tla.solve(a, b), (a, _mat(3, 2)), order=1)
    check_grads(lambda a: tla.slogdet(a)[1], (a,), order=2)
    check_grads(lambda a: tla.norm(a), (a,), order=2)
    np.testing.assert_allclose(np.asarray(tracer.grad(tla.det)(a)),
                               np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-9)


def _cofactors(a):
    n = a.shape[-1]
    return np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                      for j in range(n)] for i in range(n)])


def test_det_gradient_is_the_cofactor_matrix_even_when_singular():
    """Expected values: the cofactor matrix (JAX gives the same through its cofactor
    solve); the slogdet-based rule gave NaN at every singular matrix."""
    g = tracer.grad(tla.det)
    rank1 = np.array([[1., 2.], [2., 4.]])
    np.testing.assert_array_equal(np.asarray(g(rank1)), [[4., -2.], [-2., 1.]])
    rank2 = np.array([[1., 2, 3], [4, 5, 6], [7, 8, 9]])          # rank n - 1
    np.testing.assert_allclose(np.asarray(g(rank2)), _cofactors(rank2), atol=1e-12)
    for low in (np.zeros((3, 3)), np.ones((3, 3))):                # rank < n - 1: zero
        np.testing.assert_array_equal(np.asarray(g(low)), np.zeros((3, 3)))
    np.testing.assert_array_equal(np.asarray(g(np.array([[-0.0]]))), [[1.0]])
    stack = np.stack([rank1, _mat(2, 2), np.zeros((2, 2))])
    want = np.stack([g(m) for m in stack])
    np.testing.assert_allclose(np.asarray(tracer.vmap(g)(stack)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(tracer.jit(g)(rank2)), np.asarray(g(rank2)),
                               rtol=1e-12, atol=1e-12)
    # a value used twice: d/da det(a) * det(a) = 2 det(a) cof(a), zero at singular a
    np.testing.assert_allclose(np.asarray(tracer.grad(lambda a: tla.det(a) ** 2)(rank2)),
                               np.zeros((3, 3)), atol=1e-12)
    c = np.array([[1 + 1j, 2], [2, 4 - 1j]])
    _, t = tracer.jvp(tla.det, (c,), (np.ones((2, 2), complex),))
    assert complex(t) == pytest.approx(1.0)      # a + d - b - c


def test_scipy_linalg_against_scipy():
    a = _mat(4, 4)
    b = _mat(4, 2)
    s = _spd(4)
    close = lambda x, y: np.testing.assert_allclose(np.asarray(x), y, rtol=1e-9, atol=1e-9)
    close(tsl.cholesky(s), sla.cholesky(s))
    close(tsl.cho_solve(tsl.cho_factor(s), b), sla.cho_solve(sla.cho_factor(s), b))
    close(tsl.cho_solve(tsl.cho_factor(s, lower=True), b),
          sla.cho_solve(sla.cho_factor(s, lower=True), b))
    t = np.tril(a) + 3 * np.eye(4)
    for trans in (0, 1, 2, "T"):
        close(tsl.solve_triangular(t, b, trans=trans, lower=True),
              sla.solve_triangular(t, b, trans=trans, lower=True))
        if trans != "T":
            close(tsl.lu_solve(tsl.lu_factor(a), b, trans=trans),
                  sla.lu_solve(sla.lu_factor(a), b, trans=trans))
    for x, y in zip(tsl.lu(a), sla.lu(a)):
        close(x, y)
    close(tsl.expm(a), sla.expm(a))
    close(tsl.expm(20 * a), sla.expm(20 * a))
    close(tracer.jit(tsl.expm)(a), sla.expm(a))
    close(tsl.expm(np.zeros((3, 3))), np.eye(3))
    close(tsl.block_diag(np.ones((2, 2)), 3 * np.ones((1, 3))),
          sla.block_diag(np.ones((2, 2)), 3 * np.ones((1, 3))))
    close(tsl.solve(s, b, assume_a="pos"), np.linalg.solve(s, b))


# -------------------------------------------- FFT ------------------------------------------

F = tnp.fft


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_family_against_numpy(norm):
    x = rng.standard_normal((2, 3, 4, 5))
    xc = x + 1j * rng.standard_normal(x.shape)
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=1e-10, atol=1e-10)
    close(F.fft(xc, norm=norm), np.fft.fft(xc, norm=norm))
    close(F.ifft(xc, 7, axis=1, norm=norm), np.fft.ifft(xc, 7, axis=1, norm=norm))
    close(F.rfft(x, 6, norm=norm), np.fft.rfft(x, 6, norm=norm))
    close(F.irfft(xc, norm=norm), np.fft.irfft(xc, norm=norm))
    close(F.irfft(xc, 9, axis=0, norm=norm), np.fft.irfft(xc, 9, axis=0, norm=norm))
    close(F.fftn(xc, norm=norm), np.fft.fftn(xc, norm=norm))
    close(F.ifftn(xc, norm=norm), np.fft.ifftn(xc, norm=norm))
    close(F.rfftn(x, norm=norm), np.fft.rfftn(x, norm=norm))
    close(F.irfftn(xc, norm=norm), np.fft.irfftn(xc, norm=norm))
    close(F.fft2(xc, s=(2, 6), norm=norm), np.fft.fft2(xc, s=(2, 6), norm=norm))
    close(F.rfft2(x, norm=norm), np.fft.rfft2(x, norm=norm))
    close(F.irfft2(xc, norm=norm), np.fft.irfft2(xc, norm=norm))
    close(F.hfft(xc, norm=norm), np.fft.hfft(xc, norm=norm))
    close(F.ihfft(x, norm=norm), np.fft.ihfft(x, norm=norm))


def test_fft_helpers_and_dtypes():
    x = rng.standard_normal((4, 6))
    np.testing.assert_allclose(np.asarray(F.fftfreq(7, 0.5)), np.fft.fftfreq(7, 0.5))
    np.testing.assert_allclose(np.asarray(F.rfftfreq(8)), np.fft.rfftfreq(8))
    np.testing.assert_array_equal(np.asarray(F.fftshift(x)), np.fft.fftshift(x))
    np.testing.assert_array_equal(np.asarray(F.ifftshift(x, axes=1)), np.fft.ifftshift(x, axes=1))
    assert np.asarray(F.fft(x.astype(np.float32))).dtype == np.complex64
    assert np.asarray(F.irfft(F.rfft(x.astype(np.float32)))).dtype == np.float32
    assert np.asarray(F.fft(np.arange(4))).dtype == np.complex128
    with pytest.raises(ValueError, match="norm"):
        F.fft(x, norm="bad")
    with pytest.raises(TypeError, match="real"):
        F.rfft(x + 1j)


@pytest.mark.parametrize("fft_type,lengths,complex_in", [
    ("FFT", (8,), True), ("IFFT", (8,), True), ("RFFT", (8,), False), ("IRFFT", (8,), True),
    ("IRFFT", (9,), True), ("FFT", (3, 8), True), ("RFFT", (3, 8), False),
    ("IRFFT", (3, 8), True)])
def test_fft_primitive_grads_and_vmap(fft_type, lengths, complex_in):
    shape = (3,) * (len(lengths) == 1) + lengths[:-1] + (
        lengths[-1] // 2 + 1 if fft_type == "IRFFT" else lengths[-1],)
    x = rng.standard_normal(shape)
    if complex_in:
        x = x + 1j * rng.standard_normal(shape)
    f = lambda a: lax.fft(a, fft_type, lengths)
    check_grads(f, (x,), order=1)
    check_vmap(f, (np.stack([x, 2 * x]),))


def test_fft_under_jit_and_grad_of_power_spectrum():
    x = rng.standard_normal(16)
    check_jit(lambda a: F.rfft(a), (x,), atol=1e-12, rtol=1e-12)
    check_grads(lambda a: tnp.sum(tnp.abs(F.rfft(a)) ** 2), (x,), order=2)
    # Parseval: sum |X|^2 = n sum x^2 -> gradient 2 n x (with the rfft halving accounted).
    g = tracer.grad(lambda a: tnp.sum(tnp.abs(F.fft(a)) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * 16 * x, rtol=1e-10)


# -------------------------------------------- sort ------------------------------------------

def test_sort_nan_zero_ties_and_stability():
    x = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, -np.nan, 2.0, np.inf])
    out = np.asarray(lax.sort(x))
    np.testing.assert_array_equal(out[:7], [-np.inf, -0.0, 0.0, 1.0, 2.0, 3.0, np.inf])
    assert np.isnan(out[7:]).all()
    # -0.0 and 0.0 tie: a stable sort keeps their order.
    assert np.signbit(out[1]) and not np.signbit(out[2])
    keys = np.array([2, 1, 2, 0, 1])
    k, v = lax.sort_key_val(keys, np.arange(5.0))
    np.testing.assert_array_equal(np.asarray(v), [3, 1, 4, 0, 2])
    # Multi-key lexicographic sort.
    a, b = lax.sort([np.array([1, 0, 1, 0]), np.array([5, 7, 4, 6])], num_keys=2)
    np.testing.assert_array_equal(np.asarray(b), [6, 7, 4, 5])


def test_sort_complex_and_dimension():
    z = np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 + 0j])
    np.testing.assert_array_equal(np.asarray(lax.sort(z)), np.sort(z))
    m = rng.standard_normal((3, 4))
    np.testing.assert_array_equal(np.asarray(lax.sort(m, dimension=0)), np.sort(m, axis=0))


def test_sort_grad_and_vmap():
    x = rng.standard_normal(6)
    check_grads(lambda x: lax.sort(x), (x,), order=2)
    check_grads(lambda x: lax.sort_key_val(x, 2 * x)[1], (x,), order=1)
    check_vmap(lambda x: lax.sort(x), (rng.standard_normal((3, 5)),), in_axes=1)
    check_vmap(lambda k, v: lax.sort_key_val(k, v), (rng.standard_normal((3, 5)),
                                                     rng.standard_normal(5)), in_axes=(0, None))


def test_top_k():
    x = np.array([1, 3, 3, 2, 5], np.int32)
    v, i = lax.top_k(x, 3)
    np.testing.assert_array_equal(np.asarray(v), [5, 3, 3])
    np.testing.assert_array_equal(np.asarray(i), [4, 1, 2])  # ties: lower index first
    assert np.asarray(i).dtype == np.int32
    f = np.array([1.0, np.nan, 3.0])
    v, i = lax.top_k(f, 2)
    assert np.isnan(np.asarray(v)[0]) and np.asarray(i).tolist() == [1, 2]
    with pytest.raises(ValueError, match="k=4"):
        lax.top_k(np.ones(3), 4)
    m = rng.standard_normal((4, 6))
    check_grads(lambda m: lax.top_k(m, 2)[0], (m,), order=2)
    check_vmap(lambda m: lax.top_k(m, 2), (m,), in_axes=1)
    check_vmap(lambda m: lax.top_k(m, 2), (m,), in_axes=0)


# JAX 0.10 (x64) outputs of jax.lax.top_k(_TOPK_X, 2, axis=a), recorded as data: ties to
# the lower index, +NaN largest, -NaN smallest, +0.0 before -0.0.
_TOPK_X = np.array([[1., 3., 3., 2.], [np.nan, 1., -np.nan, 5.], [-0., 0., 0., -0.]])
_TOPK_JAX = {
    0: ([[np.nan, 3., 3., 5.], [1., 1., 0., 2.]], [[1, 0, 0, 1], [0, 1, 2, 0]]),
    1: ([[3., 3.], [np.nan, 5.], [0., 0.]], [[1, 2], [0, 3], [1, 2]]),
}


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _top_k_ref(x, k, axis, largest):
    """NumPy reference: a stable sort of IEEE totalOrder keys along axis."""
    xm = np.moveaxis(np.asarray(x), axis, -1)
    if xm.dtype.kind == "f":
        i = xm.view(f"i{xm.itemsize}")
        key = np.where(i < 0, i ^ np.iinfo(i.dtype).max, i)
    else:
        key = xm.astype(np.int64)
    idx = np.argsort(~key if largest else key, axis=-1, kind="stable")[..., :k]
    return (np.moveaxis(np.take_along_axis(xm, idx, -1), -1, axis),
            np.moveaxis(idx.astype(np.int32), -1, axis))


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_top_k_axis_matches_jax(axis):
    ev, ei = _TOPK_JAX[axis % 2]
    for fn in (lambda x: lax.top_k(x, 2, axis=axis),
               tracer.jit(lambda x: lax.top_k(x, 2, axis=axis))):
        v, i = fn(_TOPK_X)
        np.testing.assert_array_equal(_bits(v), _bits(np.array(ev)))
        np.testing.assert_array_equal(np.asarray(i), ei)
        assert np.asarray(i).dtype == np.int32


def test_top_k_axis_3d_ties_and_edges():
    y = np.arange(24.).reshape(2, 3, 4) % 5          # JAX 0.10: top_k(y, 2, axis=1)
    v, i = lax.top_k(y, 2, axis=1)
    np.testing.assert_array_equal(np.asarray(v), [[[4, 4, 2, 3], [3, 1, 1, 2]],
                                                  [[2, 3, 4, 4], [1, 2, 3, 3]]])
    np.testing.assert_array_equal(np.asarray(i), [[[1, 2, 0, 0], [2, 0, 1, 1]],
                                                  [[0, 0, 0, 1], [1, 1, 1, 2]]])
    assert lax.top_k(y, 0, axis=1)[0].shape == (2, 0, 4)
    assert tracer.jit(lambda y: lax.top_k(y, 0, axis=1))(y)[1].shape == (2, 0, 4)
    z = np.array([[7, 7, 7]], np.int32)             # size-1 axis: every index 0
    for fn in (lambda z: lax.top_k(z, 1, axis=0), tracer.jit(lambda z: lax.top_k(z, 1, axis=0))):
        v, i = fn(z)
        np.testing.assert_array_equal(np.asarray(v), z)
        np.testing.assert_array_equal(np.asarray(i), [[0, 0, 0]])
    e = np.zeros((0, 3))
    assert lax.top_k(e, 2, axis=1)[0].shape == (0, 2)
    assert tracer.jit(lambda e: lax.top_k(e, 2, axis=1))(e)[0].shape == (0, 2)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 3, 40])
def test_top_k_largest_and_smallest_against_numpy(largest, k):
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.0, -1.0])
    x = rng.choice(specials, size=(3, 45, 2))      # many ties; k=40 takes the sorting path
    xi = rng.integers(-3, 3, size=(3, 45, 2)).astype(np.int16)
    for a in (x, x.astype(np.float32), xi):
        ev, ei = _top_k_ref(a, k, 1, largest)
        f = lambda a: lax.top_k(a, k, axis=1, largest=largest)
        for fn in (f, tracer.jit(f)):
            v, i = fn(a)
            np.testing.assert_array_equal(_bits(v), _bits(ev))
            np.testing.assert_array_equal(np.asarray(i), ei)


def test_top_k_smallest_order_example():
    x = np.array([1., -0., 0., np.nan, -np.nan, np.inf, -np.inf, 0.])
    v, i = lax.top_k(x, 8, largest=False)
    # -NaN < -inf < -0.0 < +0.0 (ties in index order) < 1 < inf < +NaN
    assert np.asarray(i).tolist() == [4, 6, 1, 2, 7, 0, 5, 3]
    assert np.signbit(np.asarray(v)[0]) and np.isnan(np.asarray(v)[0])


def test_top_k_axis_grad_vmap_and_errors():
    m = rng.standard_normal((5, 3, 4))
    for kw in ({"axis": 0}, {"axis": 1}, {"axis": 1, "largest": False}):
        check_grads(lambda m: lax.top_k(m, 2, **kw)[0], (m,), order=2)
        for ax in (0, 1, 2):
            check_vmap(lambda m: lax.top_k(m, 2, **kw), (m,), in_axes=ax)
        check_jit(lambda m: lax.top_k(m, 2, **kw), (m,))
    # JAX 0.10: the gradient of a sum of top_k(axis=0) picks the selected rows, ties first
    g = tracer.grad(lambda x: lax.top_k(x, 2, axis=0)[0].sum())(
        np.array([[1., 2.], [1., 0.], [0., 5.]]))
    np.testing.assert_array_equal(np.asarray(g), [[1., 1.], [1., 0.], [0., 1.]])
    with pytest.raises(ValueError, match=r"top_k: k=5 .*axis 0.*f64\[3,4\]"):
        lax.top_k(_TOPK_X, 5, axis=0)
    with pytest.raises(ValueError, match=r"top_k: axis=2 is out of range.*\[-2, 2\)"):
        lax.top_k(_TOPK_X, 1, axis=2)
    with pytest.raises(ValueError, match="k=-1"):
        lax.top_k(_TOPK_X, -1)
    with pytest.raises(TypeError, match="at least one dimension"):
        lax.top_k(np.float64(1.0), 1)


@pytest.mark.parametrize("shapes", [
    [(3, 3), (3, 3), (3, 3)],                   # square: a wrong order is silent
    [(3, 4), (4, 3), (3, 4)],
    [(5,), (5, 5), (5, 2)],                     # vectors at the ends
    [(2, 30), (30, 3), (3, 40), (40, 2)],       # opt_einsum starts in the middle
    [(40, 2), (2, 30), (30, 3), (3,)],
    [(6, 2), (2, 6), (6, 2), (2, 6), (6, 1)],
])
def test_multi_dot_multiplies_in_chain_order_whatever_the_cheapest_path(shapes):
    # the products opt_einsum's path makes go to the end of the operand list: multiplied
    # in list order, [A, B, C] with (A @ B) first gave C @ (A @ B)
    rs = np.random.RandomState(0)
    mats = [rs.randn(*s) for s in shapes]
    want = np.linalg.multi_dot(mats)
    np.testing.assert_allclose(tla.multi_dot(mats), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tracer.jit(tla.multi_dot)(mats), want, rtol=1e-12, atol=1e-12)
    g = tracer.grad(lambda m: tnp.sum(tla.multi_dot(m)))(mats)
    eps = 1e-6
    for k in range(len(mats)):
        d = np.zeros_like(mats[k]).ravel()
        d[0] = eps
        moved = list(mats)
        moved[k] = mats[k] + d.reshape(mats[k].shape)
        fd = (np.sum(np.linalg.multi_dot(moved)) - np.sum(want)) / eps
        assert abs(np.asarray(g[k]).ravel()[0] - fd) < 1e-4 * max(1, abs(fd))


def test_multi_dot_bad_shapes_and_long_chains():
    """Mismatched or wrong-rank arrays are errors naming multi_dot and the shapes given
    (they used to surface as einsum's label errors); a chain longer than the alphabet
    works and matches NumPy, vectors at both ends included."""
    for arrays, match in [
            ([np.ones((2, 3)), np.ones((4, 5)), np.ones((5, 2))],
             r"multi_dot: the last dimension of each array must match.*\[\(2, 3\), \(4, 5\), "
             r"\(5, 2\)\]"),
            ([np.ones(3), np.ones((4, 2))], r"multi_dot: .*\[\(3,\), \(4, 2\)\]"),
            ([np.ones(3), np.ones((3, 3, 3)), np.ones(3)],
             r"multi_dot: the first and last arrays must be 1-D or 2-D"),
            ([np.ones((2, 2))], r"multi_dot: need at least two arrays")]:
        with pytest.raises(ValueError, match=match):
            tla.multi_dot(arrays)
        with pytest.raises(ValueError, match=match):
            tracer.jit(tla.multi_dot)(arrays)
    rs = np.random.RandomState(1)
    mats = [rs.randn(3, 3) / 2 for _ in range(30)]
    v = rs.randn(3)
    for chain in (mats, [v] + mats + [v]):
        np.testing.assert_allclose(np.asarray(tla.multi_dot(chain)), np.linalg.multi_dot(chain),
                                   rtol=1e-10, atol=1e-14)


def test_lu_solve_with_traced_pivots_under_vmap_and_jit():
    """lu_solve on a factorization that is not concrete (vmap over matrices, jit over the
    factors, grad through both): the pivots' permutation is built in the program, with
    SciPy's answer; a pivot table that swaps a row back and forth (repeated pivots) too."""
    rng = np.random.default_rng(3)
    A, b, B = rng.normal(size=(4, 5, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5, 2))
    for trans in (0, 1, 2):
        f = lambda a, v: tsl.lu_solve(tsl.lu_factor(a), v, trans=trans)   # noqa: E731
        for rhs in (b, B):
            want = np.stack([sla.lu_solve(sla.lu_factor(a), v, trans=trans)
                             for a, v in zip(A, rhs)])
            np.testing.assert_allclose(np.asarray(tracer.vmap(f)(A, rhs)), want, rtol=1e-12,
                                       atol=1e-13)
            np.testing.assert_allclose(np.asarray(tracer.jit(tracer.vmap(f))(A, rhs)), want,
                                       rtol=1e-12, atol=1e-13)
    lu, piv = sla.lu_factor(A[0])
    solve = tracer.jit(lambda l, p, v: tsl.lu_solve((l, p), v))
    np.testing.assert_allclose(np.asarray(solve(lu, piv, b[0])), sla.lu_solve((lu, piv), b[0]),
                               rtol=1e-12)
    # repeated and identity pivots: rows 0 <-> 2, then 1 <-> 2, then 2 stays
    lu3, piv3 = np.triu(rng.normal(size=(3, 3))) + 3 * np.eye(3), np.array([2, 2, 2], np.int32)
    want = sla.lu_solve((lu3, piv3), b[0, :3])
    np.testing.assert_allclose(np.asarray(solve(lu3, piv3, b[0, :3])), want, rtol=1e-12)
    loss = lambda a: tracer.vmap(lambda x, v: tsl.lu_solve(tsl.lu_factor(x), v))(a, b).sum()
    g = np.asarray(tracer.grad(loss)(A))
    E = np.zeros_like(A)
    E[1, 2, 3] = 1e-6
    fd = (float(loss(A + E)) - float(loss(A - E))) / 2e-6
    np.testing.assert_allclose(g[1, 2, 3], fd, rtol=1e-6)


@pytest.mark.parametrize("lower", [False, True])
def test_scipy_cholesky_reads_one_triangle_and_its_gradient_too(lower):
    """As SciPy (LAPACK's potrf), scipy.linalg.cholesky and cho_factor read only the
    triangle ``lower`` names: garbage in the other changes nothing (it was symmetrized in,
    a silently different factor), and the gradient of cho_solve's answer matches finite
    differences in every entry (0 in the unread triangle; it was symmetrized). NumPy's
    cholesky keeps symmetrizing, as jax.numpy does, and its gradient matches too."""
    rng = np.random.default_rng(4)
    M = rng.normal(size=(4, 4))
    P, b = M @ M.T + 4 * np.eye(4), rng.normal(size=4)
    Q = P.copy()
    junk = (np.triu_indices(4, 1) if lower else np.tril_indices(4, -1))
    Q[junk] = rng.normal(size=len(junk[0])) * 50
    c = np.asarray(tsl.cho_factor(Q, lower=lower)[0])
    tri = np.tril if lower else np.triu
    np.testing.assert_allclose(tri(c), tri(sla.cho_factor(Q, lower=lower)[0]), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(tsl.cholesky(Q, lower=lower)),
                               sla.cholesky(Q, lower=lower), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(np.asarray(tsl.cho_solve(tsl.cho_factor(Q, lower=lower), b)),
                               sla.cho_solve(sla.cho_factor(Q, lower=lower), b), rtol=1e-12)
    for f in (lambda p: tsl.cho_solve(tsl.cho_factor(p, lower=lower), b).sum(),
              lambda p: (tnp.linalg.cholesky(p) * np.arange(16.0).reshape(4, 4)).sum()):
        g = np.asarray(tracer.jit(tracer.grad(f))(P))
        fd = np.zeros_like(P)
        for i in range(4):
            for j in range(4):
                E = np.zeros_like(P)
                E[i, j] = 1e-6
                fd[i, j] = (float(f(P + E)) - float(f(P - E))) / 2e-6
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)
    g = np.asarray(tracer.grad(lambda p: tsl.cho_solve(tsl.cho_factor(p, lower=lower), b).sum())(P))
    assert not np.any(g[junk])


def test_trans_values_and_empty_chains():
    """lu_solve took any trans but 0 as a transposed solve, so trans='N' solved A^T x = b
    silently; solve_triangular took unknown values as no transpose. Both now take
    0/'N', 1/'T', 2/'C' and raise ValueError naming themselves otherwise. multi_dot of a
    chain with an empty dimension (opt_einsum then pairs operands that are not
    neighbours) gives NumPy's zeros."""
    rng = np.random.default_rng(5)
    A, b = rng.normal(size=(4, 4)) + 4 * np.eye(4), rng.normal(size=4)
    for t, m in ((0, A), ("N", A), (1, A.T), ("T", A.T), (2, A.T), ("C", A.T)):
        np.testing.assert_allclose(m @ np.asarray(tsl.lu_solve(tsl.lu_factor(A), b, trans=t)),
                                   b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            np.asarray(tsl.solve_triangular(np.triu(A), b, trans=t)),
            sla.solve_triangular(np.triu(A), b, trans=t), rtol=1e-12)
    for t in (3, -1, "X", 1.5, True):
        with pytest.raises(ValueError, match="lu_solve: trans must be"):
            tsl.lu_solve(tsl.lu_factor(A), b, trans=t)
        with pytest.raises(ValueError, match="solve_triangular: trans must be"):
            tsl.solve_triangular(np.triu(A), b, trans=t)
    for chain in ([np.ones((2, 0)), np.ones((0, 3)), np.ones((3, 2))],
                  [np.ones(0), np.ones((0, 3)), np.ones((3, 2))],
                  [np.ones((2, 3)), np.ones((3, 0)), np.ones((0, 2))]):
        want = np.linalg.multi_dot(chain)
        for f in (tla.multi_dot, tracer.jit(tla.multi_dot)):
            got = np.asarray(f(chain))
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_solves_from_factors_check_b_against_the_factor():
    """lu_solve, cho_solve and solve_triangular with a b of the wrong length (or wrong
    batch dimensions) raised the errors of the matmul or triangular_solve inside them;
    they raise SciPy's ValueError naming themselves and both shapes. Right shapes, batched
    factors and vmap over them still give SciPy's answers."""
    rng = np.random.default_rng(8)
    A = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    S = A @ A.T
    lu, cf = tsl.lu_factor(A), tsl.cho_factor(S)
    solvers = (("lu_solve", "lu", lambda b: tsl.lu_solve(lu, b)),
               ("cho_solve", "c", lambda b: tsl.cho_solve(cf, b)),
               ("solve_triangular", "a", lambda b: tsl.solve_triangular(np.triu(A), b)))
    for name, what, solve in solvers:
        for b in (np.ones(4), np.ones((4, 2)), np.float64(1.0), np.ones((2, 3, 1))):
            with pytest.raises(ValueError, match=rf"{name}: shapes of {what} \(3, 3\) and b "
                                                 rf"{re.escape(str(b.shape))}"):
                solve(b)
            with pytest.raises(ValueError, match=f"{name}: shapes of {what}"):
                tracer.jit(solve)(b)
    for b in (rng.normal(size=3), rng.normal(size=(3, 2))):
        np.testing.assert_allclose(np.asarray(tsl.lu_solve(lu, b)),
                                   sla.lu_solve(sla.lu_factor(A), b), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(tsl.cho_solve(cf, b)),
                                   sla.cho_solve(sla.cho_factor(S), b), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(tsl.solve_triangular(np.triu(A), b)),
                                   sla.solve_triangular(np.triu(A), b), rtol=1e-12)
    As = np.stack([A, 2 * A])
    bs = rng.normal(size=(2, 3))
    want = np.stack([np.linalg.solve(m, v) for m, v in zip(As, bs)])
    np.testing.assert_allclose(np.asarray(tsl.lu_solve(tracer.vmap(tsl.lu_factor)(As), bs)),
                               want, rtol=1e-12)
    np.testing.assert_allclose(
        np.asarray(tracer.vmap(lambda m, v: tsl.lu_solve(tsl.lu_factor(m), v))(As, bs)),
        want, rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="lu_solve: expected square"):
        tsl.lu_solve((np.ones((3, 4)), np.arange(3)), np.ones(3))
